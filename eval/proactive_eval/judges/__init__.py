"""Judges for PAUC (docs/spec.md §5) and ProactiveBench OEG (docs/spec.md §6): an OpenAI-compatible LLM backend and rule scorers.

>>> judge = RuleJudge("token_f1")
>>> judge.score_many([pauc_prompt("What is cooking?", "boiling pasta", "pasta is boiling")])
[3]
>>> pauc_judge_fn(judge)("What is cooking?", "boiling pasta", "a dog runs")
1
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from proactive_eval.judges.base import Judge, JudgeStats
from proactive_eval.judges.cache import JudgeCache
from proactive_eval.judges.openai_judge import OpenAIJudge
from proactive_eval.judges.prompts import (
    OEG_SYSTEM_PROMPT,
    PAUC_SYSTEM_PROMPT,
    oeg_prompt,
    parse_bits,
    parse_level,
    pauc_prompt,
    split_oeg_prompt,
    split_pauc_prompt,
    strip_thinking,
)
from proactive_eval.judges.rules import RuleJudge, rouge_l, similarity_to_level, token_f1
from proactive_eval.judges.transport import ChatTransport, JudgeError, chat_url


def pauc_judge_fn(judge: Judge) -> Callable[[str, str, str], int | None]:
    """Adapt a judge to the ``judge(question, gold, prediction) -> level | None`` form of `metrics.pauc_turn`.

    The returned function has a ``prefetch(triples, progress=True)`` method: call it with every
    ``(question, gold, prediction)`` an evaluation will ask, so that an LLM judge answers them concurrently
    and the per-turn calls that follow are served from memory.
    """
    if isinstance(judge, RuleJudge):

        def fn(question: str, gold: str, prediction: str) -> int | None:
            return judge.score_pair(gold, prediction)

    else:

        def fn(question: str, gold: str, prediction: str) -> int | None:
            return judge.score_many([pauc_prompt(question, gold, prediction)], progress=False)[0]

    def prefetch(triples: Iterable[tuple[str, str, str]], progress: bool = True) -> list[int | None]:
        return judge.score_many([pauc_prompt(*t) for t in triples], progress=progress)

    fn.prefetch = prefetch
    fn.judge = judge
    return fn


__all__ = [
    "OEG_SYSTEM_PROMPT",
    "PAUC_SYSTEM_PROMPT",
    "ChatTransport",
    "Judge",
    "JudgeCache",
    "JudgeError",
    "JudgeStats",
    "OpenAIJudge",
    "RuleJudge",
    "chat_url",
    "oeg_prompt",
    "parse_bits",
    "parse_level",
    "pauc_judge_fn",
    "pauc_prompt",
    "rouge_l",
    "similarity_to_level",
    "split_oeg_prompt",
    "split_pauc_prompt",
    "strip_thinking",
    "token_f1",
]
