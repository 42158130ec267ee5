"""The TRL adapters and the registry (docs/spec.md §7)."""

import math
import pickle

import pytest

from proactive_rewards import RewardSpec, get_reward, list_rewards, register_reward
from proactive_rewards.tasks import accident_reward

TARGETS = [{"time": 18.867, "text": "Warning", "window": None}]
LATE = math.exp(-0.05 * 21.333)


def test_registry_names():
    assert list_rewards() == [
        "accident",
        "compositional",
        "count",
        "intervention",
        "proactive_suggestion",
        "state_format",
    ]


def test_named_function_with_trl_signature():
    reward = get_reward("accident")
    assert reward.__name__ == "accident"
    completions = ["<t=40.2s></Response> Warning", "", "<t=1s></Response> Warning<t=2s></Response> Danger"]
    out = reward(completions, prompts=["p"] * 3, completion_ids=[[1]] * 3, targets=[TARGETS] * 3, trainer_state=None)
    assert out == [pytest.approx(LATE), 0.0, pytest.approx(math.exp(-0.05 * 17.867) - 0.2)]


def test_times_column_and_conversational_completions():
    reward = get_reward("count")
    completions = [[{"role": "assistant", "content": "</Silence></Response> 1"}], ["</Silence>", "</Response> 2"]]
    out = reward(completions, targets=[[{"time": 5.0, "text": "1"}]] * 2, times=[[4.0, 6.0], [4.0, 6.0]])
    assert out == [pytest.approx(math.exp(-0.05)), 0.0]


def test_task_column_gives_none_for_other_tasks():
    reward = get_reward("accident")
    out = reward(
        ["</Response> Warning"] * 3, targets=[TARGETS] * 3, times=[[18.867]] * 3, task=["accident", "atomic", None]
    )
    assert out == [1.0, None, None]
    everywhere = get_reward("accident", tasks=["*"])
    assert everywhere(["</Response> Warning"], targets=[TARGETS], times=[[18.867]], task=["atomic"]) == [1.0]


def test_parameters_are_bound_and_checked_at_construction():
    reward = get_reward("proactive_suggestion", r_p=0.75, metric_name="suggestion_rp075")
    assert reward.__name__ == "suggestion_rp075"
    options = [["Move the object.", "cat", "dog"]] * 2
    assert reward(["A", "C"], options=options, answer=["dog", "dog"], valid_actions=[["Move the object."]] * 2) == [
        0.75,
        1.0,
    ]
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['beta'\]; it takes \['alpha', 'lam'\]"):
        get_reward("compositional", beta=1.0)
    with pytest.raises(ValueError, match="lam"):
        get_reward("accident", lam=-0.5)
    with pytest.raises(ValueError, match="r_p"):
        get_reward("proactive_suggestion", r_p=math.inf)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown reward 'acident'; expected one of accident, compositional, count"):
        get_reward("acident")


def test_missing_required_column_names_it():
    with pytest.raises(ValueError, match=r"needs the dataset column\(s\) \['targets'\]; the dataset has \['times'\]"):
        get_reward("count")(["x"], times=[[1.0]])
    with pytest.raises(ValueError, match=r"\['options', 'answer', 'valid_actions'\]"):
        get_reward("proactive_suggestion")(["x"])


