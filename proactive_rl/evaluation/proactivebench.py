"""The ProactiveBench evaluators (docs/spec.md §6): MCQA environments (``acc`` / ``ps``) and open-ended generation.

Both answer through `proactive_rl.evaluation.policy.image_answer_fn`: the observation's image and question in
one user turn, rendered by the processor's chat template exactly as the suggestion trainer's rows are
(`proactive_rl.data.mcqa`), decoded greedily. So `proactive-rl eval`, the training callback, the suggestion
trainer's end-of-run evaluation (``suggestion_eval.json``) and the demo prompt the same weights the same way.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, ClassVar

# a module attribute: tests patch run_environment
from proactive_eval.benchmarks.proactivebench import environments as proactive_environments
from proactive_eval.benchmarks.proactivebench.blind import SwappedEnvironment
from proactive_eval.benchmarks.proactivebench.environments import proactivebench_summary
from proactive_eval.benchmarks.proactivebench.metric import oeg_judgment, oeg_summary
from proactive_eval.benchmarks.proactivebench.oeg import oeg_question, oeg_valid_answers
from proactive_eval.benchmarks.proactivebench.protocol import PROTOCOLS, protocol_line, protocol_summary
from proactive_eval.benchmarks.proactivebench.report import mcqa_markdown, mcqa_results, speed_text
from proactive_eval.benchmarks.proactivebench.report import step_seconds_of as _step_seconds
from proactive_eval.common.counterfactual import (
    check_counterfactuals,
    counterfactual_id,
    split_counterfactual_id,
    swap_partners,
)
from proactive_eval.common.speed import step_speed, timed
from proactive_eval.judges import OEG_SYSTEM_PROMPT, oeg_prompt
from proactive_eval.predictions import atomic_write_text
from proactive_rl.data.mcqa import env_hint, parse_environments, suppressed_tokens
from proactive_rl.evaluation.base import Evaluator, EvaluatorConfig, Scored, register_evaluator
from proactive_rl.evaluation.config import check_flag, check_judge
from proactive_rl.evaluation.evaluators import make_judge
from proactive_rl.evaluation.looks import mcqa_looks, mcqa_looks_markdown, oeg_looks
from proactive_rl.evaluation.policy import image_answer_fn, mcqa_answer_fn, observation_image

#: An evaluator's synthetic environments default to this many when an entry sets no ``num_envs`` (or ``n``).
DEFAULT_NUM_ENVS = 8


def _jsonl(rows: list[dict]) -> str:
    """One JSON line per row, without its ``step_seconds`` (the timings are in the report's speed columns, so a
    resumed run writes the same outcomes file)."""
    return "".join(
        json.dumps({k: v for k, v in r.items() if k != "step_seconds"}, ensure_ascii=False) + "\n" for r in rows
    )


@dataclass
class ProactiveBenchConfig(EvaluatorConfig):
    """The fields of the ProactiveBench evaluators (``mcqa``, ``oeg``), beside `EvaluatorConfig`'s.

    Args:
        environments (`list`): ``{kind, n, seed, size}`` synthetic environments (plus any difficulty knob of
            `proactive_rl.synthetic.make_environments`; ``mcqa`` only) or ``{path, dataset, data_dir}``
            ProactiveBench JSONL.
        hint (`bool`, *optional*, defaults to `False`): ``mcqa``: add the dataset's hint to each question, as the
            suggestion trainer's ``hint`` does (ProactiveBench §4.3); ``oeg``: append the generic OEG hint to the
            question (ProactiveBench Table 9; `proactive_eval.benchmarks.proactivebench.oeg.OEG_HINT`).
        protocol (`str`, *optional*, defaults to `"filtered"`): on ProactiveBench JSONL, the paper's filtered
            benchmark (Table 1) or ``"unfiltered"`` (Table 4, and any data that is not the benchmark's, e.g.
            synthetic exports); `proactive_eval.benchmarks.proactivebench.protocol`.
        skip (`dict`, *optional*): the authors' skip arguments (default ``{strong_occlusions: false}``; ``{}`` keeps
            all).
        baseline_environments (`list`, *optional*): the environments the image-blind policy is fitted on (as
            ``environments``); without them, leave-one-out.
        counterfactual (`list`, *optional*): ``swap``: each environment also shown another evaluated environment's
            images (same dataset); reported as ``<metric>_swap`` and ``vision_gain_<metric>`` (docs/spec.md §14).
    """

    #: whether its environments must be ProactiveBench files (no synthetic ones)
    files_only: ClassVar[bool] = False

    environments: Any = None
    hint: bool = False
    protocol: str = "filtered"
    skip: dict[str, Any] | None = None
    baseline_environments: Any = None
    counterfactual: list[str] | None = None

    def check(self, where: str) -> None:
        super().check(where)
        check_flag(self.hint, f"{where}.hint")
        self.counterfactual = check_counterfactuals(self.counterfactual, f"{where}.counterfactual", ("swap",))
        _check_environments(self, where)
        if self.baseline_environments is not None:  # the environments the image-blind policy is fitted on
            if isinstance(self.baseline_environments, dict):
                self.baseline_environments = [self.baseline_environments]
            parse_environments(self.baseline_environments, f"{where}.baseline_environments", DEFAULT_NUM_ENVS)


@dataclass
class MCQAConfig(ProactiveBenchConfig):
    """An ``mcqa`` evaluator: `ProactiveBenchConfig`'s fields and

    Args:
        answer_letters_only (`bool`, *optional*, defaults to `False`): only option letters may be generated (the
            first N, N the most options any of the environments shows), as the suggestion trainer's
            ``answer_letters_only`` samples.
    """

    answer_letters_only: bool = False

    def check(self, where: str) -> None:
        check_flag(self.answer_letters_only, f"{where}.answer_letters_only")
        super().check(where)


@dataclass
class OEGConfig(ProactiveBenchConfig):
    """An ``oeg`` evaluator: `ProactiveBenchConfig`'s fields (``environments``: ProactiveBench files only) and

    Args:
        judge (`dict`, *optional*): the judge: ``{type: rule, kind: token_f1|rouge_l}`` (default: token_f1) or
            ``{type: openai, base_url, model, ...}`` (any `proactive_eval.judges.OpenAIJudge` argument; its
            ``system_prompt`` is the authors' OEG judge prompt).
    """

    files_only: ClassVar[bool] = True

    judge: dict[str, Any] | None = None

    def check(self, where: str) -> None:
        self.judge = check_judge(self.judge, f"{where}.judge")
        super().check(where)


def _check_environments(config: ProactiveBenchConfig, where: str) -> None:
    """``environments``: `proactive_rl.data.mcqa.parse_environments` (the training recipes' validator), plus what
    an evaluator needs: the protocol, and each ProactiveBench file's dataset (an oeg evaluator reads files only)."""
    base, where = where, f"{where}.environments"
    specs = parse_environments(config.environments, where, DEFAULT_NUM_ENVS)
    for i, spec in enumerate(specs):
        if config.files_only and spec.source == "synthetic":
            raise ValueError(
                f"{where}[{i}]: an oeg evaluator needs 'path' (ProactiveBench JSONL, with 'dataset' and 'data_dir')"
            )
        if spec.format == "rows":
            raise ValueError(f"{where}[{i}].format: an evaluator plays environments (format records), got rows")
    if isinstance(config.environments, dict):
        config.environments = [config.environments]
    if config.protocol not in PROTOCOLS:
        raise ValueError(f"{base}.protocol: expected one of {', '.join(PROTOCOLS)}, got {config.protocol!r}")
    if config.skip is not None and not isinstance(config.skip, dict):
        raise ValueError(f"{base}.skip: a mapping of field: value to skip, got {config.skip!r}")
    for i, spec in enumerate(specs):
        if spec.source != "synthetic" and spec.dataset is None:  # the protocol's id lists are per dataset
            raise ValueError(f"{where}[{i}]: a ProactiveBench path needs its 'dataset' (e.g. QD)")


def swap_images(envs: list) -> dict[str, Any]:
    """Environment id → the environment whose images it is shown with under ``swap`` (same dataset)."""
    by_id = {e.id: e for e in envs}
    pairs = swap_partners(envs, group=lambda e: getattr(e, "dataset", ""))
    return {eid: by_id[other] for eid, other in pairs.items()}


def _split_swapped(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(own records, swap records with their environment's id)``."""
    own, swapped = [], []
    for r in records:
        eid, kind = split_counterfactual_id(r["id"])
        (own if kind is None else swapped).append({**r, "id": eid})
    return own, swapped


def build_environments(specs: list, hint: bool = False, protocol: str | None = None, skip: dict | None = None) -> list:
    """The environments of an evaluator's ``environments`` entries (`EnvironmentSpec` mappings), in order
    (ProactiveBench files read under `protocol`, see `proactive_rl.data.mcqa.proactivebench_environments`)."""
    parsed = parse_environments(specs, "environments", DEFAULT_NUM_ENVS)
    return [env for spec in parsed for env in spec.build(hint, protocol=protocol, skip=skip)]


@register_evaluator("mcqa")
class MCQAEvaluator(Evaluator):
    """ProactiveBench MCQA environments: ``acc`` and ``ps`` (docs/spec.md §6), each played greedily to its end.

    ``hint`` adds each environment's hint to its questions; ``answer_letters_only`` lets only the first N option
    letters be generated, N the most options any environment of the evaluation shows (the suggestion trainer's
    decoding of a tiny model). Records: ``{"id", "dataset", "success", "turns", "answers", "outcomes"}``.
    """

    SAMPLE_COLUMNS = ["evaluator", "id", "dataset", "answers", "outcomes", "success"]
    config_class = MCQAConfig
    resumable, records_files = True, ("outcomes.jsonl", "outcomes_swap.jsonl")

    def _load(self) -> list:
        return build_environments(self.config.environments, self.config.hint, self.config.protocol, self.config.skip)

    def baseline_items(self) -> list | None:
        """The environments the image-blind policy is fitted on (``baseline_environments``), or `None`."""
        if self.config.baseline_environments is None:
            return None
        if getattr(self, "_baseline", None) is None:
            config = self.config
            self._baseline = build_environments(
                config.baseline_environments, config.hint, config.protocol, config.skip
            )
        return self._baseline

    def _protocol(self) -> str | None:
        """The benchmark protocol, when the environments are ProactiveBench files (synthetic ones have none)."""
        if not self.config.environments:  # items given directly
            return None
        specs = parse_environments(self.config.environments, "environments", DEFAULT_NUM_ENVS)
        return self.config.protocol if any(s.source != "synthetic" for s in specs) else None

    def suppressed_tokens(self, model, processor) -> list[int] | None:
        """Every token but the option letters (``answer_letters_only``), over all items (every rank alike)."""
        if not self.config.answer_letters_only:
            return None

        n_options = max(len(copy.deepcopy(env).reset().options) for env in self.items())
        return suppressed_tokens(model, getattr(processor, "tokenizer", processor), n_options)

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        answer = mcqa_answer_fn(model, processor, self.config.max_new_tokens, self.suppressed_tokens(model, processor))
        partners = swap_images(self.items()) if "swap" in (self.config.counterfactual or []) else {}
        records = []
        for env in self._progress(items, "env"):
            hint = env_hint(env, self.config.hint)
            # a fresh copy: an environment is a stateful MDP and the same items are played at every evaluation
            played = [(env.id, copy.deepcopy(env))]
            if env.id in partners:  # the swap counterfactual: the same MDP shown another environment's images
                swapped = SwappedEnvironment(copy.deepcopy(env), copy.deepcopy(partners[env.id]))
                played.append((counterfactual_id(env.id, "swap"), swapped))
            done = []
            for rid, playing in played:
                seconds: list[float] = []  # per answer, for the report's speed columns
                outcome = proactive_environments.run_environment(
                    playing, timed(lambda observation, hint=hint: answer(observation, hint), seconds)
                )
                done.append(
                    {
                        "id": rid,
                        "dataset": getattr(env, "dataset", ""),
                        "success": bool(outcome.success),
                        "turns": int(outcome.turns),
                        "answers": list(outcome.answers),
                        "outcomes": list(getattr(outcome, "outcomes", [])),
                        "step_seconds": seconds,
                    }
                )
            records += done
            for record in reversed(done) if writer is not None else ():
                writer.write_record(record)  # its swap run first: a stored environment has all of its runs
        return records

    def score(self, records, out_dir, plots=True) -> Scored:
        records, swapped = _split_swapped(records)
        summary = dict(proactivebench_summary(records))
        groups: dict[str, list[dict]] = {}
        for r in records:
            groups.setdefault(r["dataset"] or "all", []).append(r)
        summary["groups"] = {g: proactivebench_summary(rs) for g, rs in sorted(groups.items())}
        report = mcqa_results(records, self._protocol(), self.config.skip)
        summary["protocol"] = report["protocol"]  # which benchmark, and the samples scored per dataset
        metrics = {"acc": float(summary["acc"]), "ps": float(summary["ps"])}
        summary["speed"] = report["speed"]["pooled"]
        if len(groups) > 1:
            for g, s in summary["groups"].items():
                metrics[f"{g}/acc"] = float(s["acc"])
        looks_metrics, looks = mcqa_looks(self, records, swapped)
        metrics.update(looks_metrics)
        summary.update(looks)
        samples = [
            [self.name, r["id"], r["dataset"], " | ".join(r["answers"]), " | ".join(r["outcomes"]), r["success"]]
            for r in records[: self.log_samples]
        ]
        scored = Scored(metrics, summary, samples)
        if out_dir is not None:
            path = out_dir / "outcomes.jsonl"
            atomic_write_text(path, _jsonl(records))
            markdown = mcqa_markdown(report, f"MCQA: {self.name}") + mcqa_looks_markdown(summary)
            atomic_write_text(out_dir / "report.md", markdown)
            if swapped:
                atomic_write_text(out_dir / "outcomes_swap.jsonl", _jsonl(swapped))
            scored.files = {"outcomes": str(path), "report": str(out_dir / "report.md")}
        return scored


@register_evaluator("oeg")
class OEGEvaluator(Evaluator):
    """ProactiveBench open-ended generation (docs/spec.md §6; ProactiveBench §3.1, App. B, Tables 8-9): one
    free-form answer per environment, to its first image and its question without options (`proactive_eval.benchmarks.proactivebench.oeg`), judged against
    the valid answers; ``agg`` / ``acc`` (category) / ``ps`` are rates × 100, overall and per dataset."""

    SAMPLE_COLUMNS = ["evaluator", "id", "dataset", "answer", "valid_answers", "judge", "aggregate"]
    config_class = OEGConfig
    resumable, records_files = True, ("predictions.jsonl",)

    def _load(self) -> list:
        return build_environments(self.config.environments, protocol=self.config.protocol, skip=self.config.skip)

    def baseline_items(self) -> list[dict] | None:
        """The ``{"id", "dataset", "prompt", "valid_answers"}`` the blind answer is fitted on, or `None`."""
        if self.config.baseline_environments is None:
            return None

        config = self.config
        envs = build_environments(config.baseline_environments, protocol=config.protocol, skip=config.skip)
        return [
            {"id": e.id, "dataset": e.dataset, "prompt": oeg_question(e.reset().prompt, config.hint),
             "valid_answers": oeg_valid_answers(e)}
            for e in envs
        ]  # fmt: skip

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        answer = image_answer_fn(model, processor, self.config.max_new_tokens)
        partners = swap_images(self.items()) if "swap" in (self.config.counterfactual or []) else {}
        records = []
        for env in self._progress(items, "env"):
            valid = oeg_valid_answers(env)
            observation = env.reset()
            prompt = oeg_question(observation.prompt, self.config.hint)
            shown = [(env.id, observation)]
            if env.id in partners:  # the swap counterfactual: the same question about another environment's image
                shown.append((counterfactual_id(env.id, "swap"), copy.deepcopy(partners[env.id]).reset()))
            done = []
            for rid, seen in shown:
                seconds: list[float] = []  # the answer's wall time, for the report's speed columns
                text = timed(answer, seconds)(observation_image(seen), prompt)
                done.append(
                    {"id": rid, "dataset": env.dataset, "prompt": prompt, "valid_answers": valid, "answer": text}
                    | {"step_seconds": seconds}
                )
            records += done
            for record in reversed(done) if writer is not None else ():
                writer.write_record(record)  # its swap answer first: a stored environment has all of its answers
        return records

    def score(self, records, out_dir, plots=True) -> Scored:
        if out_dir is not None:  # written before judging: a judge that is down must not lose what the model said
            atomic_write_text(out_dir / "predictions.jsonl", _jsonl(records))
        judge = make_judge(self.config.judge, cache_dir=out_dir, system_prompt=OEG_SYSTEM_PROMPT)
        records, swapped = _split_swapped(records)
        prompts = [oeg_prompt(r["prompt"], r["valid_answers"], r["answer"]) for r in records + swapped]
        raw = judge.complete_many(prompts, progress=self.progress)
        rows = [{**r, "judge": j, **oeg_judgment(j, r["valid_answers"], r["dataset"])} for r, j in zip(records, raw)]
        swapped_rows = [
            oeg_judgment(j, r["valid_answers"], r["dataset"]) for r, j in zip(swapped, raw[len(records) :])
        ]
        groups: dict[str, list[dict]] = {}
        for row in rows:
            groups.setdefault(row["dataset"], []).append(row)
        summary = {**oeg_summary(rows), "groups": {g: oeg_summary(rs) for g, rs in sorted(groups.items())}}
        counts = {g: s["n"] for g, s in summary["groups"].items()}
        summary["protocol"] = protocol_summary(self.config.protocol, counts, self.config.skip)
        summary["judge_stats"] = judge.stats.as_dict()
        summary["speed"] = step_speed(_step_seconds(rows))
        keys = ("agg", "acc", "ps")
        metrics = {k: float(summary[k]) for k in keys}
        looks_metrics, looks = oeg_looks(self, rows, swapped, swapped_rows, judge)
        metrics.update(looks_metrics)
        summary.update(looks)
        if len(groups) > 1:
            metrics.update({f"{g}/{k}": float(s[k]) for g, s in summary["groups"].items() for k in keys})
        columns = self.SAMPLE_COLUMNS[1:]
        samples = [[self.name] + [r[c] for c in columns] for r in rows[: self.log_samples]]
        scored = Scored(metrics, summary, samples)
        if out_dir is not None:
            atomic_write_text(out_dir / "judgments.jsonl", _jsonl(rows))
            speed = {g: step_speed(_step_seconds(rs)) for g, rs in groups.items()}
            speed["all"] = summary["speed"]
            table = ["| dataset | n | agg | acc | ps | answers/s | latency median (s) | latency p95 (s) |"]
            table += ["|---|---|---|---|---|---|---|---|"]
            rows_of = [(g, s, speed[g]) for g, s in summary["groups"].items()] + [("all", summary, speed["all"])]
            table += [
                f"| {g} | {s['n']} | {s['agg']:.1f} | {s['acc']:.1f} | {s['ps']:.1f} | {speed_text(v)} |"
                for g, s, v in rows_of
            ]
            blind = summary.get("blind")
            if blind:
                table.append(
                    f"| blind floor (never looks) | {blind.get('n', '–')} | {blind['agg']:.1f} | {blind['acc']:.1f} | "
                    f"{blind['ps']:.1f} | – | – | – |"
                )
            head = f"# OEG: {self.name}\n\n{protocol_line(summary['protocol'])}\n\n"
            atomic_write_text(out_dir / "report.md", head + "\n".join(table) + "\n")
            names = {"predictions": "predictions.jsonl", "judgments": "judgments.jsonl", "report": "report.md"}
            scored.files = {k: str(out_dir / f) for k, f in names.items()}
        return scored
