"""Rule judges for judge-free runs: token-F1 and ROUGE-L mapped onto the PAUC levels 1..3 (docs/spec.md §5).

Both compare the gold text with the (concatenated) prediction after SQuAD-style normalisation (lower-case,
punctuation and the articles a/an/the removed). The similarity ``s`` in [0, 1] becomes a level with the
thresholds below (the project's choice; the papers only define the LLM judge):

    level 3 ("mostly covered")   if s >= 0.5
    level 2 ("partially covered") if s >= 0.2
    level 1 ("incorrect")         otherwise

For ProactiveBench OEG (docs/spec.md §6) the rule judge answers what the LLM judge would, a 0/1 list over the valid
answers: an answer's bit is 1 when its similarity to the generated text is level 3 (s >= 0.5). A crude
stand-in for checkpoint comparisons; it does not credit paraphrases as the LLM judge is told to.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from proactive_eval.judges.base import Judge
from proactive_eval.judges.prompts import split_oeg_prompt, split_pauc_prompt

LEVEL_THRESHOLDS = ((0.5, 3), (0.2, 2))
KINDS = ("token_f1", "rouge_l")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def tokens(text: str) -> list[str]:
    """Normalised tokens.

    >>> tokens("The cat, sat on a mat!")
    ['cat', 'sat', 'on', 'mat']
    """
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()


def token_f1(gold: str, prediction: str) -> float:
    """Harmonic mean of token precision and recall (multiset overlap).

    >>> token_f1("red apple on table", "apple on the red chair")
    0.75
    """
    g, p = tokens(gold), tokens(prediction)
    if not g or not p:
        return float(g == p)
    overlap = sum((Counter(g) & Counter(p)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(p), overlap / len(g)
    return 2 * precision * recall / (precision + recall)


def rouge_l(gold: str, prediction: str) -> float:
    """ROUGE-L F1: longest common subsequence over the normalised tokens.

    LCS("man opens red door", "man opens door") = 3, so P = 3/3, R = 3/4 and F1 = 6/7:

    >>> round(rouge_l("a man opens the red door", "the man opens a door"), 4)
    0.8571
    """
    g, p = tokens(gold), tokens(prediction)
    if not g or not p:
        return float(g == p)
    prev = [0] * (len(p) + 1)
    for tg in g:
        row = [0]
        for j, tp in enumerate(p):
            row.append(prev[j] + 1 if tg == tp else max(prev[j + 1], row[j]))
        prev = row
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(g)
    return 2 * precision * recall / (precision + recall)


def similarity_to_level(similarity: float) -> int:
    """Map a similarity in [0, 1] onto a level 1..3 (thresholds in the module docstring).

    >>> [similarity_to_level(s) for s in (0.0, 0.19, 0.2, 0.49, 0.5, 1.0)]
    [1, 1, 2, 2, 3, 3]
    """
    for threshold, level in LEVEL_THRESHOLDS:
        if similarity >= threshold:
            return level
    return 1


class RuleJudge(Judge):
    """A deterministic judge reading the same prompts as the LLM judge: PAUC levels (`score`) and OEG bit lists
    (`complete`, which answers a PAUC prompt with its level as text).

    Args:
        kind (`str`, *optional*, defaults to `"token_f1"`): `"token_f1"` or `"rouge_l"`.

    >>> from proactive_eval.judges.prompts import oeg_prompt
    >>> RuleJudge().complete_many([oeg_prompt("What is it?", "Add more details to the drawing, cat.", "Add details")])
    ['1, 0']
    """

    def __init__(self, kind: str = "token_f1"):
        if kind not in KINDS:
            raise ValueError(f"unknown rule judge {kind!r}; expected one of {', '.join(KINDS)}")
        super().__init__()
        self.kind, self.judge_id, self.model = kind, f"rule:{kind}", kind
        self._similarity = token_f1 if kind == "token_f1" else rouge_l

    def score_pair(self, gold: str, prediction: str) -> int:
        """The level of `prediction` against `gold` (no prompt round trip)."""
        return similarity_to_level(self._similarity(gold, prediction))

    async def score(self, prompt: str) -> int:
        return self._score(prompt)

    def score_many(self, prompts: list[str], progress: bool = True) -> list[int]:
        return [self._score(p) for p in prompts]  # microseconds each: no event loop needed

    async def _fetch(self, prompt: str) -> str:
        try:
            _, answers, output = split_oeg_prompt(prompt)
        except ValueError:  # a PAUC prompt
            return str(self._score(prompt))
        return ", ".join(str(int(self.score_pair(answer, output) == 3)) for answer in answers)

    def _score(self, prompt: str) -> int:
        _, gold, prediction = split_pauc_prompt(prompt)
        self.stats.prompts += 1
        return self.score_pair(gold, prediction)