def test_suggestion_reward_without_valid_actions_fails_at_start_up():
    """Without valid actions a valid suggestion would silently score 0 and GRPO would lose r_p (docs/spec.md §7)."""
    reward = get_reward("proactive_suggestion", r_p=0.5)
    with pytest.raises(ValueError, match=r"\['valid_actions'\] \(or pass valid_actions=\[\.\.\.\] to get_reward"):
        reward.check_columns(["prompt", "image", "options", "answer"])
    with pytest.raises(ValueError, match="valid_actions"):
        reward(["A"], options=[["Move the object.", "cat", "dog"]], answer=["dog"])
    reward.check_columns(["prompt", "options", "answer", "valid_actions"])
    # the actions given another way: a parameter, the same list for every row
    fixed = get_reward("proactive_suggestion", r_p=0.5, valid_actions=["Move the object."])
    fixed.check_columns(["prompt", "options", "answer"])
    assert fixed(["A", "B", "C"], options=[["Move the object.", "cat", "dog"]] * 3, answer=["dog"] * 3) == [
        0.5,
        0.0,
        1.0,
    ]
    with pytest.raises(ValueError, match="both as a dataset column and as a parameter"):
        fixed(["A"], options=[["Move the object.", "cat"]], answer=["cat"], valid_actions=[["Move the object."]])


def test_bad_ground_truth_names_column_row_and_target():
    reward = get_reward("count")
    with pytest.raises(ValueError, match=r"column 'targets', row 1, target 0"):
        reward(["x", "y"], targets=[[{"time": 1.0, "text": "1"}], [{"text": "no time"}]])
    with pytest.raises(ValueError, match=r"column 'targets', row 0, target 0: .*window must be \[a, b\]"):
        reward(["x"], targets=[[{"time": 1.0, "text": "1", "window": [1.0]}]])
    with pytest.raises(ValueError, match=r"column 'targets', row 0: expected a list"):
        reward(["x"], targets=["18.0"])
    with pytest.raises(ValueError, match=r"column 'times' must be a list with one entry per completion \(2\)"):
        reward(["x", "y"], targets=[[], []], times=[[1.0]])


def test_components_for_logging():
    reward = get_reward("accident", components=True)
    (parts,) = reward(["<t=40.2s></Response> Warning"], targets=[TARGETS])
    assert parts["overall"] == pytest.approx(LATE) and parts["penalty"] == 0.0 and parts["outputs"] == 1


def test_dotted_import_path(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(
        "def length_reward(completions, scale=1.0, **kwargs):\n    return [scale * len(c) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for path in ("my_rewards:length_reward", "my_rewards.length_reward"):
        reward = get_reward(path, scale=2.0)
        assert reward.__name__ == "length_reward"
        assert reward(["ab", ""]) == [4.0, 0.0]
    with pytest.raises(ValueError, match="cannot import 'no_such_pkg.mod:fn'"):
        get_reward("no_such_pkg.mod:fn")


def test_content_scorer_by_import_path():
    reward = get_reward("intervention", content_scorer="proactive_rewards.parsing:exact_match")
    out = reward(["<t=41s></Response> stop"], targets=[[{"time": 40.0, "text": "Stop!", "window": [40.0, 44.0]}]])
    assert out == [1.0]


def test_duplicate_names_are_rejected():
    with pytest.raises(ValueError, match="already registered"):
        register_reward(RewardSpec("accident", accident_reward))


def test_reward_functions_pickle():
    reward = pickle.loads(pickle.dumps(get_reward("compositional", lam=0.1)))
    assert reward.__name__ == "compositional"
    assert reward([[(12.0, "start"), (30.0, "end")]], targets=[[(10.0, "start")]]) == [
        pytest.approx(math.exp(-0.1) - 0.1)
    ]


def test_content_scorer_by_registered_name():
    from proactive_rewards import list_content_scorers, register_content_scorer

    targets = [[{"time": 40.0, "text": "stop", "window": [40.0, 44.0]}]]
    assert list_content_scorers() == ["exact_match", "token_f1"]
    assert get_reward("intervention", content_scorer="token_f1")(
        ["<t=41s></Response> please stop"], targets=targets
    ) == [pytest.approx(2 / 3)]
    with pytest.raises(ValueError, match=r"unknown content_scorer 'tokenf1'; expected one of exact_match, token_f1"):
        get_reward("intervention", content_scorer="tokenf1")
    with pytest.raises(ValueError, match="already registered"):
        register_content_scorer("token_f1", lambda a, b: 1.0)
