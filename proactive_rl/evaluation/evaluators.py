"""The evaluators the callback and `proactive-rl eval` run: streaming PRS, streaming PAUC, ProactiveBench MCQA and
ProactiveBench open-ended generation (OEG).

An evaluator is used in three stages, so that the expensive part is spread over ranks and the rest is not:

1. ``items()``: the episodes / environments, built once, identically on every rank (deterministic);
2. ``generate(model, processor, items)``: run the model on this rank's shard; returns picklable records
   (``{"id", "responses"}`` per episode, or ``{"id", "failed": reason}`` for an episode whose video could not be
   played; ``{"id", "success", "turns", ...}`` per environment, ``{"id", "answer", ...}`` per OEG question);
3. ``score(records, out_dir)``: on the main process, on the gathered records of every rank: the metrics of the
   benchmark scorers (`proactive_eval.metrics`, the code the rewards share) and the report files.

Metric names are flat (``prs_b``, ``atomic/prs_b``, ``pauc_w0.5``, ``acc``); numbers are × 100 as in the papers.
Streaming evaluators also log ``coverage`` (scored / total episodes, per task too) and ``failed_episodes``: an
episode whose video is missing, truncated or undecodable is skipped and named (``on_error: raise`` stops instead),
and its turns are classified by the one rule the rewards use (docs/spec.md §13).
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_rl.evaluation.config import EvaluatorConfig

logger = logging.getLogger(__name__)

_PRS_KEYS = ("prs_u", "prs_b", "prs_u_nopenalty", "prs_b_nopenalty", "resp_per_target_b", "median_latency_b")


@dataclass
class Scored:
    """What `Evaluator.score` returns: logged scalars, the full summary, sample rows and written files."""

    metrics: dict[str, float]
    summary: dict[str, Any]
    samples: list[list[Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def make_judge(config: dict[str, Any], **defaults):
    """A judge from an evaluator's ``judge`` block: `RuleJudge` for ``type: rule``, else `OpenAIJudge` with
    `defaults` under the block's own options (a judge that stays down fails the scoring stage)."""
    from proactive_eval.judges import OpenAIJudge, RuleJudge

    options = {k: v for k, v in config.items() if k != "type"}
    if config.get("type", "rule") == "rule":
        return RuleJudge(**options)
    return OpenAIJudge(**{"on_failure": "raise", **defaults, **options})


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _fmt_items(items) -> str:
    return "; ".join(f"{float(t):.1f}s {text}" for t, text, *_ in items)


class Evaluator:
    """Base class; see the module docstring."""

    SAMPLE_COLUMNS = ["evaluator", "id", "task", "targets", "responses", "score"]
    #: generate() stores each finished item through its `writer`, so an interrupted run can resume
    resumable = False

    def __init__(self, config: EvaluatorConfig, progress: bool = False, log_samples: int = 4):
        self.config, self.name = config, config.name
        self.progress, self.log_samples = progress, int(log_samples)
        self._items = None

    def items(self) -> list:
        if self._items is None:
            self._items = self._load()
            if self.config.max_items is not None:
                self._items = self._items[: self.config.max_items]
        return self._items

    def _load(self) -> list:
        raise NotImplementedError

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        """Records of this rank's `items`; `writer` (a `PredictionWriter`, streaming evaluators) receives each
        finished episode as it ends, for a resumable run."""
        raise NotImplementedError

    def score(self, records: list[dict], out_dir: Path | None, plots: bool = True) -> Scored:
        raise NotImplementedError


