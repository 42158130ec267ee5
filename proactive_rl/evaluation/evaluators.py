"""The streaming evaluators: PRS (docs/spec.md §4) and PAUC (§5) over held-out episodes, played through the
KV-cache streaming policy; the ProactiveBench ones (MCQA, OEG) are in `proactive_rl.evaluation.proactivebench`.

Each is an `Evaluator` (`proactive_rl.evaluation.base`: items → generate on this rank's shard → score on the main
process) registered under its ``type``. Records are ``{"id", "responses"}`` per episode, or ``{"id", "failed":
reason}`` for an episode whose video could not be played; scores come from the benchmark scorers
(`proactive_eval.metrics`, the code the rewards share). Metric names are flat (``prs_b``,
``atomic/prs_b``, ``pauc_w0.5``); numbers are × 100 as in the papers. Streaming evaluators also log ``coverage``
(scored / total episodes, per task too) and ``failed_episodes``: an episode whose video is missing, truncated or
undecodable is skipped and named (``on_error: raise`` stops instead), and its turns are classified by the one rule
the rewards use (docs/spec.md §13). They are resumable (`proactive_rl.evaluation.resume`).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.benchmarks.pvqa.metric import score_pauc
from proactive_eval.commands.report import build_results, failure_rows, write_report
from proactive_eval.common.content import JudgeScorer, content_scorers
from proactive_eval.common.counterfactual import check_counterfactuals
from proactive_eval.common.malformed import malformed_warning
from proactive_eval.judges import OpenAIJudge, RuleJudge
from proactive_eval.predictions import atomic_write_text, prediction_line
from proactive_rewards import ALPHA, Response
from proactive_rl.data import load_mixture
from proactive_rl.data.frames import frames_of
from proactive_rl.data.mixture import parse_mixture
from proactive_rl.errors import InputError
from proactive_rl.evaluation.base import Evaluator, EvaluatorConfig, Scored, check_count, register_evaluator
from proactive_rl.evaluation.config import check_judge
from proactive_rl.evaluation.looks import (
    counterfactual_sources,
    pauc_looks,
    play_counterfactuals,
    prs_looks,
    split_counterfactuals,
    write_counterfactuals,
)
from proactive_rl.streaming.batch import Batcher

logger = logging.getLogger(__name__)

_PRS_KEYS = (
    "prs_u",
    "prs_b",
    "prs_u_nopenalty",
    "prs_b_nopenalty",
    "prs_b_timing",
    "resp_per_target_b",
    "median_latency_b",
    "malformed_outputs",
)


JUDGE_CACHE_NAME = "judge_cache.sqlite"
ON_ERROR = ("skip", "raise")


@dataclass
class StreamingConfig(EvaluatorConfig):
    """The fields of the streaming evaluators (``prs``, ``pauc``), beside `EvaluatorConfig`'s.

    Args:
        episodes (`list`): held-out episode sources, the form of ``dataset_mixture``
            (`proactive_rl.data.mixture.DatasetSource`: episode files or synthetic tasks).
        max_frames (`int`, *optional*): keep only the latest K frames in context (docs/spec.md §2).
        judge (`dict`, *optional*): ``pauc``: the judge; ``prs``: the content scorer of free-text tasks
            (intervention, docs/spec.md §4). ``{type: rule, kind: token_f1|rouge_l}`` (default: token_f1, the
            intervention reward's scorer) or ``{type: openai, base_url, model, ...}`` (any
            `proactive_eval.judges.OpenAIJudge` argument).
        batch_size (`int`, *optional*, defaults to `8`): episodes played in lockstep, one batched vision call and
            one batched language-model call per step (`proactive_rl.streaming.batch`; the same predictions as one
            at a time, ``1``); each holds its own KV cache, so memory grows with it.
        on_error (`str`, *optional*, defaults to `"skip"`): an episode whose video is missing, truncated or
            undecodable is skipped, named in the summary and counted in ``coverage`` (``skip``), or fails the
            evaluator (``raise``).
        baseline_episodes (`list`, *optional*): the split the blind schedule is fitted on (episode sources, as
            ``episodes``; e.g. the training episodes); without it, leave-one-out on the evaluated episodes
            (docs/spec.md §14).
        counterfactual (`list`, *optional*): frame counterfactuals to play besides the episodes' own frames:
            ``swap`` (another evaluated episode's frames, same task) and ``freeze`` (the first frame repeated);
            reported as ``<metric>_swap`` and ``vision_gain_<metric>`` (docs/spec.md §14).
    """

    episodes: Any = None
    max_frames: int | None = None
    judge: dict[str, Any] | None = None
    batch_size: int = 8
    on_error: str = "skip"
    baseline_episodes: Any = None
    counterfactual: list[str] | None = None

    def check(self, where: str) -> None:
        super().check(where)
        if self.on_error not in ON_ERROR:
            raise InputError(f"{where}.on_error: expected one of {', '.join(ON_ERROR)}, got {self.on_error!r}")
        check_count(self.max_frames, f"{where}.max_frames")
        check_count(self.batch_size, f"{where}.batch_size", optional=False)
        self.judge = check_judge(self.judge, f"{where}.judge")
        self.counterfactual = check_counterfactuals(self.counterfactual, f"{where}.counterfactual", ("swap", "freeze"))
        if self.episodes is None:
            raise ValueError(f"{where}: a {self.type} evaluator needs 'episodes' (a list of episode sources)")
        self.episodes = parse_mixture(self.episodes, f"{where}.episodes")
        if self.baseline_episodes is not None:
            self.baseline_episodes = parse_mixture(self.baseline_episodes, f"{where}.baseline_episodes")


@dataclass
class PRSConfig(StreamingConfig):
    """A ``prs`` evaluator: `StreamingConfig`'s fields and

    Args:
        alpha (`float`, *optional*, defaults to `0.05`): PRS temporal decay (docs/spec.md §4).
    """

    alpha: float = ALPHA


@dataclass
class PAUCConfig(StreamingConfig):
    """A ``pauc`` evaluator: `StreamingConfig`'s fields (its ``judge`` scores each answer, docs/spec.md §5)."""


def make_judge(config: dict[str, Any], cache_dir: Path | None = None, **defaults):
    """A judge from an evaluator's ``judge`` block: `RuleJudge` for ``type: rule``, else `OpenAIJudge` with
    `defaults` under the block's own options (a judge that stays down fails the scoring stage). Without a
    ``cache_path`` of its own an LLM judge caches its answers in ``<cache_dir>/judge_cache.sqlite`` (the evaluator's
    folder), so a re-run there, killed or resumed, pays for no prompt twice."""
    options = {k: v for k, v in config.items() if k != "type"}
    if config.get("type", "rule") == "rule":
        return RuleJudge(**options)
    if cache_dir is not None:
        defaults.setdefault("cache_path", str(Path(cache_dir) / JUDGE_CACHE_NAME))
    return OpenAIJudge(**{"on_failure": "raise", **defaults, **options})


def _fmt_items(items) -> str:
    return "; ".join(f"{float(t):.1f}s {text}" for t, text, *_ in items)


class _LockedWriter:
    """A prediction writer shared by the episodes of a batch (worker threads): one line at a time."""

    def __init__(self, writer, lock):
        self.writer, self.lock = writer, lock

    def write(self, episode_id, outputs) -> None:
        with self.lock:
            self.writer.write(episode_id, outputs)

    def write_record(self, record) -> None:
        with self.lock:
            self.writer.write_record(record)


class _StreamingEvaluator(Evaluator):
    resumable = True

    def _load(self) -> list:
        episodes, _ = load_mixture(self.config.episodes)
        return episodes

    def baseline_items(self) -> list | None:
        """The episodes the blind schedule is fitted on (``baseline_episodes``), or `None` (leave-one-out)."""
        if self.config.baseline_episodes is None:
            return None
        if getattr(self, "_baseline", None) is None:
            self._baseline = load_mixture(self.config.baseline_episodes)[0]
        return self._baseline

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        # deferred: tests monkeypatch this name where it is defined
        from proactive_rl.evaluation.policy import model_policy

        config = self.config
        sources = counterfactual_sources(self, frames_of)
        if config.batch_size == 1 or len(items) < 2:
            policy = model_policy(model, processor, config.max_new_tokens, config.max_frames)
            return [
                r for episode in self._progress(items, "episode") for r in self._play(policy, episode, sources, writer)
            ]
        # episodes in lockstep (`proactive_rl.streaming.batch`): one policy per episode, on the batcher's sessions

        batcher, lock = Batcher(model, processor), threading.Lock()
        writer = None if writer is None else _LockedWriter(writer, lock)
        bar = self._progress_bar(len(items), "episode")

        def play(episode) -> list[dict]:
            policy = model_policy(model, processor, config.max_new_tokens, config.max_frames, batcher=batcher)
            records = self._play(policy, episode, sources, writer)
            if bar is not None:
                with lock:
                    bar.update()
            return records

        try:
            return [r for records in batcher.map(items, play, config.batch_size) for r in records]
        finally:
            if bar is not None:
                bar.close()

    def _play(self, policy, episode, sources: dict, writer=None) -> list[dict]:
        """One episode's records: its counterfactual runs, then its own outputs (or why it could not be played);
        each handed to `writer` as it ends."""
        # deferred: tests monkeypatch this name where it is defined
        from proactive_eval.streaming import episode_errors, run_episode

        unplayable = episode_errors()
        # the counterfactuals first: a stored episode (resume) then has them stored too
        records = play_counterfactuals(self, policy, episode, sources, unplayable, writer)
        seconds: list[float] = []  # per frame step; in lockstep batches, the batch step each frame waited for
        try:
            outputs = run_episode(
                policy, episode, frame_source=frames_of, max_frames=self.config.max_frames, step_seconds=seconds
            )
        except unplayable as err:
            if self.config.on_error == "raise":
                raise
            logger.warning("evaluator %r: episode %r not played: %s", self.name, episode.id, err)
            return records + [{"id": episode.id, "failed": str(err)}]
        if writer is not None:
            writer.write(episode.id, outputs)
        responses = [(r.time, r.text, r.malformed) for r in outputs]
        return records + [{"id": episode.id, "responses": responses, "step_seconds": seconds}]

    def _predictions(self, records: list[dict], out_dir: Path | None) -> tuple[dict[str, list], dict[str, str]]:
        """``(episode id → outputs, episode id → failure reason)``; the outputs are written to
        ``predictions.jsonl`` first (a judge that is down must not lose what the model said). The counterfactual
        runs go to `counterfactual_runs` (kind → episode id → outputs) and ``predictions_counterfactual.jsonl``;
        the per-frame step seconds of the episodes played in this run (not resumed ones) to `step_seconds`."""
        records, self.counterfactual_runs = split_counterfactuals(records)
        self.step_seconds = {r["id"]: r["step_seconds"] for r in records if "step_seconds" in r}
        write_counterfactuals(out_dir, self.counterfactual_runs, [e.id for e in self.items()])

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

    def _results(self, failed: dict[str, str], episodes: list, predictions: dict, **scored) -> dict[str, Any]:
        """`build_results` of the `scored` metric (``prs=`` or ``pauc=``), its failures and speed columns."""
        failures = failure_rows(failed, self.items())
        return build_results(**scored, failures=failures, episodes=episodes, predictions=predictions,
                             step_seconds=self.step_seconds)  # fmt: skip

    def _coverage(self, results: dict, key: str, metrics: dict[str, float]) -> None:
        """``coverage`` (scored / total) and ``failed_episodes`` next to the metrics, overall and per group."""
        rows = [("", results[key]["overall"])] + [(f"{g}/", r) for g, r in results[key]["groups"].items()]
        for prefix, row in rows:
            scored, total = (int(x) for x in row["coverage"].split("/"))
            metrics[f"{prefix}coverage"] = scored / total if total else 0.0
        metrics["failed_episodes"] = float(results[key]["overall"]["failed_episodes"])

    def _warn_malformed(self, summary: dict) -> None:
        """Log, and list in ``summary["warnings"]``, that most of the model's outputs are malformed."""
        warning = malformed_warning(summary["overall"], f"the model (evaluator {self.name!r})")
        if warning:
            logger.warning(warning)
            summary.setdefault("warnings", []).append(warning)

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


@register_evaluator("prs")
class PRSEvaluator(_StreamingEvaluator):
    """Streaming PRS-U / PRS-B on held-out episodes (docs/spec.md §4, P³I §4). Free-text tasks (intervention) take
    their content score from the ``judge`` block, as the intervention reward does by default (token-F1); the
    summary names the scorer of every task."""

    config_class = PRSConfig

    def content_scorers(self, cache_dir: Path | None = None):
        judge = self.config.judge
        if judge.get("type", "rule") == "rule":
            return content_scorers(f"rule:{judge.get('kind', 'token_f1')}")
        scorer = JudgeScorer(make_judge(judge, cache_dir), f"openai:{judge['model']}@{judge['base_url']}")
        return content_scorers(scorer)

    def score(self, records, out_dir, plots=True) -> Scored:
        predictions, failed = self._predictions(records, out_dir)
        episodes = [e for e in self.items() if e.id not in failed]
        scorers = self.content_scorers(out_dir)
        report = score_prs(episodes, predictions, alpha=self.config.alpha, content_scorer=scorers)
        results = self._results(failed, episodes, predictions, prs=report)
        summary = {**results["prs"], "failures": results["failures"]}
        judge = next((s.judge for s in scorers.values() if hasattr(s, "judge")), None)
        if judge is not None:
            summary["judge_stats"] = judge.stats.as_dict()
        metrics = {k: summary["overall"][k] for k in _PRS_KEYS if summary["overall"].get(k) is not None}
        self._warn_malformed(summary)
        for task, stats in summary["groups"].items():
            for key in ("prs_b", "prs_b_timing"):
                if stats.get(key) is not None:
                    metrics[f"{task}/{key}"] = stats[key]
        self._coverage(results, "prs", metrics)
        looks_metrics, looks = prs_looks(self, episodes, predictions, self.counterfactual_runs, scorers)
        metrics.update(looks_metrics)
        summary.update(looks)
        results["prs"].update(looks)  # the report's tables show the blind and counterfactual rows
        scored = Scored(metrics, summary)
        per_episode = {e.episode_id: 100 * e.results["B"].score for e in report.episodes}
        scored.samples = self._samples(predictions, per_episode)
        if out_dir is not None:
            written = write_report(
                out_dir, results, prs=report, episodes=episodes, predictions=predictions, plots=plots
            )
            for kind, rows in self.counterfactual_episodes.items():  # per-episode scores for paired intervals
                written[f"prs_episodes_{kind}"] = out_dir / f"prs_episodes_{kind}.jsonl"
                atomic_write_text(written[f"prs_episodes_{kind}"], "".join(json.dumps(r) + "\n" for r in rows))
            scored.files = {k: str(v) for k, v in written.items()}
        return scored


@register_evaluator("pauc")
class PAUCEvaluator(_StreamingEvaluator):
    """Streaming PAUC with a judge (docs/spec.md §5, ProactiveVideoQA): windowed targets are the reply spans."""

    config_class = PAUCConfig

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

    def judge(self, cache_dir: Path | None = None):
        return make_judge(self.config.judge, cache_dir)

    def score(self, records, out_dir, plots=True) -> Scored:
        predictions, failed = self._predictions(records, out_dir)
        episodes = [e for e in self.items() if e.id not in failed]
        judge = self.judge(out_dir)
        result = score_pauc(episodes, predictions, judge, progress=self.progress)
        results = self._results(failed, episodes, predictions, pauc=result)
        summary = {**results["pauc"], "failures": results["failures"]}
        overall = summary["overall"]
        self._warn_malformed(summary)
        metrics = {f"pauc_w{o}": overall.get(f"omega={o}", 0.0) for o in result.omegas}
        metrics["answered_turns"] = float(overall.get("answered_turns", 0))
        metrics["malformed_outputs"] = float(overall.get("malformed_outputs", 0))
        self._coverage(results, "pauc", metrics)
        looks_metrics, looks = pauc_looks(self, episodes, predictions, self.counterfactual_runs, judge, result.omegas)
        metrics.update(looks_metrics)
        summary.update(looks)
        results["pauc"].update(looks)
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
            # the blind answer's per-turn scores, the same ids as pauc_turns.jsonl: paired intervals (§15)
            written["pauc_turns_blind"] = out_dir / "pauc_turns_blind.jsonl"
            lines = (json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in self.blind_turns)
            atomic_write_text(written["pauc_turns_blind"], "".join(lines))
            scored.files = {k: str(v) for k, v in written.items()}
        return scored
