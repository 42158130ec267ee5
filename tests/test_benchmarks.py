"""The benchmarks measure what they say: each fast path gives the slow path's outputs.

No timing is asserted anywhere; the scripts are called as functions with tiny sizes and never write results.jsonl.
RESULTS.md is what `benchmarks.results` writes from results.jsonl.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import common, results

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    """The module `benchmarks.<name>` (the scripts run as ``python -m benchmarks.<name>``)."""
    return importlib.import_module(f"benchmarks.{name}")


@pytest.fixture(autouse=True)
def no_results_file(monkeypatch, tmp_path):
    """A benchmark function that recorded would write a file of its own test, which must stay absent."""
    records = tmp_path / "no_results.jsonl"
    monkeypatch.setattr(common, "RESULTS", records)
    yield
    assert not records.exists(), "a test must not append to results.jsonl"


# ------------------------------------------------------------------------------------------------- results
def test_results_md_is_what_the_generator_writes_from_results_jsonl():
    """RESULTS.md is generated: rerun ``python -m benchmarks.results`` after editing results.jsonl."""
    assert results.TABLE.read_text() == results.render(results.load(BENCH / "results.jsonl"))


def test_readme_performance_table_is_what_the_generator_writes():
    """The README quotes the latest records of `README_ROWS`, written by the same command (no pasted number)."""
    records = results.load(BENCH / "results.jsonl")
    readme = results.README.read_text()
    assert results.README_BEGIN in readme and results.README_END in readme
    assert readme == results.with_readme_block(readme, records)
    names = {r["benchmark"] for r in records}
    assert set(results.README_ROWS) <= names, set(results.README_ROWS) - names


def test_every_recorded_benchmark_is_a_script_here():
    """Each seeded or appended record names a command that runs a benchmark of this folder."""
    for r in results.load(BENCH / "results.jsonl"):
        script = r["command"].split("benchmarks", 1)[1].split()[0].lstrip("/.").removesuffix(".py")
        assert (BENCH / f"{script.replace('.', '/')}.py").exists(), r["command"]
        assert r["commit"] and r["machine"] and r["date"], r["benchmark"]


def test_record_appends_json_and_the_table_keeps_the_latest_per_benchmark(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    monkeypatch.setattr(common, "RESULTS", path)
    common.record("a", "first", command="python -m benchmarks.a", values={"ratio": 2.0})
    common.record("b", "only b | piped", command="python -m benchmarks.b")
    assert common.record("a", "dry", dry=True)["result"] == "dry"  # --no-record: printed, not written
    common.record("a", "second", command="python -m benchmarks.a --quick")
    lines = path.read_text().splitlines()
    assert [json.loads(line)["result"] for line in lines] == ["first", "only b | piped", "second"]
    assert json.loads(lines[0])["values"] == {"ratio": 2.0} and json.loads(lines[0])["commit"]
    table = results.render(results.load(path)).split("|---|---|---|---|---|---|\n")[1].splitlines()
    assert len(table) == 2
    assert table[0].startswith("| a | second | ") and table[0].endswith(" | `python -m benchmarks.a --quick` |")
    assert table[1].startswith("| b | only b \\| piped | ")


# --------------------------------------------------------------------------------------------------- scoring
def test_prs_benchmark_equals_a_direct_prs_score_loop():
    from proactive_rewards import prs_score

    scoring = load("scoring")
    r = scoring.bench_prs(300)
    episodes = scoring.random_episodes(300, "prs")
    preds = scoring.random_predictions(episodes)
    direct = [prs_score(preds[e.id], e.targets, mode="B").score for e in episodes]
    assert r["prs_b"] == pytest.approx(100 * sum(direct) / len(direct), abs=1e-4)
    assert 0 < r["prs_b"] < 100  # random predictions hit some targets, not all


def test_pauc_benchmark_equals_a_per_turn_loop():
    from proactive_eval.benchmarks.pvqa.metric import pauc_turn
    from proactive_eval.judges import RuleJudge

    scoring = load("scoring")
    r = scoring.bench_pauc(200)
    episodes = scoring.random_episodes(200, "pauc")
    preds = scoring.random_predictions(episodes)
    judge = RuleJudge("token_f1")
    turns = [
        pauc_turn(
            t.window, preds[e.id], lambda q, g, p: judge.score_pair(g, p), 0.5, t.related, "What happens?", t.text
        )
        for e in episodes
        for t in e.targets
    ]
    assert r["turns"] == len(turns)
    assert r["pauc"] == pytest.approx(100 * sum(turns) / len(turns), abs=1e-3)
    assert r["pauc_direct"] == r["pauc"]  # prompt round trip and score_pair agree


def test_judge_rates_cache_full_run_makes_no_call(tmp_path):
    scoring = load("scoring")
    prompts = [f"Question: q\nGround Truth Answer: g{i}\nPredicted Answer: p{i}" for i in range(6)]
    with scoring.FakeServer(latency=0.0) as server:
        r = scoring.judge_rates(server.base_url, prompts, concurrency=2, cache_dir=str(tmp_path))
    assert r["calls"] == (6, 6, 0)  # cache off, cache empty, cache full
    assert min(r["off"], r["cold"], r["warm"]) > 0


# -------------------------------------------------------------------------------------------------- SFT step
def test_focal_loss_with_gamma_0_and_no_balancing_is_the_benchmarks_cross_entropy():
    sft_step = load("sft_step")
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 17, 50, generator=gen) * 3
    labels = torch.randint(0, 50, (3, 17), generator=gen)
    labels[torch.rand(3, 17, generator=gen) < 0.3] = -100
    labels[0, :4] = 7
    ce = sft_step.ce_loss(logits, labels)
    focal = sft_step.focal_loss(logits, labels, [7, 9], gamma=0.0, balance=False)
    assert torch.equal(ce, focal)  # docs/spec.md §3: bit for bit
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), labels.reshape(-1), ignore_index=-100)
    assert ce.item() == pytest.approx(ref.item(), rel=1e-6)
    assert sft_step.focal_loss(logits, labels, [7, 9]).item() != pytest.approx(ce.item())


def test_step_bench_losses_share_model_and_batch():
    sft_step = load("sft_step")
    bench = sft_step.StepBench(batch_size=2)
    with torch.no_grad():
        logits = bench.logits()
    assert logits.shape[:2] == bench.labels.shape
    assert (bench.labels != -100).any(0).all()  # logits_to_keep kept supervised columns only
    plain = sft_step.focal_loss(logits, bench.labels, bench.state_ids, gamma=0.0, balance=False)
    assert torch.equal(bench.loss("ce", logits), plain)
    assert any(int((bench.labels == t).sum()) for t in bench.state_ids)  # the focal weights have work to do


@pytest.mark.slow
def test_our_trainer_with_plain_ce_matches_trl_sft_trainer_loss(tmp_path):
    """Same data, model and collator: with γ = 0 and no balancing our first-step loss is TRL's (the trainer
    comparison times the two on identical work)."""
    sft_step = load("sft_step")
    _, processor = sft_step.tiny_model(0)
    examples = sft_step.make_examples(processor, 4, seed=3)
    loss = {}
    for kind in ("ours", "trl"):
        extra = {"focal_gamma": 0.0, "state_balance": False} if kind == "ours" else {}
        trainer = sft_step.make_trainer(kind, examples, str(tmp_path / kind), 1, 4, **extra)
        trainer.train()
        loss[kind] = next(h["loss"] for h in trainer.state.log_history if "loss" in h)
    assert loss["ours"] == pytest.approx(loss["trl"], abs=1e-4)


# --------------------------------------------------------------------------------------------------- rollout
def _sharpen(model, std: float = 0.1, seed: int = 0):
    # at build_tiny's init greedy decoding repeats one token whatever the input; larger weights make it depend on it
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


@pytest.fixture(scope="module")
def rollout_setup():
    rollout = load("rollout")
    model, processor, windows = rollout.setup(1)
    return rollout, _sharpen(model), processor, windows[0]


def test_batched_rollouts_equal_one_session_at_a_time_under_greedy(rollout_setup):
    rollout, model, processor, (window, frames) = rollout_setup
    greedy = rollout.params(0, greedy=True)
    batched = rollout.streaming(model, processor, window, frames, 4, greedy)
    single = rollout.one_at_a_time(model, processor, window, frames, 4, greedy)
    assert len(batched) == len(single) == 4
    for b, s in zip(batched, single):
        assert b.prompt_ids == s.prompt_ids
        assert b.completion_ids == s.completion_ids
        assert b.texts == s.texts
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-5)
    assert len(set(batched[0].texts)) > 1  # the sharpened model does not repeat one turn


def test_speculative_rollouts_equal_turn_by_turn_ones_under_greedy(rollout_setup):
    """The before/after comparison decodes the same tokens: greedy rollouts with and without speculative silence,
    for the untrained model (drafts rejected) and the proactive stand-in (drafts mostly kept)."""
    rollout, model, processor, (window, frames) = rollout_setup
    greedy = rollout.params(0, greedy=True)
    for policy in (model, rollout.proactive(model, processor)):
        on = rollout.streaming(policy, processor, window, frames, 3, greedy)
        off = rollout.streaming(policy, processor, window, frames, 3, greedy, speculate=False)
        for a, b in zip(on, off):
            assert a.completion_ids == b.completion_ids and a.texts == b.texts
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert "</Silence>" in on[0].texts


def test_single_turn_baselines_cover_the_same_tokens(rollout_setup):
    rollout, model, processor, (window, frames) = rollout_setup
    group = rollout.streaming(model, processor, window, frames, 3, rollout.params(1))
    x = rollout.single_turn_inputs(group, processor)
    env_tokens = sum(1 - m for m in group[0].env_mask)
    assert len(x["input_ids"]) == len(group[0].prompt_ids) + env_tokens
    assert len(x["image_grid_thw"]) == len(group[0].images)
    for t in group:  # every rollout's total length, up to the rounding of the mean policy length
        assert abs(len(x["input_ids"]) + x["new_tokens"] - len(t.prompt_ids) - len(t.completion_ids)) <= max(
            abs(sum(t.env_mask) - sum(u.env_mask)) for u in group
        )
    out = rollout.engine_single_turn(model, processor, x, 3, seed=0)
    assert [len(t) for t in out.token_ids] == [x["new_tokens"]] * 3
    generated = rollout.hf_single_turn(model, processor, x, 3, seed=0)
    assert tuple(generated.shape) == (3, len(x["input_ids"]) + x["new_tokens"])
    assert generated[:, : len(x["input_ids"])].eq(torch.tensor(x["input_ids"])).all()


# -------------------------------------------------------------------------------------------------- streaming
def test_streaming_configurations_decode_the_same_dialogue():
    """Every engine configuration the streaming benchmark times decodes the same tokens, and the naive baseline
    re-decodes exactly the turns of that dialogue."""
    import numpy as np

    streaming = load("streaming")
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, size=(64, 64, 3), dtype=np.uint8) for _ in range(6)]
    model, processor = streaming.proactive_model("qwen2_5_vl", "xs", frames, respond=0.2)
    runs = {name: streaming.run_engine(model, processor, frames, 3, **kw) for name, kw in streaming.CONFIGS.items()}
    ids = runs[streaming.ENGINE][1]
    assert all(run[1] == ids for run in runs.values())
    turns = streaming.turns_of(processor, ids)
    assert len(turns) == 6
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = processor.tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    for start, end in turns:
        assert ids[start - len(header) : start] == header and ids[end - 1] == stop and stop not in ids[start : end - 1]
    calls = {name: run[2].n_forward_calls for name, run in runs.items()}
    assert calls[streaming.ENGINE] < calls["speculative silence, K=1"] < calls["frame by frame"]


# ---------------------------------------------------------------------------------------------------- memory
def test_peak_rss_is_the_childs_peak():
    memory = load("memory")
    mib, _ = memory.peak_rss([sys.executable, "-c", "x = bytearray(300 * 2**20); x[::4096] = b'1' * len(x[::4096])"])
    assert 300 <= mib < 2000
    small, _ = memory.peak_rss([sys.executable, "-c", "pass"])
    assert small < mib - 250  # each measurement sees its own child only


def test_memory_recipes_exist_and_are_shortened():
    memory = load("memory")
    cmds = memory.recipes("/tmp/x", 2)
    root = BENCH.parent
    for name, cmd in cmds.items():
        if "--config" in cmd:
            assert (root / cmd[cmd.index("--config") + 1]).exists(), name
            assert cmd[cmd.index("--max_steps") + 1] == "2"


def test_memory_recipes_run_the_trainers_not_an_import(tmp_path):
    """The recipes run ``python -m <package>`` (a ``__main__``), and a command that leaves no model in its
    ``--output_dir`` is an error: ``python -m proactive_rl.sft.main`` only imported the trainer and measured that."""
    import importlib.util

    memory = load("memory")
    for name, cmd in memory.recipes(str(tmp_path), 2).items():
        if "--config" in cmd:
            assert importlib.util.find_spec(cmd[cmd.index("-m") + 1] + ".__main__") is not None, name
    with pytest.raises(RuntimeError, match="left no model"):
        memory.peak_rss([sys.executable, "-c", "pass", "--output_dir", str(tmp_path / "nothing")])


def test_peak_rss_names_the_failing_command():
    memory = load("memory")
    with pytest.raises(RuntimeError, match="boom"):
        memory.peak_rss([sys.executable, "-c", "raise SystemExit('boom')"])


# ------------------------------------------------------------------------------------------------- run_all
def test_run_all_plan():
    run_all = load("run_all")
    runs, skipped = run_all.plan(full=False, only=None)
    names = [n for n, _ in runs]
    for name in ("scoring", "sft_step", "rollout", "memory", "rewards"):
        assert name in names
    assert dict(runs)["rollout"] == ["--quick"]
    assert "sft_ablation" not in names and any(s.startswith("sft_ablation") for s in skipped)
    runs, skipped = run_all.plan(full=False, only=["scoring", "nope"])
    assert runs == [("scoring", ["--quick"])]
    assert skipped == ["nope (no benchmarks/nope.py)"]
    full, _ = run_all.plan(full=True, only=None)
    assert all(args == [] for _, args in full)


# ---------------------------------------------------------------------------------------------------- GPU
@pytest.mark.slow
def test_gpu_script_dry_run(tmp_path, monkeypatch):
    """The 3B script's CPU-side preparation and measurement code run (tiny model, CPU); the 3B config builds."""
    monkeypatch.setenv("OUT", str(tmp_path))
    gpu = load("gpu.qwen2_5_vl_3b")
    result = gpu.main(["--dry-run"])
    assert 3.7e9 < result["params_3b_config"]["total"] < 3.8e9  # Qwen2.5-VL-3B: 3.75 B parameters
    assert result["sft"]["tokens_per_s"] > 0 and result["stream"]["frames"] == 3
    batched = result["batched"]  # the batched-streaming measurement ran (same tokens as one at a time: checked)
    assert batched["streams"] == 2 and batched["language_calls"] > 0 and batched["peak_kv_cache_used_bytes"] > 0
    assert (tmp_path / "qwen2_5_vl_3b.json").exists()
    assert "tokens/s" in result["line"]


def test_data_scale_episodes_are_30s_640x360(tmp_path):
    """The data-scale benchmark's corpus: valid episodes whose videos hold 30 frames of 640x360 at 1 FPS."""
    from proactive_eval.episodes import load_episodes
    from proactive_eval.video import frame_plan

    bench = load("data_scale")
    videos = bench.make_videos(tmp_path, 2, seconds=30)
    episodes = list(load_episodes(bench.write_episodes(tmp_path, 5, videos)))
    assert len(episodes) == 5 and {e.video for e in episodes} == set(videos)
    plan = frame_plan(episodes[0])
    assert len(plan) == 30 and {size for _, size in plan} == {(360, 640)}