class _StreamingEvaluator(Evaluator):
    resumable = True

    def _load(self) -> list:
        from proactive_rl.data import load_mixture

        episodes, _ = load_mixture(self.config.episodes)
        return episodes

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        from proactive_eval.streaming import episode_errors, run_episode
        from proactive_rl.data.frames import frames_of
        from proactive_rl.evaluation.policy import model_policy

        policy = model_policy(model, processor, self.config.max_new_tokens, self.config.max_frames)
        unplayable = episode_errors()
        records = []
        for episode in items:
            try:
                outputs = run_episode(policy, episode, frame_source=frames_of, max_frames=self.config.max_frames)
            except unplayable as err:
                if self.config.on_error == "raise":
                    raise
                logger.warning("evaluator %r: episode %r not played: %s", self.name, episode.id, err)
                records.append({"id": episode.id, "failed": str(err)})
                continue
            if writer is not None:
                writer.write(episode.id, outputs)
            records.append({"id": episode.id, "responses": [(r.time, r.text, r.malformed) for r in outputs]})
        return records

    def _predictions(self, records: list[dict], out_dir: Path | None) -> tuple[dict[str, list], dict[str, str]]:
        """``(episode id → outputs, episode id → failure reason)``; the outputs are written to
        ``predictions.jsonl`` first (a judge that is down must not lose what the model said)."""
        from proactive_eval.predictions import atomic_write_text, prediction_line
        from proactive_rewards import Response

        failed = {r["id"]: r["failed"] for r in records if "failed" in r}
        predictions = {
            r["id"]: [Response(float(t), text, bool(malformed)) for t, text, malformed in r["responses"]]
            for r in records
            if "failed" not in r
        }
        if out_dir is not None:
            order = [e.id for e in self.items() if e.id in predictions]
            text = "".join(prediction_line(eid, predictions[eid]) for eid in order)
            atomic_write_text(out_dir / "predictions.jsonl", text)
        return predictions, failed

    def _coverage(self, results: dict, key: str, metrics: dict[str, float]) -> None:
        """``coverage`` (scored / total) and ``failed_episodes`` next to the metrics, overall and per group."""
        rows = [("", results[key]["overall"])] + [(f"{g}/", r) for g, r in results[key]["groups"].items()]
        for prefix, row in rows:
            scored, total = (int(x) for x in row["coverage"].split("/"))
            metrics[f"{prefix}coverage"] = scored / total if total else 0.0
        metrics["failed_episodes"] = float(results[key]["overall"]["failed_episodes"])

    def _samples(self, predictions: dict, scores: dict[str, float]) -> list[list[Any]]:
        rows = []
        for episode in self.items()[: self.log_samples]:
            responses = [
                (r.time, ("(malformed) " if r.malformed else "") + r.text) for r in predictions.get(episode.id, [])
            ]
            targets = [(t.time, t.text) for t in episode.targets]
            rows.append([self.name, episode.id, episode.task, _fmt_items(targets), _fmt_items(responses)])
            rows[-1].append(scores.get(episode.id))
        return rows


class PRSEvaluator(_StreamingEvaluator):
    """Streaming PRS-U / PRS-B on held-out episodes (docs/spec.md §4, P³I §4). Free-text tasks (intervention) take
    their content score from the ``judge`` block, as the intervention reward does by default (token-F1); the
    summary names the scorer of every task."""

    def content_scorers(self):
        from proactive_eval.metrics.content import JudgeScorer, content_scorers

        judge = self.config.judge
        if judge.get("type", "rule") == "rule":
            return content_scorers(f"rule:{judge.get('kind', 'token_f1')}")
        return content_scorers(JudgeScorer(make_judge(judge), f"openai:{judge['model']}@{judge['base_url']}"))

    def score(self, records, out_dir, plots=True) -> Scored:
        from proactive_eval.metrics import score_prs
        from proactive_eval.report import build_results, failure_rows, write_report

        predictions, failed = self._predictions(records, out_dir)
        episodes = [e for e in self.items() if e.id not in failed]
        scorers = self.content_scorers()
        report = score_prs(episodes, predictions, alpha=self.config.alpha, content_scorer=scorers)
        results = build_results(prs=report, failures=failure_rows(failed, self.items()))
        summary = {**results["prs"], "failures": results["failures"]}
        judge = next((s.judge for s in scorers.values() if hasattr(s, "judge")), None)
        if judge is not None:
            summary["judge_stats"] = judge.stats.as_dict()
        metrics = {k: summary["overall"][k] for k in _PRS_KEYS if summary["overall"].get(k) is not None}
        for task, stats in summary["groups"].items():
            if stats.get("prs_b") is not None:
                metrics[f"{task}/prs_b"] = stats["prs_b"]
        self._coverage(results, "prs", metrics)
        scored = Scored(metrics, summary)
        per_episode = {e.episode_id: 100 * e.results["B"].score for e in report.episodes}
        scored.samples = self._samples(predictions, per_episode)
        if out_dir is not None:
            written = write_report(
                out_dir, results, prs=report, episodes=episodes, predictions=predictions, plots=plots
            )
            scored.files = {k: str(v) for k, v in written.items()}
        return scored


