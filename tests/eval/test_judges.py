"""Judges: prompt parsing, rule scorers (hand-computed), and the HTTP judge against a misbehaving fake server."""

import asyncio
import re

import pytest

from proactive_eval.judges import (
    OEG_SYSTEM_PROMPT,
    JudgeError,
    OpenAIJudge,
    RuleJudge,
    oeg_prompt,
    parse_bits,
    parse_level,
    pauc_judge_fn,
    pauc_prompt,
    rouge_l,
    split_pauc_prompt,
    token_f1,
)
from tests.support.fake_openai import FakeOpenAI

FAST = dict(timeout=5.0, backoff=0.001, max_backoff=0.01)  # only scheduled faults time out


def level_answer(messages):
    """The fake judge: the level is derived from the prediction text, so every score is checkable."""
    match = re.search(r"Predicted Answer: item-(\d+)", messages[-1]["content"])
    return str(int(match.group(1)) % 3 + 1) if match else "1"


def expected_level(i):
    return i % 3 + 1


def schedule(prompt, attempt):
    """Every 10 prompts: one timeout, one 429, one 500, one malformed body, one unparseable answer (first try)."""
    i = int(re.search(r"item-(\d+)", prompt).group(1))
    if attempt > 0:
        return None
    return {1: "timeout", 2: "429", 3: "500", 4: "malformed", 5: "unparseable"}.get(i % 10)


@pytest.mark.parametrize(
    "text, level",
    [("3", 3), ("2\n", 2), (" 1 ", 1), ("Score: 2", 2), ("**3**", 3), ("<think>maybe 1</think>\n3", 3)]
    + [("0", None), ("4", None), ("", None), ("The prediction is fine.", None), ("2.5", None), (None, None)],
)
def test_parse_level(text, level):
    assert parse_level(text) == level


def test_pauc_prompt_round_trip_and_rejects_foreign_text():
    prompt = pauc_prompt("Q?", "gold text", "first. second.")
    assert split_pauc_prompt(prompt) == ("Q?", "gold text", "first. second.")
    with pytest.raises(ValueError, match="not a PAUC judge prompt"):
        split_pauc_prompt("rate this please")


def test_rule_scores_by_hand():
    # gold {dog, runs, in, park}, prediction {dog, sleeps, in, park, today}: overlap 3, P = 3/5, R = 3/4.
    assert token_f1("The dog runs in the park", "a dog sleeps in the park today") == pytest.approx(
        2 * 0.6 * 0.75 / 1.35
    )
    # LCS of [x y z w] and [y x z w] is 3 (y z w or x z w): P = R = 3/4.
    assert rouge_l("x y z w", "y x z w") == pytest.approx(0.75)
    assert token_f1("x y z w", "y x z w") == pytest.approx(1.0)  # F1 ignores order, ROUGE-L does not
    assert token_f1("", "") == 1.0 and token_f1("a b", "") == 0.0 and rouge_l("c d", "e f") == 0.0


@pytest.mark.parametrize("kind", ["token_f1", "rouge_l"])
def test_rule_judge_levels(kind):
    judge = RuleJudge(kind)
    prompts = [
        pauc_prompt("q", "boiling pasta in a pot", "boiling pasta in a pot"),  # 1.0 -> 3
        pauc_prompt("q", "boiling pasta in a big pot", "pasta is cooking"),  # F1 = 2/9, ROUGE-L = 2/9 -> 2
        pauc_prompt("q", "boiling pasta", "a cat sleeps"),  # 0 -> 1
    ]
    assert judge.score_many(prompts) == [3, 2, 1]
    assert asyncio.run(judge.score(prompts[0])) == 3
    with pytest.raises(ValueError, match="unknown rule judge"):
        RuleJudge("bleu")


def test_200_judge_calls_with_faults_then_all_cache_hits(tmp_path):
    """Acceptance 3: timeouts, 429s, 500s and malformed answers are absorbed; a re-run makes zero HTTP calls."""
    prompts = [pauc_prompt(f"question {i}", f"gold {i}", f"item-{i}") for i in range(200)]
    expected = [expected_level(i) for i in range(200)]
    cache = tmp_path / "judge.sqlite"
    with FakeOpenAI(level_answer, schedule, sleep=2.0) as server:
        judge = OpenAIJudge(server.base_url, "fake-gpt", cache_path=cache, concurrency=8, **{**FAST, "timeout": 0.5})
        assert judge.score_many(prompts, progress=False) == expected
        # 20 of each fault reached the server (a fault is injected on a prompt's first request only).
        assert {k: server.kinds[k] for k in ("timeout", "429", "500", "malformed", "unparseable")} == dict.fromkeys(
            ("timeout", "429", "500", "malformed", "unparseable"), 20
        )
        stats = judge.stats.as_dict()
        # At least 80 transport retries (a loaded machine may time out a healthy request too) and 20 re-asks;
        # every request is accounted for, nothing is left unparsed or failed.
        assert stats["retries"] >= 80 and stats["reasks"] == 20
        assert stats["calls"] == 200 + stats["retries"] + stats["reasks"]
        assert (stats["prompts"], stats["cache_hits"], stats["unparseable"], stats["failures"]) == (200, 0, 0, 0)
        first_run_requests = server.requests

        rerun = OpenAIJudge(server.base_url, "fake-gpt", cache_path=cache, concurrency=8, **FAST)
        assert rerun.score_many(prompts, progress=False) == expected
        assert server.requests == first_run_requests  # zero HTTP calls
        assert rerun.stats.calls == 0 and rerun.stats.cache_hits == 200

        # Another model is another cache namespace.
        other = OpenAIJudge(server.base_url, "other-model", cache_path=cache, **FAST)
        other.score_many(prompts[:3], progress=False)
        assert other.stats.cache_hits == 0 and other.stats.calls >= 3


