"""Content scorers ``c(ŷ, y) ∈ [0, 1]`` for PRS (docs/spec.md §4): exact match for structured outputs, and for
free-text tasks (intervention) the scorer the intervention reward uses, token-F1, or a judge.

Each scorer carries a `name`, which the reports print beside the numbers it produced:

- ``exact_match``: `proactive_rewards.exact_match` (normalised equality, integers as integers);
- ``rule:token_f1``: `proactive_rewards.token_f1`, the intervention reward's default, so the benchmark number and
  the reward give "please stop" against "stop" the same credit (2/3);
- ``rule:rouge_l``: ROUGE-L F1 (`proactive_eval.judges.rules.rouge_l`);
- ``openai:MODEL@URL`` (or any `Judge`): the PAUC judge prompt (question = the episode's instruction, the target
  as the ground truth, the response as the prediction) rated 1..3, ``c = (level - 1) / 2``; an unparseable answer
  gives 0. All prompts of an evaluation are sent in one concurrent, cached batch (:meth:`JudgeScorer.prefetch`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from proactive_eval.judges import pauc_prompt
from proactive_eval.judges.rules import rouge_l
from proactive_rewards import exact_match, token_f1
from proactive_rewards.task_table import get_task, list_tasks


class NamedScorer:
    """A content scorer ``(response_text, target_text) -> c`` with the `name` the reports show."""

    def __init__(self, name: str, fn: Callable[[str, str], float]):
        self.name, self.fn = name, fn

    def __call__(self, response_text: str, target_text: str) -> float:
        return self.fn(response_text, target_text)

    def __repr__(self) -> str:
        return f"<content scorer {self.name}>"


class JudgeScorer:
    """``c = (level - 1) / 2`` from a judge's PAUC-style rating of one response against one target.

    PRS asks for one ``(response, target)`` pair at a time; :meth:`prefetch` sends every pair an evaluation will ask
    in one batch first (``judge.score_many``: concurrent, cached), and :meth:`bind` gives the per-episode scorer
    that reads the answers (asking the judge only for a pair that was not prefetched).

    Args:
        judge (`Judge`): e.g. `proactive_eval.judges.OpenAIJudge`.
        name (`str`): shown in the reports (e.g. ``openai:gpt-4.1@https://...``).
    """

    def __init__(self, judge, name: str):
        self.judge, self.name = judge, name
        self._levels: dict[tuple[str, str, str], int | None] = {}

    def prefetch(self, requests: Iterable[tuple[str, str, str]], progress: bool = False) -> None:
        """Judge every ``(question, target_text, response_text)`` not yet judged, in one batch."""
        todo = [r for r in dict.fromkeys(requests) if r not in self._levels]
        if todo:
            levels = self.judge.score_many([pauc_prompt(q, g, r) for q, g, r in todo], progress=progress)
            self._levels.update(zip(todo, levels))

    def bind(self, question: str) -> Callable[[str, str], float]:
        """The scorer of one episode, whose instruction is the judge's question."""

        def score(response_text: str, target_text: str) -> float:
            key = (question, target_text, response_text)
            if key not in self._levels:
                self.prefetch([key])
            level = self._levels[key]
            return 0.0 if level is None else (float(level) - 1.0) / 2.0

        return score

    def __repr__(self) -> str:
        return f"<content scorer {self.name}>"


def rule_scorer(kind: str = "token_f1") -> NamedScorer:
    """``rule:token_f1`` (the intervention reward's scorer) or ``rule:rouge_l``."""
    if kind == "token_f1":
        return NamedScorer("rule:token_f1", token_f1)
    if kind == "rouge_l":
        return NamedScorer("rule:rouge_l", lambda response, target: rouge_l(target, response))
    raise ValueError(f"unknown rule scorer {kind!r}; expected token_f1 or rouge_l")


def exact_scorer() -> NamedScorer:
    return NamedScorer("exact_match", exact_match)


def content_scorers(free_text=None) -> dict[str, NamedScorer | JudgeScorer]:
    """The PRS content scorer of every task of the task table: `free_text` (default ``rule:token_f1``) for the
    tasks whose `TaskSpec.content` is ``free_text``, exact match (integers as integers) for the rest (docs/spec.md §4).

    Args:
        free_text (`NamedScorer`, `JudgeScorer` or `str`, *optional*): the free-text scorer, or a rule spec
            (``"rule:token_f1"``, ``"rule:rouge_l"``).

    Example:

    >>> scorers = content_scorers()
    >>> scorers["intervention"].name, round(scorers["intervention"]("please stop", "stop"), 4), scorers["atomic"].name
    ('rule:token_f1', 0.6667, 'exact_match')
    """
    if free_text is None:
        free_text = rule_scorer("token_f1")
    elif isinstance(free_text, str):
        kind, _, rest = free_text.partition(":")
        if kind != "rule":
            raise ValueError(f"a content scorer spec must be rule:token_f1 or rule:rouge_l, got {free_text!r}")
        free_text = rule_scorer(rest)
    exact = exact_scorer()
    return {task: free_text if get_task(task).content == "free_text" else exact for task in list_tasks()}


def scorer_name(scorer) -> str:
    """The name a report shows for a content scorer (a plain function: its ``__name__``)."""
    if scorer is None:
        return "exact_match"
    return str(getattr(scorer, "name", getattr(scorer, "__name__", type(scorer).__name__)))