class PAUCEvaluator(_StreamingEvaluator):
    """Streaming PAUC with a judge (docs/spec.md §5, ProactiveVideoQA): windowed targets are the reply spans."""

    def _load(self) -> list:
        episodes = super()._load()
        for episode in episodes:
            for i, target in enumerate(episode.targets):
                if target.window is None:
                    raise ValueError(
                        f"evaluator {self.name!r}: episode {episode.id!r} targets[{i}] has no window (PAUC needs "
                        "the reply span); use a prs evaluator for these episodes"
                    )
        return episodes

    def judge(self):
        return make_judge(self.config.judge)

    def score(self, records, out_dir, plots=True) -> Scored:
        from proactive_eval.metrics import score_pauc
        from proactive_eval.report import build_results, failure_rows, write_report

        predictions, failed = self._predictions(records, out_dir)
        episodes = [e for e in self.items() if e.id not in failed]
        judge = self.judge()
        result = score_pauc(episodes, predictions, judge, progress=self.progress)
        results = build_results(pauc=result, failures=failure_rows(failed, self.items()))
        summary = {**results["pauc"], "failures": results["failures"]}
        overall = summary["overall"]
        metrics = {f"pauc_w{o}": overall.get(f"omega={o}", 0.0) for o in result.omegas}
        metrics["answered_turns"] = float(overall.get("answered_turns", 0))
        self._coverage(results, "pauc", metrics)
        summary["judge_stats"] = judge.stats.as_dict()
        scored = Scored(metrics, summary)
        per_episode: dict[str, list[float]] = {}
        for turn in result.turns:
            per_episode.setdefault(turn.episode_id, []).append(100 * turn.pauc[0.5 if 0.5 in turn.pauc else 0])
        scored.samples = self._samples(predictions, {k: sum(v) / len(v) for k, v in per_episode.items()})
        if out_dir is not None:
            written = write_report(
                out_dir,
                results,
                pauc=result,
                episodes=episodes,
                predictions=predictions,
                plots=plots,
            )
            scored.files = {k: str(v) for k, v in written.items()}
        return scored


class MCQAEvaluator(Evaluator):
    """ProactiveBench MCQA environments: ``acc`` and ``ps`` (docs/spec.md §6)."""

    SAMPLE_COLUMNS = ["evaluator", "id", "dataset", "answers", "outcomes", "success"]

    def _load(self) -> list:
        envs = []
        for spec in self.config.environments:
            if "kind" in spec:
                from proactive_rl.synthetic import make_environments

                envs += make_environments(
                    spec["kind"], int(spec.get("n", 8)), int(spec.get("seed", 0)), int(spec.get("size", 64))
                )
            else:
                from proactive_rl.data.mcqa import proactivebench_environments

                envs += proactivebench_environments(
                    spec["path"],
                    spec["dataset"],
                    spec.get("data_dir"),
                    protocol=self.config.protocol,
                    skip=self.config.skip,
                )
        return envs

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        from proactive_eval.environments import run_environment
        from proactive_rl.evaluation.policy import mcqa_answer_fn

        answer = mcqa_answer_fn(model, processor, self.config.max_new_tokens)
        records = []
        for env in items:
            # a fresh copy: an environment is a stateful MDP and the same items are played at every evaluation
            outcome = run_environment(copy.deepcopy(env), answer)
            records.append(
                {
                    "id": outcome.id,
                    "dataset": getattr(env, "dataset", ""),
                    "success": bool(outcome.success),
                    "turns": int(outcome.turns),
                    "answers": list(outcome.answers),
                    "outcomes": list(getattr(outcome, "outcomes", [])),
                }
            )
        return records

    def score(self, records, out_dir, plots=True) -> Scored:
        from proactive_eval.environments import proactivebench_summary
        from proactive_eval.mcqa_report import mcqa_markdown, mcqa_results
        from proactive_eval.predictions import atomic_write_text

        summary = dict(proactivebench_summary(records))
        groups: dict[str, list[dict]] = {}
        for r in records:
            groups.setdefault(r["dataset"] or "all", []).append(r)
        summary["groups"] = {g: proactivebench_summary(rs) for g, rs in sorted(groups.items())}
        report = mcqa_results(records, self._protocol(), self.config.skip)
        summary["protocol"] = report["protocol"]  # which benchmark, and the samples scored per dataset
        metrics = {"acc": float(summary["acc"]), "ps": float(summary["ps"])}
        if len(groups) > 1:
            for g, s in summary["groups"].items():
                metrics[f"{g}/acc"] = float(s["acc"])
        samples = [
            [self.name, r["id"], r["dataset"], " | ".join(r["answers"]), " | ".join(r["outcomes"]), r["success"]]
            for r in records[: self.log_samples]
        ]
        scored = Scored(metrics, summary, samples)
        if out_dir is not None:
            path = out_dir / "outcomes.jsonl"
            atomic_write_text(path, _jsonl(records))
            atomic_write_text(out_dir / "report.md", mcqa_markdown(report, f"MCQA: {self.name}"))
            scored.files = {"outcomes": str(path), "report": str(out_dir / "report.md")}
        return scored

    def _protocol(self) -> str | None:
        """The benchmark protocol, when the environments are ProactiveBench files (synthetic ones have none)."""
        return self.config.protocol if any("path" in s for s in self.config.environments) else None


