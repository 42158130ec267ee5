"""Parsing model output: text normalisation, content matching and state-token turns (docs/spec.md §2, §4, §6).

Everything here is total on model output: any string, any list, any unicode, any size is parsed
into *something* (malformed turns are counted, not raised), because a reward must score every
completion a policy can produce.

Completion forms understood by :func:`parse_turns` (the TRL ``completions`` entry of one row):

- a **string**. With timestamps (``<t=12.0s>``, as rendered by the state-token dialogue), each
  timestamp starts an assistant turn at that time. Without timestamps, each state token starts a
  new turn (``"</Silence></Response> 3"`` is two turns) and times come from ``times``.
- a **list of chat messages** (TRL conversational format: ``{"role", "content"}`` dicts, content a
  string or a list of ``{"type": "text", "text": ...}`` parts). Several assistant messages are one
  turn each; a single assistant message is split like a string (TRL puts a whole multi-turn
  completion in one message). A turn's time is ``times[k]``, else the message's ``"time"`` key,
  else the last timestamp in the preceding user message.
- a **list of per-step strings** (one assistant turn per decision step), timed by ``times``.
- a list of :class:`~proactive_rewards.types.Response`, ``(time, text)`` pairs or ``{"time", "text"}``
  dicts: stored responses, classified with ``plain=True`` (bare text is a response whose state token was already
  stripped, empty text is silence, a text holding state tokens is judged strictly); a `Response` flagged
  ``malformed`` stays malformed.

Every turn is classified by :func:`~proactive_rewards.turns.classify_turn` (docs/spec.md §13), the classifier the
benchmark metrics use too.

``times[k]``, when given, is the time of the k-th assistant turn and wins over in-band times.
A turn with no time at all gets ``nan`` (its temporal score is 0).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from proactive_rewards.turns import (
    MALFORMED,
    RESPONSE,
    RESPONSE_TOKEN,
    SILENCE,
    SILENCE_TOKEN,
    STATE_PATTERN,
    TIMESTAMP_PATTERN,
    classify_turn,
)
from proactive_rewards.types import Response

__all__ = ["MALFORMED", "RESPONSE", "RESPONSE_TOKEN", "SILENCE", "SILENCE_TOKEN", "Turn", "classify_turn"]

# The timestamp number is parsed leniently: an unparseable one becomes nan rather than an error.
_TIMESTAMP = TIMESTAMP_PATTERN
_STATE = STATE_PATTERN
_INT = re.compile(r"[+-]?\d+")
_OPTION_PREFIX = re.compile(r"^.*[A-Z]\.\s*")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Turn:
    """One assistant turn of a streaming trajectory (docs/spec.md §2).

    Args:
        time (`float`): seconds; `nan` when the completion gave no time for it.
        state (`str`): ``"silence"``, ``"response"`` or ``"malformed"`` (docs/spec.md §13).
        content (`str`): the text after the state token, stripped (for a malformed turn, its text without
            state tokens).
    """

    time: float
    state: str
    content: str


def normalize_text(text) -> str:
    """docs/spec.md §4 normalisation: strip, lower-case, strip trailing punctuation (and the spaces around it).

    Example:

    >>> normalize_text("  Warning!! ")
    'warning'
    >>> normalize_text(None)
    ''
    """
    if not isinstance(text, str):
        return "" if text is None else normalize_text(str(text))
    s = text.strip().lower()
    end = len(s)
    # Unicode punctuation (category P*) as well as ASCII, so "Warning。" matches too.
    while end and (s[end - 1].isspace() or unicodedata.category(s[end - 1]).startswith("P")):
        end -= 1
    return s[:end]


def parse_int(text) -> int | None:
    """The integer a normalised text spells (``"3"``, ``"+03"``, ``"3."``), else `None`.

    Example:

    >>> parse_int(" 03. "), parse_int("three"), parse_int("3.5")
    (3, None, None)
    """
    s = normalize_text(text)
    if not _INT.fullmatch(s):
        return None
    try:
        return int(s)
    except ValueError:  # more digits than Python's int-from-str limit
        return None


def exact_match(response_text, target_text) -> float:
    """docs/spec.md §4 deterministic content score ``c ∈ {0, 1}``: integers compared as integers, else normalised equality.

    Example:

    >>> exact_match("03", "3"), exact_match("Warning.", "warning"), exact_match("start", "end")
    (1.0, 1.0, 0.0)
    """
    a, b = parse_int(response_text), parse_int(target_text)
    if a is not None and b is not None:
        return float(a == b)
    return float(normalize_text(response_text) == normalize_text(target_text))


def token_f1(response_text, target_text) -> float:
    """Judge-free content score ``c ∈ [0, 1]`` for free text: F1 of normalised word multisets.

    Example:

    >>> round(token_f1("turn off the stove", "Turn the stove off now"), 3)
    0.889
    """
    pred = _WORD.findall(normalize_text(response_text))
    gold = _WORD.findall(normalize_text(target_text))
    if not pred or not gold:
        return 0.0
    counts: dict[str, int] = {}
    for w in gold:
        counts[w] = counts.get(w, 0) + 1
    common = 0
    for w in pred:
        if counts.get(w, 0) > 0:
            counts[w] -= 1
            common += 1
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _as_float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _timestamp_value(match: re.Match) -> float:
    return _as_float(match.group(1).strip())


def _message_text(message) -> str:
    """Text of a chat message whose content is a string or a list of ``{"type": "text"}`` parts."""
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def _split_text(text: str) -> list[tuple[float, str]]:
    """Split a flat completion into ``(in-band time, turn text)`` segments (see the module docstring)."""
    marks = list(_TIMESTAMP.finditer(text))
    segments: list[tuple[float, str]] = []
    if marks:
        if text[: marks[0].start()].strip():
            segments.append((math.nan, text[: marks[0].start()]))
        for k, m in enumerate(marks):
            end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
            segments.append((_timestamp_value(m), text[m.end() : end]))
        return segments
    starts = [m.start() for m in _STATE.finditer(text)]
    if not starts:
        return [(math.nan, text)] if text.strip() else []
    if text[: starts[0]].strip():
        segments.append((math.nan, text[: starts[0]]))
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        segments.append((math.nan, text[start:end]))
    return segments


def _chat_segments(messages: Sequence) -> list[tuple[float, str]]:
    assistants = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if len(assistants) == 1:
        return _split_text(_message_text(assistants[0]))
    segments = []
    user_time = math.nan
    for m in messages:
        if not isinstance(m, dict):
            continue
        text = _message_text(m)
        if m.get("role") == "assistant":
            time = _as_float(m["time"]) if "time" in m else user_time
            segments.append((time, text))
        elif m.get("role") == "user":
            marks = _TIMESTAMP.findall(text)
            user_time = _as_float(marks[-1].strip()) if marks else math.nan
    return segments


def _item_segment(item) -> tuple[float, str, str]:
    """One list item as ``(time, text, kind)``: kind ``"raw"`` (a model turn), ``"stored"`` (a stored response,
    classified with ``plain=True``) or ``"malformed"`` (a stored response flagged malformed)."""
    if isinstance(item, str):
        return math.nan, item, "raw"
    malformed = False
    if isinstance(item, Response):
        time, text, malformed = item.time, item.text, item.malformed
    elif isinstance(item, dict):
        time, text = _as_float(item.get("time")), item.get("text", item.get("content", ""))
        malformed = item.get("malformed") is True
    elif isinstance(item, (list, tuple)) and len(item) == 2:
        time, text = item
    else:
        return math.nan, "", "raw"
    text = text if isinstance(text, str) else _message_text({"content": text})
    return _as_float(time), text, "malformed" if malformed else "stored"


def parse_turns(completion, times=None) -> list[Turn]:
    """Split one completion into its assistant turns ``(time, state, content)`` (docs/spec.md §2); never raises.

    Args:
        completion (`str`, `list[dict]`, `list[str]` or `list[Response | tuple]`): one row's completion, in any
            form described in the module docstring.
        times (`list[float]`, *optional*): the decision time of each assistant turn (the ``times`` dataset
            column); entries that are not numbers become `nan`.

    Returns:
        `list[Turn]`, in completion order (not sorted by time).

    Example:

    >>> parse_turns("<t=0.0s></Silence><t=1.0s></Response> Warning<t=2.0s>oops")
    [Turn(time=0.0, state='silence', content=''), Turn(time=1.0, state='response', content='Warning'),
     Turn(time=2.0, state='malformed', content='oops')]
    >>> [t.time for t in parse_turns(["</Silence>", "</Response> 1"], times=[4, 5])]
    [4.0, 5.0]
    """
    try:
        times = list(times) if times is not None and not isinstance(times, (str, bytes)) else []
    except TypeError:
        times = []
    if isinstance(completion, str):
        segments = [(t, s, "raw") for t, s in _split_text(completion)]
    elif isinstance(completion, dict):
        segments = [(t, s, "raw") for t, s in _chat_segments([completion])]
    elif isinstance(completion, (list, tuple)):
        if any(isinstance(m, dict) and "role" in m for m in completion):
            segments = [(t, s, "raw") for t, s in _chat_segments(completion)]
        else:
            segments = [item if isinstance(item, Turn) else _item_segment(item) for item in completion]
    else:
        segments = []
    turns = []
    for k, segment in enumerate(segments):
        if isinstance(segment, Turn):  # already parsed: only `times` may re-time it
            turns.append(Turn(_as_float(times[k]), segment.state, segment.content) if k < len(times) else segment)
            continue
        time, text, kind = segment
        if k < len(times):
            time = _as_float(times[k])
        if kind == "malformed":
            state, content = MALFORMED, text.strip()
        else:
            state, content = classify_turn(text, plain=kind == "stored")
        turns.append(Turn(time, state, content))
    return turns


def responses_of(turns: Sequence[Turn]) -> list[Response]:
    """The well-formed non-silent turns as :class:`Response` records (the ``o_j`` of docs/spec.md §4)."""
    return [Response(t.time, t.content) for t in turns if t.state == RESPONSE]


def outputs_of(turns: Sequence[Turn]) -> list[Response]:
    """Every non-silent turn as a :class:`Response`, malformed ones flagged ``malformed=True`` (docs/spec.md §13):
    what PRS scores, in the rewards and the benchmark alike (a malformed output counts in ``|O_i|``, earns 0)."""
    return [Response(t.time, t.content, t.state == MALFORMED) for t in turns if t.state != SILENCE]


def parse_mcqa_answer(answer, options: Sequence[str]) -> int | None:
    """Index of the option an MCQA answer names, following the ProactiveBench package (docs/spec.md §6); never raises.

    First the full answer: drop everything up to a capital letter followed by a period (the authors' regex
    ``^.*[A-Z]\\.\\s*``, which removes a leading ``"B. "``), lower-case, remove all spaces, and compare with the
    options standardised the same way. Then a single option letter: the text before the first period, stripped
    and lower-cased, must be one letter; ``a`` is option 0.

    Args:
        answer (`str`): the model's answer.
        options (`list[str]`): the valid answers, lettered in order (proactive actions first, then categories).

    Returns:
        `int` or `None`: the option index, `None` when the answer names no option.

    Example:

    >>> options = ["Move the occluding object.", "I do not know.", "cat", "dog"]
    >>> parse_mcqa_answer("D. Dog", options), parse_mcqa_answer("a", options), parse_mcqa_answer("a bird", options)
    (3, 0, None)
    """
    if not isinstance(answer, str):
        return None
    std = [_standardize_full(o) if isinstance(o, str) else None for o in options]
    full = _standardize_full(answer)
    if full in std:
        return std.index(full)
    letter = answer.split(".")[0].lower().strip()
    if len(letter) == 1 and "a" <= letter <= "z":
        index = ord(letter) - ord("a")
        if index < len(options):
            return index
    return None


def _standardize_full(text: str) -> str:
    return _OPTION_PREFIX.sub("", text).lower().strip().replace(" ", "")