def test_unparseable_answers_are_counted_cached_and_not_reasked_on_rerun(tmp_path):
    def never_a_score(prompt, attempt):
        return "unparseable" if "item-0" in prompt else None

    prompts = [pauc_prompt("q", "g", "item-0"), pauc_prompt("q", "g", "item-1")]
    with FakeOpenAI(level_answer, never_a_score) as server:
        judge = OpenAIJudge(server.base_url, "m", cache_path=tmp_path / "c.sqlite", reask_unparseable=2, **FAST)
        assert judge.score_many(prompts, progress=False) == [None, 2]
        assert judge.stats.unparseable == 1 and judge.stats.reasks == 2 and server.requests == 4
        rerun = OpenAIJudge(server.base_url, "m", cache_path=tmp_path / "c.sqlite", reask_unparseable=2, **FAST)
        assert rerun.score_many(prompts, progress=False) == [None, 2]
        assert server.requests == 4 and rerun.stats.unparseable == 1


def test_exhausted_retries_raise_or_score_none():
    prompts = [pauc_prompt("q", "g", "item-1"), pauc_prompt("q", "g", "item-2")]

    def always_500_for_item_1(prompt, attempt):
        return "500" if "item-1" in prompt else None

    with FakeOpenAI(level_answer, always_500_for_item_1) as server:
        judge = OpenAIJudge(server.base_url, "m", max_retries=2, **FAST)
        with pytest.raises(JudgeError, match="1 of 2 judge prompts failed"):
            judge.score_many(prompts, progress=False)
        lenient = OpenAIJudge(server.base_url, "m", max_retries=2, on_failure="none", **FAST)
        assert lenient.score_many(prompts, progress=False) == [None, 3]
        assert lenient.stats.failures == 1 and lenient.stats.retries == 2 and lenient.stats.unparseable == 0


def test_non_retryable_http_error_raises_at_once():
    with FakeOpenAI(level_answer) as server:
        judge = OpenAIJudge(server.base_url.replace("/v1", "/nope"), "m", **FAST)
        with pytest.raises(JudgeError, match="HTTP 404"):
            judge.score_many([pauc_prompt("q", "g", "item-1")], progress=False)
        assert judge.stats.calls == 1 and judge.stats.retries == 0


def test_score_many_inside_a_running_event_loop_and_async_score():
    prompts = [pauc_prompt("q", "g", f"item-{i}") for i in range(5)]
    with FakeOpenAI(level_answer) as server:
        judge = OpenAIJudge(server.base_url, "m", **FAST)

        async def caller():
            direct = await judge.score(prompts[0])
            await judge.aclose()
            return direct, judge.score_many(prompts, progress=False)  # nested: runs on a worker thread

        direct, many = asyncio.run(caller())
        assert direct == expected_level(0) and many == [expected_level(i) for i in range(5)]
        assert server.requests == 5  # prompts[0] came from memory the second time


def test_pauc_judge_fn_prefetches_concurrently_then_serves_from_memory():
    triples = [("q", "g", f"item-{i}") for i in range(12)]
    with FakeOpenAI(level_answer) as server:
        fn = pauc_judge_fn(OpenAIJudge(server.base_url, "m", **FAST))
        fn.prefetch(triples, progress=False)
        assert [fn(*t) for t in triples] == [expected_level(i) for i in range(12)]
        assert server.requests == 12
    rule = pauc_judge_fn(RuleJudge("rouge_l"))
    assert rule("q", "boiling pasta", "boiling pasta") == 3


def test_oeg_prompt_and_bits():
    prompt = oeg_prompt("What is this?", "Rotate the object, Move the camera, mug.", "Please rotate it.")
    assert "['Rotate the object', 'Move the camera', 'mug']" in prompt
    assert prompt.endswith("### System Output:\nPlease rotate it.")
    assert parse_bits("reasoning 1,1 ...\n1, 0, 0", 3) == [1, 0, 0]
    assert parse_bits("<think>0,0,0</think>1,0", 3) is None
    with FakeOpenAI(lambda messages: "thinking...\n0,1,0") as server:
        judge = OpenAIJudge(server.base_url, "qwen3-8b", system_prompt=OEG_SYSTEM_PROMPT, **FAST)
        raw = judge.complete_many([prompt], progress=False)
        assert parse_bits(raw[0], 3) == [0, 1, 0]
        assert server.bodies[0]["messages"][0] == {"role": "system", "content": OEG_SYSTEM_PROMPT}
