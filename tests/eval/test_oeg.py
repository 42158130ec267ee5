"""ProactiveBench OEG (docs/spec.md §6): the question and valid answers of each dataset's first state, and the rule judge.

The expected valid answers are the strings the authors' ``get_open_ended_gen_answers`` returns for these records,
written out by hand; they are compared the way the authors' judge prompt reads them (split on ",", stripped,
dots removed), since ChangeIt's string joins with "," and the others with ", ".
"""

import pytest

from proactive_eval.benchmarks.proactivebench.environments import ProactiveBenchEnvironment
from proactive_eval.benchmarks.proactivebench.metric import oeg_judgment
from proactive_eval.benchmarks.proactivebench.oeg import OEG_HINT, oeg_question, oeg_valid_answers
from proactive_eval.episodes import EpisodeError
from proactive_eval.judges import RuleJudge, oeg_prompt, split_oeg_prompt

CATS = ["goldfish", "tench", "hen", "cock"]
VIDEO = "This is a frame extracted from a video. Answer the following question."


def record(**over):
    base = {"id": 7, "image_template": "x/{image}.png", "first_image": 0, "num_images": 6, "prompt": "What is it?"}
    base.update(options=["Add more details to the drawing.", "I do not know."], categories=CATS, answer="hen")
    base.update(over)
    return base


CASES = {
    "ROD": (
        record(options=["Move the box to the left.", "Move the box to the right.", "I cannot tell."]),
        "Move the blocks, Move the camera.",
    ),
    "VSOD": (
        record(options=["Wait for the occlusion to disappear.", "Rewind the video.", "I do not know."]),
        "Wait for the occlusion to disappear, Rewind the video, Move the camera, hen.",
    ),
    "MVP-N": (
        record(options=["Rotate the object.", "I do not know."], first_image=40, valid_images=[3, 9, 12, 20, 25, 31]),
        "Rotate the object, Move the camera.",
    ),
    "IN-C": (
        record(
            image_template="{level}/x.JPEG",
            first_image=5,
            num_images=5,
            options=["Deblur the image.", "Denoise the image.", "I do not know."],
            quality_answer="Denoise the image.",
        ),
        "Denoise the image, hen.",
    ),
    "QD": (record(), "Add more details to the drawing, hen."),
    "CIT": (
        record(
            num_images=10,
            step_size=2,
            max_steps=5,
            options=["Wait for the object to appear.", "Rewind the video.", "I cannot answer."],
        ),
        "Wait for the object to appear,Rewind the video,hen.",
    ),
}


def as_judged(answers: str) -> list[str]:
    """How the authors' judge prompt lists a valid-answer string."""
    return [a.strip().replace(".", "") for a in answers.split(",") if a.strip()]


@pytest.mark.parametrize("dataset", list(CASES))
def test_valid_answers_are_the_authors(dataset, tmp_path):
    raw, expected = CASES[dataset]
    env = ProactiveBenchEnvironment(raw, dataset, tmp_path, load_images=False)
    answers = oeg_valid_answers(env)
    assert as_judged(answers) == as_judged(expected)
    assert f"Correct Answers (List):\n{as_judged(expected)}\n" in oeg_prompt("q", answers, "a")


def test_question_keeps_the_pre_prompt_and_takes_the_generic_hint(tmp_path):
    raw, _ = CASES["VSOD"]
    prompt = ProactiveBenchEnvironment(raw, "VSOD", tmp_path, load_images=False).reset().prompt
    assert oeg_question(prompt) == f"{VIDEO} What is it?"
    assert oeg_question(prompt, hint=True) == f"{VIDEO} What is it? {OEG_HINT}"


def test_imagenet_c_without_quality_answer_names_the_field(tmp_path):
    raw = dict(CASES["IN-C"][0])
    del raw["quality_answer"]
    env = ProactiveBenchEnvironment(raw, "IN-C", tmp_path, load_images=False, file="inc.jsonl")
    with pytest.raises(EpisodeError, match=r"inc.jsonl: record '7': field 'quality_answer'"):
        oeg_valid_answers(env)


def test_rule_judge_bits_by_hand():
    # tokens (articles and punctuation dropped): you could add more details to drawing maybe it is cat (11)
    output = "You could add more details to the drawing, maybe it is a cat."
    # "Add more details to the drawing": 5 of 5 gold tokens, P = 5/11, F1 = 10/16 = 0.625 >= 0.5 -> 1
    # "cat": P = 1/11, R = 1, F1 = 2/12 < 0.5 -> 0
    prompt = oeg_prompt("What is it?", "Add more details to the drawing, cat.", output)
    assert split_oeg_prompt(prompt) == ("What is it?", ["Add more details to the drawing", "cat"], output)
    [raw] = RuleJudge("token_f1").complete_many([prompt])
    assert raw == "1, 0"
    assert oeg_judgment(raw, "Add more details to the drawing, cat.", "QD") == {
        "proactive_suggestion": 1,
        "category_prediction": 0,
        "aggregate": 1,
    }
    with pytest.raises(ValueError, match="not an OEG judge prompt"):
        split_oeg_prompt("Question: q\nGround Truth Answer: g\nPredicted Answer: p")
