"""The one turn classifier: what one assistant turn *is*, for the rewards and the benchmark metrics alike
(docs/spec.md §13).

Every place that reads a model's turn calls :func:`classify_turn`: the reward parser
(`proactive_rewards.parsing.parse_turns`), the streaming evaluation loop and the predictions reader of
`proactive_eval`. So a turn that a reward calls malformed is malformed for PRS too, and the same turn can never
earn credit in one and a penalty in the other.

Two kinds of text reach it:

- a **raw turn**, as the model produced it at one decision step (``plain=False``, the project's models): the
  state-token protocol of docs/spec.md §2 is strict;
- a **stored response** (``plain=True``): a predictions-file record or a ``(time, text)`` pair whose state token
  was already stripped by whoever stored it, or the output of another model that never used state tokens. Bare
  text is then a response and empty text is silence; a text that still holds state tokens is judged by the
  strict rule.

Other models' silence signals (``NO REPLY``, ``Silence``) are a per-model setting (`silence_signals`): a turn
equal to one of them, after stripping whitespace, is silence. There are none by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SILENCE_TOKEN = "</Silence>"
RESPONSE_TOKEN = "</Response>"

SILENCE, RESPONSE, MALFORMED = "silence", "response", "malformed"

STATE_PATTERN = re.compile(re.escape(SILENCE_TOKEN) + "|" + re.escape(RESPONSE_TOKEN))
# Timestamps as written by the dialogue renderer (docs/spec.md §2: default `<t=12.0s>`); they belong to user turns.
TIMESTAMP_PATTERN = re.compile(r"<t=([^<>]{0,64}?)s?>")


def classify_turn(text, silence_signals: Iterable[str] = (), plain: bool = False) -> tuple[str, str]:
    """Classify one assistant turn as ``(state, content)`` (docs/spec.md §13); never raises.

    The rule, in order (``s`` is the text stripped of surrounding whitespace; a non-string is ``""``):

    1. ``s`` equals one of `silence_signals` → silence;
    2. ``s`` holds a timestamp ``<t=..>`` → malformed (timestamps belong to user turns);
    3. ``s`` is exactly ``</Silence>`` → silence;
    4. ``s`` holds exactly one state token, starts with ``</Response>`` and has non-empty content after it
       → response, the content stripped;
    5. with `plain`, ``s`` holds no state token: empty → silence, else a response whose content is ``s``;
    6. anything else → malformed: empty text, bare text, ``</Response>`` with no content, a ``</Silence>``
       followed by text, two state tokens, a state token after some text.

    A malformed turn's content is its text without state tokens or timestamps, stripped.

    Args:
        text (`str`): the turn.
        silence_signals (`Iterable[str]`, *optional*): the model's extra silence signals, matched whole.
        plain (`bool`, *optional*, defaults to `False`): bare text is a response and empty text silence (stored
            responses, models without state tokens).

    Example:

    >>> classify_turn("</Response> Warning"), classify_turn(" </Silence> "), classify_turn("Warning")
    (('response', 'Warning'), ('silence', ''), ('malformed', 'Warning'))
    >>> classify_turn("Warning", plain=True), classify_turn("NO REPLY", silence_signals=["NO REPLY"])
    (('response', 'Warning'), ('silence', ''))
    """
    s = text.strip() if isinstance(text, str) else ""
    if s in tuple(silence_signals):
        return SILENCE, ""
    tokens = STATE_PATTERN.findall(s)
    content = STATE_PATTERN.sub("", s)
    if TIMESTAMP_PATTERN.search(s):
        return MALFORMED, TIMESTAMP_PATTERN.sub("", content).strip()
    content = content.strip()
    if len(tokens) == 1:
        if s == SILENCE_TOKEN:
            return SILENCE, ""
        if s.startswith(RESPONSE_TOKEN) and content:
            return RESPONSE, content
    if plain and not tokens:
        return (RESPONSE, s) if s else (SILENCE, "")
    return MALFORMED, content


__all__ = [
    "MALFORMED",
    "RESPONSE",
    "RESPONSE_TOKEN",
    "SILENCE",
    "SILENCE_TOKEN",
    "STATE_PATTERN",
    "TIMESTAMP_PATTERN",
    "classify_turn",
]
