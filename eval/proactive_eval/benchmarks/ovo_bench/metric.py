"""OVO-Bench offline scores, equal to the authors' ``score.py`` (docs/ovo_bench.md).

The results file is ``{"backward": [...], "realtime": [...], "forward": [...]}``: a multiple-choice result carries
``task``, ``response`` and ``ground_truth`` (the gold letter); a forward result is the annotation record whose
``test_info`` probes gained a ``response``. The rules, quirks included:

- multiple choice: right when the gold letter is a case-sensitive substring of the response (``"Answer: B"``
  is right for gold ``A``: it holds a capital A);
- REC: every digit run of the response concatenated must equal ``str(count)`` (``"3 or 4"`` reads 34);
- SSR / CRR: right when the response is exactly ``N`` (type 0) or ``Y`` (type 1), or holds ``No`` (type 0) /
  ``Yes`` (any other type) as a case-sensitive substring (``"Not sure"`` is right for type 0);
- a task's accuracy pools its results (or probes); a category is the mean of its tasks, grouped by the list a
  result is in, not its task name; ``overall`` is the mean of the three categories, in percent.

Where the authors' script would crash (a response that is neither text nor null, a result without its fields, a
task with nothing to score, a missing category), the item is scored wrong or left out, counted in ``malformed``,
and a missing category makes ``overall`` None.
"""

from __future__ import annotations

import re
from typing import Any

CATEGORY_NAMES = ("backward", "realtime", "forward")
_DIGITS = re.compile(r"\d+")


def _holds(gold: Any, response: Any) -> int | None:
    """``int(gold in response)``; 0 for a null response; None where Python's ``in`` raises (malformed)."""
    if response is None:
        return 0
    try:
        return int(gold in response)
    except TypeError:
        return None


def mc_score(response: Any, gold: Any) -> int | None:
    """A multiple-choice result: 1, 0, or None when the official script would crash."""
    return _holds(gold, response)


def rec_score(response: Any, count: Any) -> int | None:
    """A REC probe: the digit runs of the response, concatenated, against ``str(count)``."""
    if response is None:
        return 0
    if not isinstance(response, str):
        return None
    return int("".join(_DIGITS.findall(response)) == str(count))


def yes_no_score(response: Any, kind: Any) -> int | None:
    """An SSR / CRR probe of type `kind` (0: the answer is No; anything else: Yes)."""
    if (response == "N" and kind == 0) or (response == "Y" and kind == 1):
        return 1
    return _holds("No" if kind == 0 else "Yes", response)


def _probe_scores(result: dict) -> list[int | None]:
    task = result["task"]
    probes = result["test_info"]
    if task == "REC":
        return [rec_score(p.get("response"), p["count"]) if "response" in p else None for p in probes]
    if task in ("SSR", "CRR"):
        return [yes_no_score(p["response"], p["type"]) if "response" in p else None for p in probes]
    return []


def ovo_task_scores(results: dict) -> tuple[dict[str, dict[str, list[int]]], int]:
    """Per category, per task, the 0/1 scores in the official order; and the number of malformed items.

    A malformed item that the official script would score wrong had it not crashed counts 0; one that has no task
    (or probes) to put it under is left out. Both are counted in the second value.
    """
    scores: dict[str, dict[str, list[int]]] = {}
    malformed = 0
    for name in CATEGORY_NAMES:
        items = results.get(name) if isinstance(results, dict) else None
        per_task: dict[str, list[int]] = {}
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("task"), str):
                malformed += 1
                continue
            if name != "forward":
                if "response" in item and "ground_truth" in item:
                    value = mc_score(item["response"], item["ground_truth"])
                else:
                    value = None
                malformed += value is None
                per_task.setdefault(item["task"], []).append(value or 0)
                continue
            per_task.setdefault(item["task"], [])
            try:
                values = _probe_scores(item)
            except (KeyError, TypeError, AttributeError):  # no test_info, a probe without count / type
                malformed += 1
                continue
            malformed += sum(v is None for v in values)
            per_task[item["task"]].extend(v or 0 for v in values)
        empty = [task for task, values in per_task.items() if not values]  # the official divides by zero
        malformed += len(empty)
        scores[name] = {task: values for task, values in per_task.items() if values}
    return scores, malformed


def score_ovo_bench(results: dict) -> dict[str, Any]:
    """The official numbers of an OVO-Bench results file, in percent.

    Returns:
        `dict`: ``tasks`` (task → accuracy), ``categories`` (backward / realtime / forward → mean of its tasks, or
        None when it has no results), ``overall`` (mean of the three, None unless all three are present),
        ``counts`` (task → items scored) and ``malformed``.
    """
    scores, malformed = ovo_task_scores(results)
    tasks, counts, categories = {}, {}, {}
    for name in CATEGORY_NAMES:
        accs = []
        for task, values in scores[name].items():
            acc = sum(values) / len(values)
            accs.append(acc)
            tasks[task] = 100 * sum(values) / len(values)  # as the official prints it (not 100 * acc)
            counts[task] = len(values)
        categories[name] = 100 * sum(accs) / len(accs) if accs else None
    present = [categories[name] for name in CATEGORY_NAMES]
    overall = None if None in present else (present[0] + present[1] + present[2]) / 3
    return {"tasks": tasks, "categories": categories, "overall": overall, "counts": counts, "malformed": malformed}
