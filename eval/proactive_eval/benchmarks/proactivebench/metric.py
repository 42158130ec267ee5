"""ProactiveBench metrics (docs/spec.md §6): the MCQA outcome of one answer, acc / ps, and the OEG aggregate.

Answer parsing is :func:`proactive_rewards.parsing.parse_mcqa_answer`, the same code the proactive-suggestion
reward calls (one scorer for reward and benchmark). It follows the authors' package: the full answer first
(a leading ``X.`` option letter dropped, lower-cased, spaces removed), then a single option letter, with the
actions lettered first and the categories after them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from proactive_eval.judges.prompts import parse_bits
from proactive_rewards.parsing import parse_mcqa_answer

#: How many leading entries of an OEG valid-answer list are proactive suggestions (authors' ``open_ended_gen.py``).
PREDICTION_THR = {"ROD": 2, "VSOD": 3, "MVP-N": 2, "IN-C": 1, "QD": 1, "CIT": 2, "COCO": 2}
#: The authors' dataset folder names, by acronym.
DATASETS = {
    "ROD": "Realistic-Occlusion-Dataset",
    "VSOD": "OcclusionDataSet-MM20",
    "MVP-N": "MVP-N",
    "IN-C": "ImageNet-C",
    "QD": "QuickDraw",
    "CIT": "ChangeIt",
    "COCO": "coco2014",
}
OUTCOMES = ("correct", "proactive", "fail")


def dataset_key(name: str) -> str:
    """The acronym of a ProactiveBench dataset given its acronym or folder name.

    >>> dataset_key("QuickDraw"), dataset_key("MVP-N")
    ('QD', 'MVP-N')
    """
    if name in PREDICTION_THR:
        return name
    for key, folder in DATASETS.items():
        if name == folder:
            return key
    raise ValueError(
        f"unknown ProactiveBench dataset {name!r}; expected one of {', '.join(DATASETS)} or its folder name"
    )


def classify_answer(
    answer: str,
    actions: Sequence[str],
    valid_actions: Iterable[str],
    categories: Sequence[str],
    answer_category: str | None,
) -> tuple[str, int | None]:
    """``(outcome, option index)`` of one MCQA answer; the index is into ``actions + categories``."""
    index = parse_mcqa_answer(answer, list(actions) + list(categories))
    if index is None:
        return "fail", None
    if index >= len(actions):
        correct = answer_category is not None and categories[index - len(actions)] == answer_category
        return ("correct" if correct else "fail"), index
    return ("proactive" if actions[index] in set(valid_actions) else "fail"), index


def proactivebench_outcome(
    answer: str,
    actions: Sequence[str],
    valid_actions: Iterable[str],
    categories: Sequence[str],
    answer_category: str | None,
) -> str:
    """The outcome of one MCQA answer: ``"correct"``, ``"proactive"`` or ``"fail"`` (docs/spec.md §6).

    Args:
        answer (`str`): the model's answer (full option text, ``"B."``-style letter, or anything else).
        actions (`Sequence[str]`): the action options shown at this step (abstention included), lettered first.
        valid_actions (`Iterable[str]`): the actions that are valid proactive suggestions at this step.
        categories (`Sequence[str]`): the category options, lettered after the actions.
        answer_category (`str`, *optional*): the correct category; `None` when no category may be answered at
            this step (e.g. the fully occluded first ROD frame).

    A correct category is ``"correct"``; a valid action is ``"proactive"``; an abstention, a wrong category,
    an invalid action or an unparseable answer is ``"fail"``.

    >>> actions, cats = ["Move the box to the left.", "I do not know."], ["cat", "dog", "cow", "hen"]
    >>> [proactivebench_outcome(a, actions, actions[:1], cats, "dog") for a in ("D. dog", "A", "B.", "C", "bird")]
    ['correct', 'proactive', 'fail', 'fail', 'fail']
    """
    return classify_answer(answer, actions, valid_actions, categories, answer_category)[0]


def proactivebench_summary(outcomes: Iterable) -> dict[str, float]:
    """MCQA ``acc`` = 100 × success rate and ``ps`` = mean over episodes of (turns − 1) (docs/spec.md §6).

    `outcomes` holds `EpisodeOutcome` objects (or dicts) with ``success`` and ``turns``.

    >>> proactivebench_summary([{"success": True, "turns": 3}, {"success": False, "turns": 1}])
    {'acc': 50.0, 'ps': 1.0, 'n': 2}
    """
    rows = [(o["success"], o["turns"]) if isinstance(o, dict) else (o.success, o.turns) for o in outcomes]
    if not rows:
        return {"acc": float("nan"), "ps": float("nan"), "n": 0}
    n = len(rows)
    return {"acc": 100.0 * sum(bool(s) for s, _ in rows) / n, "ps": sum(t - 1 for _, t in rows) / n, "n": n}


def oeg_judgment(raw_judge_output: str | None, valid_answers: Sequence[str] | str, dataset: str) -> dict[str, int]:
    """Score one OEG answer from the judge's 0/1 list (authors' ``parse_judge_prediction``; docs/spec.md §6).

    The list has one bit per valid answer, proactive suggestions first: ``proactive_suggestion`` = any 1 among
    the first ``PREDICTION_THR[dataset]``, ``category_prediction`` = any 1 among the rest, ``aggregate`` = either.
    A missing list, or one of the wrong length, scores 0 on all three.

    >>> oeg_judgment("...\\n0, 1, 0", ["Rotate the object", "Move the camera", "mug"], "MVP-N")
    {'proactive_suggestion': 1, 'category_prediction': 0, 'aggregate': 1}
    >>> oeg_judgment("1,1", ["Rotate the object", "Move the camera", "mug"], "MVP-N")["aggregate"]
    0
    """
    if isinstance(valid_answers, str):
        valid_answers = [a for a in valid_answers.split(",") if a.strip()]
    bits = parse_bits(raw_judge_output, len(valid_answers))
    if bits is None:
        return {"proactive_suggestion": 0, "category_prediction": 0, "aggregate": 0}
    thr = PREDICTION_THR[dataset_key(dataset)]
    ps, cp = int(1 in bits[:thr]), int(1 in bits[thr:])
    return {"proactive_suggestion": ps, "category_prediction": cp, "aggregate": int(ps or cp)}


def oeg_summary(judgments: Iterable[dict[str, int]]) -> dict[str, float]:
    """``agg``, ``acc`` (category) and ``ps`` rates × 100 over OEG judgments (the paper's Tables 8-9)."""
    rows = list(judgments)
    n = len(rows)
    if not n:
        return {"agg": float("nan"), "acc": float("nan"), "ps": float("nan"), "n": 0}
    mean = lambda key: 100.0 * sum(r[key] for r in rows) / n  # noqa: E731
    return {"agg": mean("aggregate"), "acc": mean("category_prediction"), "ps": mean("proactive_suggestion"), "n": n}