class OEGEvaluator(Evaluator):
    """ProactiveBench open-ended generation (docs/spec.md §6; ProactiveBench §3.1, App. B, Tables 8-9): one free-form answer
    per environment, to its first image and its question without options (`proactive_eval.oeg`), judged against
    the valid answers; ``agg`` / ``acc`` (category) / ``ps`` are rates × 100, overall and per dataset."""

    SAMPLE_COLUMNS = ["evaluator", "id", "dataset", "answer", "valid_answers", "judge", "aggregate"]

    def _load(self) -> list:
        from proactive_rl.data.mcqa import proactivebench_environments

        specs = self.config.environments
        protocol, skip = self.config.protocol, self.config.skip
        return [
            e
            for s in specs
            for e in proactivebench_environments(
                s["path"], s["dataset"], s.get("data_dir"), protocol=protocol, skip=skip
            )
        ]

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        from proactive_eval.oeg import oeg_question, oeg_valid_answers
        from proactive_rl.evaluation.policy import image_answer_fn, observation_image

        answer = image_answer_fn(model, processor, self.config.max_new_tokens)
        records = []
        for env in items:
            valid = oeg_valid_answers(env)
            observation = env.reset()
            prompt = oeg_question(observation.prompt, self.config.hint)
            text = answer(observation_image(observation), prompt)
            records.append(
                {"id": env.id, "dataset": env.dataset, "prompt": prompt, "valid_answers": valid, "answer": text}
            )
        return records

    def score(self, records, out_dir, plots=True) -> Scored:
        from proactive_eval.formats.proactivebench_protocol import protocol_line, protocol_summary
        from proactive_eval.judges import OEG_SYSTEM_PROMPT, oeg_prompt
        from proactive_eval.metrics import oeg_judgment, oeg_summary
        from proactive_eval.predictions import atomic_write_text

        if out_dir is not None:  # written before judging: a judge that is down must not lose what the model said
            atomic_write_text(out_dir / "predictions.jsonl", _jsonl(records))
        judge = make_judge(self.config.judge, system_prompt=OEG_SYSTEM_PROMPT)
        prompts = [oeg_prompt(r["prompt"], r["valid_answers"], r["answer"]) for r in records]
        raw = judge.complete_many(prompts, progress=self.progress)
        rows = [{**r, "judge": j, **oeg_judgment(j, r["valid_answers"], r["dataset"])} for r, j in zip(records, raw)]
        groups: dict[str, list[dict]] = {}
        for row in rows:
            groups.setdefault(row["dataset"], []).append(row)
        summary = {**oeg_summary(rows), "groups": {g: oeg_summary(rs) for g, rs in sorted(groups.items())}}
        counts = {g: s["n"] for g, s in summary["groups"].items()}
        summary["protocol"] = protocol_summary(self.config.protocol, counts, self.config.skip)
        summary["judge_stats"] = judge.stats.as_dict()
        keys = ("agg", "acc", "ps")
        metrics = {k: float(summary[k]) for k in keys}
        if len(groups) > 1:
            metrics.update({f"{g}/{k}": float(s[k]) for g, s in summary["groups"].items() for k in keys})
        columns = self.SAMPLE_COLUMNS[1:]
        samples = [[self.name] + [r[c] for c in columns] for r in rows[: self.log_samples]]
        scored = Scored(metrics, summary, samples)
        if out_dir is not None:
            atomic_write_text(out_dir / "judgments.jsonl", _jsonl(rows))
            table = ["| dataset | n | agg | acc | ps |", "|---|---|---|---|---|"]
            table += [
                f"| {g} | {s['n']} | {s['agg']:.1f} | {s['acc']:.1f} | {s['ps']:.1f} |"
                for g, s in summary["groups"].items()
            ]
            head = f"# OEG: {self.name}\n\n{protocol_line(summary['protocol'])}\n\n"
            atomic_write_text(out_dir / "report.md", head + "\n".join(table) + "\n")
            names = {"predictions": "predictions.jsonl", "judgments": "judgments.jsonl", "report": "report.md"}
            scored.files = {k: str(out_dir / f) for k, f in names.items()}
        return scored


EVALUATORS = {"prs": PRSEvaluator, "pauc": PAUCEvaluator, "mcqa": MCQAEvaluator, "oeg": OEGEvaluator}


def build_evaluators(configs: list[EvaluatorConfig], progress: bool = False, log_samples: int = 4) -> list[Evaluator]:
    """One `Evaluator` per config, in order."""
    return [EVALUATORS[c.type](c, progress=progress, log_samples=log_samples) for c in configs]
