"""The image-blind policy of ProactiveBench MCQA environments (docs/spec.md §6, §14), and the swapped-images one.

A blind policy never looks at the image: it answers the same suggestion (an action text) ``n`` times, then the
same final answer, an option position (``"A."``) or a category text, for ``n`` in ``0..min(max_steps - 1, 4)``.
Every candidate is played on every environment by its own rules (`MCQAEnvironment.step`; the play branches from
copies, so each prefix of suggestions is stepped once), giving a (candidate × environment) matrix of successes and
turns. The policy with the most successes is fitted per dataset, on reference environments when given and by
leave-one-out otherwise (ties: fewer suggestions, then the earlier candidate); its ``acc`` / ``ps`` come from
`proactivebench_summary`, the scorer of the model's row.

`SwappedEnvironment` is the ``swap`` counterfactual of an environment: its own MDP (question, options, outcomes)
shown with the images of a partner environment, stepped with its first valid action whenever the played one
accepts a suggestion.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from proactive_eval.benchmarks.proactivebench.metric import oeg_judgment, oeg_summary, proactivebench_summary
from proactive_eval.judges import oeg_prompt

MAX_SUGGESTIONS = 4
MAX_CATEGORIES = 8
MAX_ACTIONS = 3


def _blind_copy(env):
    """A fresh copy of `env` that skips decoding images where it can (a blind policy never sees them)."""
    env = copy.deepcopy(env)
    if hasattr(env, "load_images"):
        env.load_images = False
    return env


def _candidates(envs: Sequence) -> tuple[list[str], list[str], int]:
    """``(suggestions, finals, most suggestions)`` of a set of environments, from their first observations."""
    actions, finals, positions, steps = Counter(), Counter(), 0, 1
    for env in envs:
        observation = _blind_copy(env).reset()
        actions.update(observation.valid_actions)
        finals.update(o for o in observation.options if o not in observation.valid_actions)
        positions = max(positions, len(observation.options))
        steps = max(steps, int(env.max_steps))
    letters = [f"{chr(65 + i)}." for i in range(positions)]
    texts = [t for t, _ in finals.most_common(MAX_CATEGORIES)]
    suggestions = [t for t, _ in actions.most_common(MAX_ACTIONS)]
    return suggestions, letters + texts, min(steps - 1, MAX_SUGGESTIONS)


def _policies(suggestions: list[str], finals: list[str], most: int) -> list[tuple[int, str, str]]:
    out = [(0, "", f) for f in finals]
    out += [(n, s, f) for n in range(1, most + 1) for s in suggestions for f in finals]
    return out


def _play(env, policies: list[tuple[int, str, str]]) -> tuple[np.ndarray, np.ndarray]:
    """``(success, turns)`` of every policy on `env`, each prefix of suggestions stepped once."""
    success, turns = np.zeros(len(policies), dtype=bool), np.zeros(len(policies), dtype=int)
    index = {p: i for i, p in enumerate(policies)}
    finals = list(dict.fromkeys(f for _, _, f in policies))

    def answer_all(state, n: int, suggestion: str, stopped: int | None) -> None:
        for final in finals:
            i = index.get((n, suggestion, final))
            if i is None:
                continue
            if stopped is None:
                success[i], turns[i] = copy.deepcopy(state).step(final).outcome == "correct", n + 1
            else:  # a suggestion already ended the episode (a fail) after `stopped` turns
                success[i], turns[i] = False, stopped

    state = _blind_copy(env)
    state.reset()
    answer_all(state, 0, "", None)
    most = max(n for n, _, _ in policies)
    for suggestion in dict.fromkeys(s for _, s, _ in policies if s):
        state, stopped = _blind_copy(env), None
        state.reset()
        for n in range(1, most + 1):
            if stopped is None and state.step(suggestion).done:
                stopped = n
            answer_all(state, n, suggestion, stopped)
    return success, turns


def blind_mcqa_summary(
    envs: Sequence, reference: Sequence | None = None, per_env: list | None = None
) -> dict[str, Any]:
    """The blind row of an MCQA evaluation: ``{"acc", "ps", "n", "groups": {dataset: {...}}, "fit": {dataset:
    how}, "policies": {dataset: {"suggestions", "suggestion", "answer", "described"}}}`` (module docstring). With
    `per_env` (a list), each environment's ``{"id", "dataset", "success", "turns"}`` is appended to it, for paired
    intervals against a model's (docs/spec.md §15)."""
    records, fit, policies = [], {}, {}
    for dataset in dict.fromkeys(getattr(e, "dataset", "") for e in envs):
        evaluated = [e for e in envs if getattr(e, "dataset", "") == dataset]
        fit_set = [e for e in reference or () if getattr(e, "dataset", "") == dataset]
        fit[dataset or "all"] = "reference" if fit_set else "leave_one_out"
        pool = fit_set or evaluated
        candidates = _policies(*_candidates(pool))
        played = [_play(e, candidates) for e in pool]
        wins = np.stack([s for s, _ in played], axis=1).astype(float)  # (candidates, environments)
        total = wins.sum(axis=1)
        best = int(np.argmax(total >= total.max() - 1e-9))
        n, suggestion, answer = candidates[best]
        said = f"{n} × {suggestion!r}, then " if n else ""
        policies[dataset or "all"] = {
            "suggestions": n,
            "suggestion": suggestion,
            "answer": answer,
            "described": f"{said}{answer!r}",
        }
        outcomes = played if not fit_set else [_play(e, [candidates[best]]) for e in evaluated]
        for col, env in enumerate(evaluated):
            if fit_set:
                pick, (success, turns) = 0, outcomes[col]
            else:
                rest = total - wins[:, col]
                pick, (success, turns) = int(np.argmax(rest >= rest.max() - 1e-9)), outcomes[col]
            records.append(
                {"id": env.id, "dataset": dataset, "success": bool(success[pick]), "turns": int(turns[pick])}
            )
    if per_env is not None:
        per_env.extend(records)
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["dataset"] or "all", []).append(r)
    summary = dict(proactivebench_summary(records))
    summary["groups"] = {g: proactivebench_summary(rs) for g, rs in sorted(groups.items())}
    return {**summary, "fit": fit, "policies": policies}


