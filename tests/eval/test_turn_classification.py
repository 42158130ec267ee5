"""One turn classification for the metric and the reward (docs/spec.md §13): every shape of turn means the same in
`proactive-eval`'s streaming loop (through the predictions file it writes) and in the rewards' parser, and the two
give the same PRS on the same trajectory."""

import math

import pytest

from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.episodes import Episode
from proactive_eval.predictions import load_predictions
from proactive_eval.streaming import ScriptedPolicy, run_streaming
from proactive_rewards import Response, Target, intervention_reward, outputs_of, parse_turns

# (turn text, expected state, expected content) — the table of docs/spec.md §13
SHAPES = [
    ("</Silence>", "silence", ""),
    ("  </Silence>\n", "silence", ""),
    ("</Response> Warning", "response", "Warning"),
    ("</Response>Warning", "response", "Warning"),
    ("</Response> please stop the car", "response", "please stop the car"),
    ("</Response> 3", "response", "3"),
    ("Warning", "malformed", "Warning"),  # bare content
    ("please stop", "malformed", "please stop"),  # bare free text
    ("", "malformed", ""),  # empty response
    ("   ", "malformed", ""),
    ("</Response>", "malformed", ""),  # state token, no content
    ("</Response>   ", "malformed", ""),
    ("</Silence> Warning", "malformed", "Warning"),  # silence followed by content
    ("</Silence></Silence>", "malformed", ""),  # two state tokens
    ("</Silence></Response> Warning", "malformed", "Warning"),
    ("</Response> Warning </Response> Warning", "malformed", "Warning  Warning"),
    ("Warning </Response>", "malformed", "Warning"),  # token after the text
    ("<t=3.0s></Response> Warning", "malformed", "Warning"),  # echoed timestamp
    ("</Response> Warning <t=4.0s>", "malformed", "Warning"),
    ("<t=bad>", "malformed", ""),
    ("NO REPLY", "malformed", "NO REPLY"),  # another model's silence signal, undeclared
    ("Silence", "malformed", "Silence"),
    ("</silence>", "malformed", "</silence>"),  # not the state token (case)
    ("</RESPONSE> Warning", "malformed", "</RESPONSE> Warning"),
    ("\x00#@!~ garbage </Resp", "malformed", "\x00#@!~ garbage </Resp"),
]
TARGET = {"time": 5.0, "text": "please stop the car", "window": [4.0, 8.0]}


def _episode(n: int) -> Episode:
    return Episode(id="e", task="intervention", duration=float(n + 1), instruction="act", targets=[Target(**TARGET)])


def _frames(n: int):
    return lambda episode: [(float(k), None) for k in range(n)]


def _metric_outputs(texts, tmp_path, name="p.jsonl") -> list[Response]:
    """The evaluation path: the raw turns through the streaming loop, written and read back."""
    policy = ScriptedPolicy({"e": [(float(k), t) for k, t in enumerate(texts)]}, raw=True)
    path = tmp_path / name
    run_streaming(policy, [_episode(len(texts))], path, frame_source=_frames(len(texts)), progress=False)
    return load_predictions(path)["e"]


def test_the_table_has_every_shape():
    assert len(SHAPES) >= 15
    assert {state for _, state, _ in SHAPES} == {"silence", "response", "malformed"}


@pytest.mark.parametrize("text, state, content", SHAPES, ids=[repr(s[0]) for s in SHAPES])
def test_metric_and_reward_classify_each_shape_alike(text, state, content, tmp_path):
    reward_turn = parse_turns([text], times=[5.0])
    assert [(t.state, t.content) for t in reward_turn] == [(state, content)]
    expected = [] if state == "silence" else [Response(0.0, content, state == "malformed")]
    assert _metric_outputs([text], tmp_path) == expected == outputs_of(parse_turns([text], times=[0.0]))
    # the same number: a malformed turn counts as an output and earns 0, in the metric and in the reward
    at_target = _metric_outputs(["</Silence>"] * 5 + [text], tmp_path, "at_target.jsonl")
    metric = score_prs([_episode(6)], {"e": at_target}).episodes[0].results["B"].score
    reward = intervention_reward(["</Silence>"] * 5 + [text], [TARGET], times=list(range(6)))
    assert metric == pytest.approx(reward)
    if state != "response":
        assert metric == 0.0


def test_a_whole_trajectory_scores_the_same_in_metric_and_reward(tmp_path):
    texts = [text for text, _, _ in SHAPES]
    times = [float(k) for k in range(len(texts))]
    outputs = _metric_outputs(texts, tmp_path)
    assert outputs == outputs_of(parse_turns(texts, times=times))
    report = score_prs([_episode(len(texts))], {"e": outputs})
    for key, redundancy in (("B", True), ("B_nopenalty", False)):
        reward = intervention_reward(texts, [TARGET], times=times, components=True)
        expected = reward["overall"] if redundancy else reward["no_penalty"]
        assert report.episodes[0].results[key].score == pytest.approx(expected)
    # by hand: every non-silent turn is matched to the one target (|O| = 23); the best is the exact content
    # inside the window (t = 4, c = 1, decay 1), so PRS-B = 1 / 23 and the no-penalty score is 1
    assert report.episodes[0].results["B"].score == pytest.approx(1 / 23)
    assert report.summary()["overall"]["malformed_outputs"] == 19
    assert not any(math.isnan(r.time) for r in outputs)
