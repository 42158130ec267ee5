"""The blind answer of a PAUC task: one fixed text at one fixed point of every reply span (docs/spec.md §5, §14).

Candidates: the empty reply (no answer at all, PAUC 0.25 per turn) and each of the task's most common gold answers
said once per ground-truth turn at ``u + f·(v − u)``, ``f`` in ``0, 0.1, ..., 1``. Each text is judged once per
turn by the evaluation's judge; with a single kept answer a turn's PAUC has a closed form (docs/spec.md §5, step
4: the curve holds 0.5 until ``x = (1 − ω) f (v − u)``, then the judged score), so the search is an argmax over a
(candidate × turn) matrix, at ω = 0.5 (the paper's default; the others are reported for the same answer). It is
fitted per task on a reference split or by leave-one-out over the evaluated episodes (their turns left out
together), and the reported numbers come from `score_pauc` on the blind answers, with the same judge.

Silence is a blind answer too, and no blind floor is below it: where the fitted answers score below silence
(`SILENCE`, 25 at every ω) on a task at a reported ω (leave-one-out, a reference split unlike the evaluated
episodes, or reply spans that overlap, which the closed form does not model), that task's row at that ω is
silence's (``silence_at`` in its schedule); the other ω keep the fitted answers' numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from proactive_eval.benchmarks.p3i.blind import MAX_TEXTS
from proactive_eval.benchmarks.pvqa.metric import (
    MAX_SCORE,
    OMEGAS,
    START_SCORE,
    _judge_all,
    parse_judge_level,
    score_pauc,
)
from proactive_rewards import Response

FRACTIONS = 10
FIT_OMEGA = 0.5
#: PAUC × 100 of silence (no answer in any reply span), at every ω: the floor under every blind answer
SILENCE = 100 * START_SCORE / MAX_SCORE


def _question(episode) -> str:
    return str(episode.meta.get("question", episode.instruction)) if episode.meta else episode.instruction


def _candidates(fit_set: Sequence, max_texts: int) -> list[tuple[str, float]]:
    texts = [t for t, _ in Counter(g.text for e in fit_set for g in e.targets).most_common(max_texts)]
    return [("", 0.0)] + [(text, f) for text in texts for f in np.linspace(0.0, 1.0, FRACTIONS + 1)]


def _turn_values(episodes: Sequence, cands: list[tuple[str, float]], judge, omega: float) -> np.ndarray:
    """``(candidates, episodes)``: the sum over an episode's turns of the candidate's PAUC at `omega`."""
    texts = list(dict.fromkeys(text for text, _ in cands if text))
    requests = list(dict.fromkeys((_question(e), g.text, t) for e in episodes for g in e.targets for t in texts))
    levels = dict(zip(requests, _judge_all(judge, requests, progress=False)))
    out = np.zeros((len(cands), len(episodes)))
    for col, episode in enumerate(episodes):
        for target in episode.targets:
            u, v = target.window
            width = v - u
            for row, (text, f) in enumerate(cands):
                level = parse_judge_level(levels[(_question(episode), target.text, text)]) if text else None
                if level is None:
                    out[row, col] += START_SCORE / MAX_SCORE
                elif width > 0:
                    x = (1 - omega) * f * width
                    out[row, col] += (x * START_SCORE + (width - x) * (level - 1)) / (width * MAX_SCORE)
    return out


def blind_answers(episode, text: str, fraction: float) -> list[Response]:
    """What the blind answer says in `episode`: `text` at ``u + fraction·(v − u)`` of every reply span."""
    if not text:
        return []
    return sorted(
        (Response(g.window[0] + fraction * (g.window[1] - g.window[0]), text) for g in episode.targets),
        key=lambda r: r.time,
    )


def blind_pauc_summary(
    episodes: Sequence,
    judge,
    reference: Sequence | None = None,
    omegas: Sequence[float] = OMEGAS,
    max_texts: int = MAX_TEXTS,
    per_turn: list | None = None,
) -> dict[str, Any]:
    """The blind row of a PAUC evaluation (module docstring). With `per_turn` (a list), each scored turn's
    `TurnScore` is appended to it, silence's where silence is the floor: their mean is the row (paired intervals).

    Returns:
        `dict`: ``{"overall": {"omega=ω", ...}, "groups": {...}, "fit": {task: how}, "schedules": {task: {"pauc":
        {"text", "fraction", "described"}}}}`` (× 100, turn-weighted, as `score_pauc`).
    """
    omega = FIT_OMEGA if FIT_OMEGA in omegas else omegas[0]
    scored = [e for e in episodes if e.targets]
    pool = [e for e in reference or () if e.targets]
    predictions: dict[str, list[Response]] = {}
    fit, schedules = {}, {}
    floored: dict[str, list[float]] = {}  # task -> the ω at which silence beats its fitted answers
    for task in dict.fromkeys(e.task for e in scored):
        evaluated = [e for e in scored if e.task == task]
        fit_set = [e for e in pool if e.task == task]
        fit[task] = "reference" if fit_set else "leave_one_out"
        cands = _candidates(fit_set or evaluated, max_texts)
        values = _turn_values(fit_set or evaluated, cands, judge, omega)
        total = values.sum(axis=1)
        best = int(np.argmax(total >= total.max() - 1e-9))  # ties: the first (the empty reply, then common texts)
        text, fraction = cands[best][0], round(float(cands[best][1]), 3)
        said = f"{text!r} at {fraction:.2f} of every reply span" if text else "the empty reply"
        schedules[task] = {"pauc": {"text": text, "fraction": fraction, "described": said}}
        said = {}
        for col, episode in enumerate(evaluated):
            if fit_set:
                pick = best
            else:
                rest = total - values[:, col]
                pick = int(np.argmax(rest >= rest.max() - 1e-9))
            said[episode.id] = blind_answers(episode, *cands[pick])
        # silence is a blind answer too: where the fitted answers score below it (at an ω), silence is the floor
        task_rows = score_pauc(evaluated, said, judge, omegas=omegas, progress=False).summary()["overall"]
        below = [o for o in omegas if task_rows[f"omega={o}"] < SILENCE - 1e-9]
        if below:
            floored[task] = below
            scores = ", ".join(f"{task_rows[f'omega={o}']:.2f}" for o in below)
            schedules[task]["pauc"]["silence_at"] = below
            schedules[task]["pauc"]["described"] += (
                f"; silence at ω={', '.join(f'{o:g}' for o in below)} (the fitted answers scored {scores} there, "
                f"silence {SILENCE:.2f})"
            )
        predictions.update(said)
    scores = score_pauc(scored, predictions, judge, omegas=omegas, progress=False)
    result = scores.summary()
    if per_turn is not None:
        tasks = {e.id: e.task for e in scored}
        for turn in scores.turns:
            turn.pauc.update({o: SILENCE / 100 for o in floored.get(tasks[turn.episode_id], ())})
        per_turn.extend(scores.turns)
    for omega in dict.fromkeys(o for below in floored.values() for o in below):
        silent = {e.id: [] if omega in floored.get(e.task, ()) else predictions[e.id] for e in scored}
        at = score_pauc(scored, silent, judge, omegas=(omega,), progress=False).summary()
        for row, new in [(result["overall"], at["overall"])] + [
            (result["groups"][g], at["groups"][g]) for g in at["groups"]
        ]:
            row.update({k: new[k] for k in (f"omega={omega}", f"video_omega={omega}")})
    return {"overall": result["overall"], "groups": result["groups"], "fit": fit, "schedules": schedules}
