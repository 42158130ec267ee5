"""``proactive-eval mcqa``: play ProactiveBench MCQA environments with a policy and report acc / ps (docs/spec.md §6).

    proactive-eval mcqa --data-dir ProactiveBench/test --policy replay:answers.jsonl --out report/
    proactive-eval mcqa --data-dir ProactiveBench/test --datasets QD COCO --protocol unfiltered --policy oracle

``--data-dir`` is the authors' layout: ``<folder>_preprocessed.jsonl`` per dataset beside the extracted image
folders the records' templates are relative to. The paper's filtered benchmark is read unless ``--protocol
unfiltered``; the report (``report.md``, ``results.json``) names the protocol and the samples per dataset.

Policies: ``oracle`` (the environment's oracle where it has one — MS-COCO — else the correct category at
once), ``abstain`` (always the abstain option), ``replay:ANSWERS.jsonl`` (``{"id", "dataset", "answers":
[...]}`` per environment, answered in order) or ``package.module:factory`` (``factory()`` returns
``observation -> answer text``; it gets the images).
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from pathlib import Path

from proactive_eval.metrics.proactivebench import DATASETS, dataset_key
from proactive_eval.predictions import atomic_write_text
from proactive_eval.records import EpisodeError, read_records

POLICY_HELP = "oracle | abstain | replay:ANSWERS.jsonl | package.module:factory"


def make_mcqa_policy(spec: str) -> tuple[Callable, bool]:
    """``(policy_for(env) -> answer_fn, needs_images)`` for a policy spec (see the module docstring)."""
    # deferred: keeps `proactive-eval --help` light (the environments load the format readers)
    from proactive_eval.coco_environment import is_abstention

    kind, _, rest = spec.partition(":")
    if spec == "oracle":

        def oracle_for(env):
            oracle = getattr(env, "oracle_answer", None)
            return (lambda obs: oracle()) if callable(oracle) else (lambda obs: env.answer)

        return oracle_for, False
    if spec == "abstain":
        return (lambda env: lambda obs: next((o for o in obs.options if is_abstention(o)), "")), False
    if kind == "replay" and rest:
        answers = {(str(r["dataset"]), str(r["id"])): list(r["answers"]) for r in read_records(rest)}

        def replay_for(env):
            it = iter(answers.get((env.dataset, str(env.id)), []))
            return lambda obs: next(it, "")

        return replay_for, False
    if rest and "." in kind:
        try:
            factory = getattr(importlib.import_module(kind), rest)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot import policy factory {spec!r}: {err}") from None
        fn = factory()
        return (lambda env: fn), True
    raise ValueError(f"unknown MCQA policy {spec!r}; expected {POLICY_HELP}")


def cmd_mcqa(args) -> int:
    try:
        return _run(args)
    except EpisodeError:  # it names the file, record and field; the CLI prints it as one line
        raise
    except (ValueError, FileNotFoundError) as err:
        raise EpisodeError(str(err)) from None


def _run(args) -> int:
    # deferred: keeps `proactive-eval --help` light (the environments load the format readers)
    from proactive_eval.baseline_mcqa import blind_mcqa_summary
    from proactive_eval.environments import load_environments, run_environment
    from proactive_eval.mcqa_report import mcqa_markdown, mcqa_results
    from proactive_eval.speed import timed

    data_dir = Path(args.data_dir)
    keys = [dataset_key(d) for d in (args.datasets or DATASETS)]
    policy_for, needs_images = make_mcqa_policy(args.policy)
    skip = {} if args.no_skip else None
    rows, in_file, played = [], {}, []
    for key in keys:
        path = data_dir / f"{DATASETS[key]}_preprocessed.jsonl"
        if not path.exists():
            if args.datasets:
                raise FileNotFoundError(f"{path}: no {key} file in --data-dir")
            continue
        envs = load_environments(path, key, data_dir, args.hint, needs_images, args.on_error, args.protocol, skip)
        in_file[key] = envs.selection.in_file
        for env in envs[: args.max_items]:
            seconds: list[float] = []  # per answer, for the report's speed columns
            played.append(copy.deepcopy(env))  # as loaded, for the blind floor
            out = run_environment(env, timed(policy_for(env), seconds))
            rows.append({"id": out.id, "dataset": key, "success": out.success, "turns": out.turns,
                         "answers": out.answers, "outcomes": out.outcomes, "step_seconds": seconds})  # fmt: skip
    if not rows:
        raise FileNotFoundError(f"{data_dir}: no <folder>_preprocessed.jsonl of {', '.join(keys)}")
    meta = {"data_dir": str(data_dir), "policy": args.policy, "records_in_files": in_file}
    results = mcqa_results(rows, args.protocol, skip, meta, blind_floor=blind_mcqa_summary(played))
    text = mcqa_markdown(results)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        outcomes = ({k: v for k, v in r.items() if k != "step_seconds"} for r in rows)  # timings: results.json
        atomic_write_text(out / "outcomes.jsonl", "".join(json.dumps(r) + "\n" for r in outcomes))
        atomic_write_text(out / "results.json", json.dumps(results, indent=1) + "\n")
        atomic_write_text(out / "report.md", text)
        print(f"wrote {out / 'report.md'}, results.json, outcomes.jsonl")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("mcqa", help="play ProactiveBench MCQA environments (filtered benchmark by default)")
    p.add_argument("--data-dir", required=True, help="folder with <folder>_preprocessed.jsonl and the images")
    p.add_argument("--datasets", nargs="+", help=f"acronyms or folder names (default: all of {', '.join(DATASETS)})")
    p.add_argument("--policy", required=True, help=POLICY_HELP)
    p.add_argument("--protocol", default="filtered", choices=("filtered", "unfiltered"), help="default: filtered")
    p.add_argument("--no-skip", action="store_true", help="keep the records the authors skip (weak occlusions)")
    p.add_argument("--hint", action="store_true", help="append each dataset's hint to the question")
    p.add_argument("--max-items", type=int, help="play only the first N environments per dataset")
    p.add_argument("--on-error", default="raise", choices=("raise", "skip"), help="bad records: stop or skip")
    p.add_argument("--out", help="report folder: report.md, results.json, outcomes.jsonl")
    p.set_defaults(func=cmd_mcqa)
