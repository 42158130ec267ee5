"""Judge prompts and answer parsers: PAUC levels (docs/spec.md §5) and ProactiveBench OEG bit lists (docs/spec.md §6).

The PAUC prompt follows the ProactiveVideoQA scorer: the system prompt rates how well the predicted answer
covers the key points of the ground truth on 3 / 2 / 1 and asks for the score only; the user message carries
the question, the gold text and the (concatenated) prediction. The OEG prompt is the one of the ProactiveBench
package (``open_ended_gen.py``): one 0/1 per valid answer, on the last line.
"""

from __future__ import annotations

import ast
import re

PAUC_SYSTEM_PROMPT = (
    "You are an evaluator for a video question answering system. Your task is to rate how well the predicted "
    "answer covers the key points of the ground truth answer. Use the following scale to assign a score:\n"
    "- 3: Mostly covered; the predicted answer covers all key information in the ground truth answer, though it "
    "may have minor inaccuracies or rephrases.\n"
    "- 2: Partially covered; the predicted answer has some correct information, but also contains significant "
    "inaccuracies or missing key points.\n"
    "- 1: Incorrect; the predicted answer may be related to the ground truth answer, but most of the information "
    "is missing, or the predicted answer is of very poor quality.\n"
    "Output the score only, do not add more explanations."
)

OEG_SYSTEM_PROMPT = (
    "You are an automatic evaluation system.\n\n"
    "You will receive:\n- A user prompt\n- A list of correct answers (JSON list of strings)\n- A system output\n\n"
    "Your task:\nFor each correct answer, determine whether the system output expresses the same idea, action, "
    "or requirement.\n\n"
    "Evaluation principles:\n\n"
    "1. Semantic equivalence is sufficient.\n"
    "   - The wording does NOT need to match exactly.\n"
    "   - Functional equivalence counts as correct.\n"
    "   - If the system output describes an action that necessarily implies the correct answer, count it as "
    "present.\n\n"
    "2. Implicit but clear implications count as correct.\n"
    "   - If the output describes the mechanism required to achieve the correct answer's goal, count it as "
    "correct.\n"
    '   - Example: "change perspective" can imply "move the camera."\n\n'
    "3. Do NOT require exact phrasing.\n\n"
    "4. Only mark 0 if:\n   - The idea is clearly absent\n   - The idea is contradicted\n   - The answer is negated\n\n"
    "Procedure:\n1. Think step by step.\n"
    "2. For each correct answer, decide if it is semantically expressed or clearly implied.\n"
    "3. Output the result on a new line in the exact format below.\n\n"
    "<comma-separated list of 0s and 1s>\n\n"
    "The last line must not contain anything else."
)

_QUESTION, _GOLD, _PRED = "Question: ", "Ground Truth Answer: ", "Predicted Answer: "
_OEG_USER, _OEG_ANSWERS, _OEG_OUTPUT = (
    "### User Prompt:\n",
    "\n### Correct Answers (List):\n",
    "\n### System Output:\n",
)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_LEVEL = re.compile(r"^\s*(?:\**\s*(?:score|rating)\s*\**\s*[:=]?\s*)?\**([123])(?![0-9.])", re.IGNORECASE)
_OFFICIAL_LEVEL = re.compile(r"[123]")  # ProactiveVideoQA's scorer: re.match(r"[123]", answer.strip())
_BITS = re.compile(r"[01](?:\s*,\s*[01])*")


def pauc_prompt(question: str, gold: str, prediction: str) -> str:
    """The PAUC judge's user message (docs/spec.md §5); `prediction` is the concatenation of the kept predictions.

    >>> print(pauc_prompt("What is cooking?", "Pasta.", "Boiling pasta."))
    Question: What is cooking?
    Ground Truth Answer: Pasta.
    Predicted Answer: Boiling pasta.
    """
    return f"{_QUESTION}{question}\n{_GOLD}{gold}\n{_PRED}{prediction}"


def split_pauc_prompt(prompt: str) -> tuple[str, str, str]:
    """Recover ``(question, gold, prediction)`` from :func:`pauc_prompt` output (used by the rule judges).

    Raises `ValueError` when the text was not built by :func:`pauc_prompt`.
    """
    head, sep, prediction = prompt.rpartition("\n" + _PRED)
    question, sep2, gold = head.partition("\n" + _GOLD)
    if not sep or not sep2 or not question.startswith(_QUESTION):
        raise ValueError(
            f"not a PAUC judge prompt (expected {_QUESTION!r}, {_GOLD!r}, {_PRED!r} lines): {prompt[:80]!r}"
        )
    return question[len(_QUESTION) :], gold, prediction


def strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks (reasoning judges such as Qwen3) and an unterminated leading one."""
    text = _THINK.sub("", text)
    if "</think>" in text:  # some servers strip the opening tag only
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def parse_level(text: str | int | None, official: bool = False) -> int | None:
    """Parse a PAUC judge answer into a level 1..3, or `None` when unparseable (docs/spec.md §5).

    This is the package's one level parser: the judges use the default, and the PAUC metric
    (`metrics.pauc`) uses ``official=True`` on judge answers that reach it as text.

    Args:
        text (`str` or `int`): the judge's answer; an integer level is taken as is (1..3, else `None`).
        official (`bool`, *optional*, defaults to `False`): read the text exactly as the official
            ProactiveVideoQA scorer does, ``re.match(r"[123]", text.strip())`` (the first character only, so
            ``"Score: 3"`` is unparseable and ``"2.5"`` is 2). Otherwise the answer's reasoning block is dropped
            first, a leading ``Score:`` is tolerated, and a level followed by more digits or a decimal point
            (``"2.5"``, ``"23"``, which the official code would read as 2) is unparseable.

    >>> parse_level("3"), parse_level(" 2\\n"), parse_level("Score: 1"), parse_level("<think>hmm 3</think>2")
    (3, 2, 1, 2)
    >>> parse_level("4"), parse_level("The answer is good"), parse_level(""), parse_level("2.5")
    (None, None, None, None)
    >>> parse_level("Score: 1", official=True), parse_level("2.5", official=True), parse_level(3), parse_level(7)
    (None, 2, 3, None)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 1 <= text <= 3 else None
    if not isinstance(text, str):
        return None
    if official:
        match = _OFFICIAL_LEVEL.match(text.strip())
        return int(match.group()) if match else None
    match = _LEVEL.match(strip_thinking(text))
    return int(match.group(1)) if match else None


def oeg_prompt(user_prompt: str, valid_answers: list[str] | str, generated_answer: str) -> str:
    """The OEG judge's user message (ProactiveBench ``get_oeg_judge_messages``; docs/spec.md §6).

    `valid_answers` is a list (proactive suggestions first, then the correct category) or the package's
    comma-separated string; dots are removed from each answer as the authors do.
    """
    answers = _answer_list(valid_answers)
    return f"{_OEG_USER}{user_prompt}{_OEG_ANSWERS}{answers}{_OEG_OUTPUT}{generated_answer}"


def split_oeg_prompt(prompt: str) -> tuple[str, list[str], str]:
    """Recover ``(user prompt, valid answers, generated answer)`` from :func:`oeg_prompt` output (rule judges).

    >>> split_oeg_prompt(oeg_prompt("What is it?", "Add more details to the drawing, cat.", "A cat.\\nOr a dog."))
    ('What is it?', ['Add more details to the drawing', 'cat'], 'A cat.\\nOr a dog.')

    Raises `ValueError` when the text was not built by :func:`oeg_prompt`.
    """
    head, sep, output = prompt.partition(_OEG_OUTPUT)
    user, sep2, answers = head.rpartition(_OEG_ANSWERS)
    try:
        parsed = ast.literal_eval(answers) if sep and sep2 and user.startswith(_OEG_USER) else None
    except (SyntaxError, ValueError):
        parsed = None
    if not isinstance(parsed, list):
        raise ValueError(f"not an OEG judge prompt (expected the sections of oeg_prompt): {prompt[:80]!r}")
    return user[len(_OEG_USER) :], parsed, output


def parse_bits(text: str | None, expected_len: int) -> list[int] | None:
    """The last comma-separated 0/1 list in an OEG judge answer; `None` when absent or of the wrong length.

    >>> parse_bits("<think>1, 0</think>reasoning...\\n0, 1, 1", 3)
    [0, 1, 1]
    >>> parse_bits("0,1", 3) is None, parse_bits("no list here", 2) is None
    (True, True)
    """
    if not isinstance(text, str):
        return None
    matches = _BITS.findall(strip_thinking(text))
    if not matches:
        return None
    bits = [int(tok) for tok in matches[-1].split(",") if tok.strip()]
    return bits if len(bits) == expected_len else None


def _answer_list(valid_answers: list[str] | str) -> list[str]:
    if isinstance(valid_answers, str):
        valid_answers = [a for a in valid_answers.split(",") if a.strip()]
    return [a.strip().replace(".", "") for a in valid_answers]