class SwappedEnvironment:
    """`env` (its question, options, outcomes and steps) shown with the images of `partner` (docs/spec.md §14)."""

    def __init__(self, env, partner):
        self.env, self.partner = env, partner
        self.id, self.dataset, self.max_steps = env.id, getattr(env, "dataset", ""), env.max_steps

    def _show(self, observation):
        return replace(observation, image=self._image, image_path=None)

    def reset(self):
        shown = self.partner.reset()
        self._image, self._partner_actions = shown.image, list(shown.valid_actions)
        return self._show(self.env.reset())

    def step(self, answer: str):
        result = self.env.step(answer)
        if result.done:
            return result
        if result.outcome == "proactive" and self._partner_actions:  # the partner reveals more too
            moved = self.partner.step(self._partner_actions[0])
            if moved.done or moved.observation is None:
                self._partner_actions = []
            else:
                self._image, self._partner_actions = moved.observation.image, list(moved.observation.valid_actions)
        return replace(result, observation=self._show(result.observation))


def _answers(valid: Sequence[str] | str) -> list[str]:
    """The valid answers of an OEG record (a list, or the authors' comma-separated string, as `oeg_judgment`)."""
    items = valid.split(",") if isinstance(valid, str) else valid
    return [a.strip() for a in items if a.strip()]


def blind_oeg_summary(items: Sequence[dict], judge, reference: Sequence[dict] | None = None) -> dict[str, Any]:
    """The blind row of an open-ended (OEG) evaluation: per dataset, the one answer text said for every image, out
    of the `MAX_ACTIONS` + 1 most common valid answers of the fit set, judged by the evaluation's judge
    (`oeg_judgment`) and fitted on ``agg`` (on `reference` items when given, else leave-one-out; ties: the more
    common text). Items are ``{"id", "dataset", "prompt", "valid_answers"}``; returns `oeg_summary` with
    ``groups``, ``fit`` and ``policies``."""
    chosen, fit, policies = [], {}, {}
    for dataset in dict.fromkeys(i["dataset"] for i in items):
        evaluated = [i for i in items if i["dataset"] == dataset]
        fit_set = [i for i in reference or () if i["dataset"] == dataset]
        fit[dataset] = "reference" if fit_set else "leave_one_out"
        pool = fit_set or evaluated
        counts = Counter(a for i in pool for a in _answers(i["valid_answers"]))
        texts = [t for t, _ in counts.most_common(MAX_ACTIONS + 1)]

        def judged(rows: Sequence[dict], candidates: list[str]) -> list[list[dict]]:
            prompts = [oeg_prompt(r["prompt"], r["valid_answers"], t) for r in rows for t in candidates]
            raw = iter(judge.complete_many(prompts, progress=False))
            return [[oeg_judgment(next(raw), r["valid_answers"], r["dataset"]) for _ in candidates] for r in rows]

        table = judged(pool, texts)
        agg = np.array([[j["aggregate"] for j in row] for row in table], dtype=float).T  # (texts, items)
        total = agg.sum(axis=1)
        best = int(np.argmax(total >= total.max() - 1e-9))
        policies[dataset] = {"answer": texts[best], "described": repr(texts[best])}
        if fit_set:
            chosen += [row[0] for row in judged(evaluated, [texts[best]])]
            continue
        for col, row in enumerate(table):
            rest = total - agg[:, col]
            chosen.append(row[int(np.argmax(rest >= rest.max() - 1e-9))])
    summary = dict(oeg_summary(chosen))
    by_dataset: dict[str, list[dict]] = {}
    for item, judgment in zip([i for d in fit for i in items if i["dataset"] == d], chosen):
        by_dataset.setdefault(item["dataset"], []).append(judgment)
    summary["groups"] = {d: oeg_summary(js) for d, js in sorted(by_dataset.items())}
    return {**summary, "fit": fit, "policies": policies}
