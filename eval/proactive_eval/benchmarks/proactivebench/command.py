"""``proactive-eval mcqa``: play ProactiveBench MCQA environments with a policy and report acc / ps (docs/spec.md §6).

    proactive-eval mcqa --data-dir ProactiveBench/test --policy replay:answers.jsonl --out report/
    proactive-eval mcqa --data-dir ProactiveBench/test --datasets QD COCO --protocol unfiltered --policy oracle

``--data-dir`` is the authors' layout: ``<folder>_preprocessed.jsonl`` per dataset beside the extracted image
folders the records' templates are relative to. The paper's filtered benchmark is read unless ``--protocol
unfiltered``; the report (``report.md``, ``results.json``) names the protocol and the samples per dataset.

Policies: ``oracle`` (the environment's oracle where it has one — MS-COCO — else the correct category at
once), ``abstain`` (always the abstain option), ``replay:ANSWERS.jsonl`` (``{"id", "dataset", "answers":
[...]}`` per environment, answered in order) or ``package.module:factory`` (``factory()`` returns
``observation -> answer text``; it gets the images). A replay file supplies answers only: a record whose id is no
environment's, or that repeats an earlier record's id, is not played and is counted in ``results.json``
(``meta.replay_records_ignored``).
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from pathlib import Path

from proactive_eval.benchmarks.proactivebench.metric import DATASETS, dataset_key
from proactive_eval.predictions import atomic_write_text
from proactive_eval.records import EpisodeError, check_record, is_file, nonempty, read_records, shown

POLICY_HELP = "oracle | abstain | replay:ANSWERS.jsonl | package.module:factory"
ANSWERS_FIX = 'write one JSON line {"id": ..., "dataset": "ROD", "answers": ["A", ...]} per environment'


def read_answers(path: str | Path) -> tuple[dict[tuple[str, str], list[str]], int]:
    """A replay file's answers, ``(dataset acronym, id) → answers``, and how many records repeated an earlier
    record's ``(dataset, id)`` (the first is kept). Errors name the file, the record and the field."""
    if not is_file(path):
        raise EpisodeError(f"replay answers file not found: {shown(str(path))}")
    return parse_answers(nonempty(read_records(path), path, "answers", ANSWERS_FIX), path)


def parse_answers(records, path: str | Path) -> tuple[dict[tuple[str, str], list[str]], int]:
    """`read_answers` of records already read (`path` names them in errors); anything but a list is an error."""
    if not isinstance(records, list):
        raise EpisodeError(f"expected a list of answer records, got {shown(records)}; {ANSWERS_FIX}", file=str(path))
    answers: dict[tuple[str, str], list[str]] = {}
    repeated = 0
    for index, record in enumerate(records):
        try:
            rid, fail = check_record(record, str(path), ("id", "dataset", "answers"))
        except EpisodeError as err:
            raise EpisodeError(err.reason, file=str(path), record=f"#{index}", field=err.field) from None
        try:
            key = dataset_key(record["dataset"]) if isinstance(record["dataset"], str) else None
        except ValueError as err:
            raise fail("dataset", str(err)) from None
        if key is None:
            raise fail("dataset", f"must be a dataset acronym or folder name, got {shown(record['dataset'])}")
        items = record["answers"]
        if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
            raise fail("answers", f"must be a list of answer strings, got {shown(items)}")
        if (key, rid) in answers:
            repeated += 1
        else:
            answers[(key, rid)] = list(items)
    return answers, repeated


def replay_policy(answers: dict[tuple[str, str], list[str]], repeated: int = 0) -> Callable:
    """``policy_for(env) -> answer_fn`` that says the `answers` of ``(env.dataset, env.id)`` in order, then ""
    (giving up); ``.answers`` and ``.repeated`` stay on it for the report."""

    def replay_for(env):
        it = iter(answers.get((env.dataset, str(env.id)), []))
        return lambda obs: next(it, "")

    replay_for.answers, replay_for.repeated = answers, repeated  # counted in the report
    return replay_for


def make_mcqa_policy(spec: str) -> tuple[Callable, bool]:
    """``(policy_for(env) -> answer_fn, needs_images)`` for a policy spec (see the module docstring)."""
    # deferred: keeps `proactive-eval --help` light (the environments load the format readers)
    from proactive_eval.benchmarks.proactivebench.coco import is_abstention

    kind, _, rest = spec.partition(":")
    if spec == "oracle":

        def oracle_for(env):
            oracle = getattr(env, "oracle_answer", None)
            return (lambda obs: oracle()) if callable(oracle) else (lambda obs: env.answer)

        return oracle_for, False
    if spec == "abstain":
        return (lambda env: lambda obs: next((o for o in obs.options if is_abstention(o)), "")), False
    if kind == "replay" and rest:
        return replay_policy(*read_answers(rest)), False
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
    from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary
    from proactive_eval.benchmarks.proactivebench.environments import (
        ENVIRONMENTS_FIX,
        load_environments,
        run_environment,
    )
    from proactive_eval.benchmarks.proactivebench.report import mcqa_markdown, mcqa_results
    from proactive_eval.common.speed import timed

    data_dir = Path(args.data_dir)
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise EpisodeError(f"--out: {args.out} is a file; name a folder for the report (it is created if missing)")
    keys = [dataset_key(d) for d in (args.datasets or DATASETS)]
    policy_for, needs_images = make_mcqa_policy(args.policy)
    skip = {} if args.no_skip else None
    rows, in_file, played, known = [], {}, [], set()
    for key in keys:
        path = data_dir / f"{DATASETS[key]}_preprocessed.jsonl"
        if not is_file(path):
            if args.datasets:
                raise FileNotFoundError(f"{path}: no {key} file in --data-dir")
            continue
        envs = load_environments(path, key, data_dir, args.hint, needs_images, args.on_error, args.protocol, skip)
        if not envs.selection.in_file:
            raise EpisodeError(
                f"no records: the file is empty or holds an empty list; {ENVIRONMENTS_FIX}", file=str(path)
            )
        in_file[key] = envs.selection.in_file
        known |= {(key, str(env.id)) for env in envs}
        for env in envs[: args.max_items]:
            seconds: list[float] = []  # per answer, for the report's speed columns
            played.append(copy.deepcopy(env))  # as loaded, for the blind floor
            out = run_environment(env, timed(policy_for(env), seconds))
            rows.append({"id": out.id, "dataset": key, "success": out.success, "turns": out.turns,
                         "answers": out.answers, "outcomes": out.outcomes, "step_seconds": seconds})  # fmt: skip
    if not rows:
        raise FileNotFoundError(f"{data_dir}: no <folder>_preprocessed.jsonl of {', '.join(keys)}")
    meta = {"data_dir": str(data_dir), "policy": args.policy, "records_in_files": in_file}
    if hasattr(policy_for, "answers"):
        unknown = sum(key not in known for key in policy_for.answers)
        meta["replay_records_ignored"] = {"ids_matching_no_environment": unknown, "repeated_ids": policy_for.repeated}
    results = mcqa_results(rows, args.protocol, skip, meta, blind_floor=blind_mcqa_summary(played))
    text = mcqa_markdown(results)
    if "replay_records_ignored" in meta:
        ignored = meta["replay_records_ignored"]
        text += (
            f"\nreplay answers not played: {ignored['ids_matching_no_environment']} records matching no environment, "
            f"{ignored['repeated_ids']} repeating an id (the first is played)\n"
        )
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
