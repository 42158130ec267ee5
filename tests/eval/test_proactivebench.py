"""ProactiveBench answer parsing (docs/spec.md §6, acceptance 2), acc / ps, and OEG agg — all hand-computed."""

import pytest

from proactive_eval.benchmarks.proactivebench.metric import (
    PREDICTION_THR,
    dataset_key,
    oeg_judgment,
    oeg_summary,
    proactivebench_outcome,
    proactivebench_summary,
)

ACTIONS = ["Move the red box to the left.", "Move the red box to the right.", "I do not know."]
VALID = ACTIONS[:2]
CATEGORIES = ["cat", "dog", "cow", "hen"]  # lettered D, E, F, G after the three actions


@pytest.mark.parametrize(
    "answer, outcome",
    [
        # full answers (leading "X." dropped, case and spaces ignored)
        ("Move the red box to the left.", "proactive"),
        ("move the RED box  to the left.", "proactive"),
        ("B. Move the red box to the right.", "proactive"),
        ("dog", "correct"),
        ("E. dog", "correct"),
        ("cat", "fail"),  # wrong category
        # letters
        ("B.", "proactive"),
        ("b", "proactive"),
        ("A", "proactive"),
        ("E", "correct"),  # shifted past the three actions: D cat, E dog
        ("D.", "fail"),
        ("G", "fail"),
        ("H", "fail"),  # past the last option
        # abstention
        ("I do not know.", "fail"),
        ("C", "fail"),
        # unknown text
        ("a bird", "fail"),
        ("", "fail"),
        ("Definitely", "fail"),
        # the authors' greedy prefix regex keeps only the text after the last "X." (documented quirk)
        ("The answer is E. dog", "correct"),
    ],
)
def test_parsing_cases(answer, outcome):
    assert proactivebench_outcome(answer, ACTIONS, VALID, CATEGORIES, "dog") == outcome


def test_no_category_allowed_and_no_valid_action():
    # ROD's occluded first frame: every category is wrong; MVP-N's last image: no action is valid.
    assert proactivebench_outcome("dog", ACTIONS, VALID, CATEGORIES, None) == "fail"
    assert proactivebench_outcome("A", ACTIONS, [], CATEGORIES, "dog") == "fail"


def test_metric_module_exports_the_outcome():
    from proactive_eval.benchmarks.proactivebench import metric

    assert metric.proactivebench_outcome("E", ACTIONS, VALID, CATEGORIES, "dog") == "correct"


def test_acc_and_ps_by_hand():
    outcomes = [{"success": True, "turns": 3}, {"success": False, "turns": 1}, {"success": True, "turns": 1}]
    # acc = 100 * 2/3; ps = ((3-1) + 0 + 0) / 3
    assert proactivebench_summary(outcomes) == {"acc": pytest.approx(200 / 3), "ps": pytest.approx(2 / 3), "n": 3}
    assert proactivebench_summary([])["n"] == 0


def test_prediction_thresholds_match_the_authors():
    assert PREDICTION_THR == {"ROD": 2, "VSOD": 3, "MVP-N": 2, "IN-C": 1, "QD": 1, "CIT": 2, "COCO": 2}
    assert dataset_key("OcclusionDataSet-MM20") == "VSOD"
    with pytest.raises(ValueError, match="unknown ProactiveBench dataset"):
        dataset_key("MNIST")


def test_oeg_agg_by_hand():
    vsod = ["Wait for the occlusion to disappear", "Rewind the video", "Move the camera", "Alice"]
    assert oeg_judgment("0,0,0,1", vsod, "VSOD") == {
        "proactive_suggestion": 0,
        "category_prediction": 1,
        "aggregate": 1,
    }
    assert oeg_judgment("0, 0, 1, 0", vsod, "VSOD") == {
        "proactive_suggestion": 1,
        "category_prediction": 0,
        "aggregate": 1,
    }
    assert oeg_judgment("0,0,0,0", vsod, "VSOD")["aggregate"] == 0
    assert oeg_judgment("1,1,1", vsod, "VSOD")["aggregate"] == 0  # wrong length scores 0
    assert oeg_judgment("I refuse", vsod, "VSOD")["aggregate"] == 0
    assert oeg_judgment(None, vsod, "VSOD")["aggregate"] == 0
    # ImageNet-C: one proactive entry (the quality fix), then the category; the package's string form works too.
    inc = "Denoise the image, goldfish."
    assert oeg_judgment("thinking 1,1\n0,1", inc, "ImageNet-C") == {
        "proactive_suggestion": 0,
        "category_prediction": 1,
        "aggregate": 1,
    }
    judgments = [oeg_judgment(x, vsod, "VSOD") for x in ("1,0,0,0", "0,0,0,1", "0,0,0,0", "1,0,0,1")]
    # agg 3/4, category 2/4, ps 2/4
    assert oeg_summary(judgments) == {"agg": 75.0, "acc": 50.0, "ps": 50.0, "n": 4}
