"""Parsing helpers: normalisation, integer content, state-token turns, MCQA answers (docs/spec.md §2, §4, §6)."""

import math

import pytest

from proactive_rewards import (
    RESPONSE_TOKEN,
    SILENCE_TOKEN,
    Response,
    Turn,
    exact_match,
    normalize_text,
    parse_int,
    parse_mcqa_answer,
    parse_turns,
    responses_of,
    token_f1,
)


def test_tokens():
    assert (SILENCE_TOKEN, RESPONSE_TOKEN) == ("</Silence>", "</Response>")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  Warning ", "warning"),
        ("Warning!", "warning"),
        ("Warning !?.", "warning"),
        ("a.b", "a.b"),
        ("", ""),
        ("START。", "start"),
        ("...", ""),
    ],
)
def test_normalize_text(text, expected):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3", 3),
        (" 03 ", 3),
        ("+3", 3),
        ("-2", -2),
        ("3.", 3),
        ("3.0", None),
        ("three", None),
        ("1 2", None),
        ("", None),
        ("9" * 5000, None),
    ],
)
def test_parse_int(text, expected):
    assert parse_int(text) == expected


def test_exact_match():
    assert exact_match("007", "7") == 1.0
    assert exact_match("Warning.", " warning") == 1.0
    assert exact_match("warn", "warning") == 0.0
    assert exact_match("3", "4") == 0.0


def test_token_f1_hand_computed():
    # pred {turn, off, the, stove} vs gold {turn, the, stove, off, now}: 4 common, P = 1, R = 0.8.
    assert token_f1("turn off the stove", "Turn the stove off now") == pytest.approx(2 * 0.8 / 1.8)
    assert token_f1("", "x") == 0.0 and token_f1("a a", "a") == pytest.approx(2 * 0.5 / 1.5)


def test_string_with_timestamps():
    turns = parse_turns("<t=0.0s></Silence>\n<t=1.0s></Response> Warning\n<t=2s> </Response>  <t=bad>x")
    assert turns == [
        Turn(0.0, "silence", ""),
        Turn(1.0, "response", "Warning"),
        Turn(2.0, "malformed", ""),  # </Response> with no content
        Turn(turns[3].time, "malformed", "x"),
    ]
    assert math.isnan(turns[3].time)


def test_string_without_timestamps_splits_on_state_tokens():
    turns = parse_turns("</Silence></Silence></Response> 3 </Response>4", times=[0, 1, 2, 3])
    assert turns == [
        Turn(0.0, "silence", ""),
        Turn(1.0, "silence", ""),
        Turn(2.0, "response", "3"),
        Turn(3.0, "response", "4"),
    ]
    # leading text before the first token is its own malformed turn; missing times are nan
    lead = parse_turns("hello </Silence>")
    assert [t.state for t in lead] == ["malformed", "silence"] and all(math.isnan(t.time) for t in lead)
    assert parse_turns("") == [] and parse_turns("   ") == []


def test_times_column_wins_over_inband_times():
    turns = parse_turns("<t=5.0s></Response> 1<t=6.0s></Silence>", times=[50.0])
    assert [t.time for t in turns] == [50.0, 6.0]


def test_per_step_strings():
    turns = parse_turns(
        ["</Silence>", "</Response> 1", "", "</Silence> extra", "</Response> 1 </Response> 2"], times=[0, 1, 2, 3, 4]
    )
    assert [t.state for t in turns] == ["silence", "response", "malformed", "malformed", "malformed"]
    assert [t.time for t in turns] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_chat_messages_several_assistant_turns():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "<t=0.0s>"}, {"type": "image"}]},
        {"role": "assistant", "content": "</Silence>"},
        {"role": "user", "content": "<t=1.0s> frame"},
        {"role": "assistant", "content": [{"type": "text", "text": "</Response> Warning"}]},
        {"role": "assistant", "content": "</Response> 2", "time": 7.5},
    ]
    assert parse_turns(messages) == [
        Turn(0.0, "silence", ""),
        Turn(1.0, "response", "Warning"),
        Turn(7.5, "response", "2"),
    ]


def test_chat_single_assistant_message_is_split_like_a_string():
    completion = [{"role": "assistant", "content": "<t=3.0s></Silence><t=4.0s></Response> end"}]
    assert parse_turns(completion) == [Turn(3.0, "silence", ""), Turn(4.0, "response", "end")]


def test_pairs_and_records():
    turns = parse_turns(
        [
            (1.0, "Warning"),
            Response(2.0, "</Silence>"),
            {"time": "3", "text": "</Response> 4"},
            Turn(9.0, "malformed", "x"),
        ]
    )
    assert turns == [
        Turn(1.0, "response", "Warning"),
        Turn(2.0, "silence", ""),
        Turn(3.0, "response", "4"),
        Turn(9.0, "malformed", "x"),
    ]
    assert responses_of(turns) == [Response(1.0, "Warning"), Response(3.0, "4")]


@pytest.mark.parametrize("garbage", [None, 3, 2.5, object(), [None, 1, [1, 2, 3]], {"role": "x"}, b"bytes"])
def test_garbage_never_raises(garbage):
    assert isinstance(parse_turns(garbage, times="nonsense"), list)


# Options as ProactiveBench renders them: proactive actions first, then the categories.
OPTIONS = ["Move the occluding object to the left.", "I do not know.", "cat", "dog", "hot dog"]


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("dog", 3),
        ("D. dog", 3),
        ("D.dog", 3),
        ("  DOG ", 3),
        ("hot dog", 4),
        ("hotdog", 4),
        ("E", 4),
        ("e.", 4),
        ("b", 1),
        ("A. Move the occluding object to the left.", 0),
        ("moveTheOccludingObject to the left.", 0),
        ("F", None),
        ("a dog", None),
        ("", None),
        ("The answer is C. cat", 2),  # the authors' regex drops everything up to "C. "
        ("c) cat", None),
    ],
)
def test_parse_mcqa_answer(answer, expected):
    assert parse_mcqa_answer(answer, OPTIONS) == expected


def test_stored_responses_and_flagged_malformed_outputs():
    """Stored records are classified with plain=True; a flagged malformed output stays malformed (docs/spec.md §13)."""
    turns = parse_turns([(1.0, ""), (2.0, "</Response>"), Response(3.0, "Warning", True), {"time": 4, "text": "x"}])
    assert [(t.state, t.content) for t in turns] == [
        ("silence", ""),
        ("malformed", ""),
        ("malformed", "Warning"),
        ("response", "x"),
    ]
    assert parse_turns([{"time": 5, "text": "x", "malformed": True}])[0].state == "malformed"


def test_classify_turn_per_model_settings():
    from proactive_rewards import classify_turn

    assert classify_turn("NO REPLY") == ("malformed", "NO REPLY")
    assert classify_turn("NO REPLY", silence_signals=["NO REPLY"]) == ("silence", "")
    assert classify_turn("a car", plain=True) == ("response", "a car")
    assert classify_turn("", plain=True) == ("silence", "")
    assert classify_turn("</Silence> a car", plain=True) == ("malformed", "a car")  # tokens: the strict rule
    assert classify_turn(None) == ("malformed", "") and classify_turn(3) == ("malformed", "")


def test_a_malformed_output_counts_in_the_denominator_and_earns_nothing():
    from proactive_rewards import prs_score

    # two outputs on the one target: the malformed one (right text, right time) earns 0, the other exp(-0.05)
    result = prs_score([Response(10.0, "1", True), Response(11.0, "1")], [(10.0, "1")], mode="B")
    assert result.score == pytest.approx(math.exp(-0.05) / 2)
