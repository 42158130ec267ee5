"""The ProactiveBench proactive-suggestion reward (docs/spec.md §6, §7; De Min et al. §5, Appendix C).

``r_c = 1`` when the answer names the correct category, ``r_p`` when it names a valid proactive suggestion
(an action that moves the environment, e.g. "move the occluding object"), ``r_w = 0`` otherwise (an
abstention, a wrong category, an invalid action, an unparseable answer). The answer is parsed with
:func:`~proactive_rewards.parsing.parse_mcqa_answer`, the same parser the MCQA evaluator uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from proactive_rewards.parsing import _message_text, _standardize_full, parse_mcqa_answer


def _check_r_p(r_p: float) -> float:
    r_p = float(r_p)
    # a suggestion is worth no less than a wrong answer (0) and no more than the right one (1)
    if not (math.isfinite(r_p) and 0.0 <= r_p <= 1.0):
        raise ValueError(f"r_p must be a number in [0, 1] (the paper uses 0.5, 0.75 or 1.0), got {r_p!r}")
    return r_p


def answer_text(completion) -> str:
    """The answer of a single-turn completion: the string itself, or the last assistant message's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _message_text(completion)
    if isinstance(completion, (list, tuple)):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                return _message_text(message)
            if isinstance(message, str):
                return message
    return ""


def proactive_suggestion_reward(
    completion,
    options: Sequence[str],
    answer,
    valid_actions: Sequence[str] | None,
    *,
    r_p: float = 0.5,
    components: bool = False,
):
    """ProactiveBench GRPO reward: 1.0 for the correct category, ``r_p`` for a valid proactive suggestion, else 0.

    Args:
        completion (`str` or `list[dict]`): the model's answer (a string, or chat messages whose last assistant
            message is the answer).
        options (`list[str]`): the lettered options of the prompt, proactive actions first, then categories.
        answer (`str` or `int`): the correct category, as its text or its index in `options`.
        valid_actions (`list[str]`): the proactive suggestions that are valid in this state (`None` or empty: none
            is; as a TRL reward this column is required, see `proactive_rewards.trl`).
        r_p (`float`, *optional*, defaults to `0.5`): the proactive-suggestion reward (paper: 0.5, 0.75, 1.0).
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "correct", "proactive"}``.

    Example:

    >>> options = ["Move the occluding object.", "I do not know.", "cat", "dog"]
    >>> [proactive_suggestion_reward(a, options, "dog", ["Move the occluding object."]) for a in ("D", "A.", "C")]
    [1.0, 0.5, 0.0]
    """
    r_p = _check_r_p(r_p)
    options = list(options)
    index = parse_mcqa_answer(answer_text(completion), options)
    correct = proactive = False
    if index is not None:
        chosen = _standardize_full(options[index]) if isinstance(options[index], str) else None
        if isinstance(answer, int) and not isinstance(answer, bool):
            correct = index == answer
        else:
            correct = chosen == _standardize_full(str(answer))
        proactive = not correct and chosen in {_standardize_full(a) for a in valid_actions or () if isinstance(a, str)}
    overall = 1.0 if correct else r_p if proactive else 0.0
    if components:
        return {"overall": overall, "correct": float(correct), "proactive": float(proactive)}
    return overall
