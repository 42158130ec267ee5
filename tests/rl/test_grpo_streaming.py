"""Streaming GRPO (docs/spec.md §8): windows, rollouts, TRL overrides, log-prob consistency.

References are independent of the code under test: windows are computed by hand from the rules, rollout prompts
are compared with `proactive_rl.chat.encode_dialogue` (the SFT renderer), and the rollout's log-probabilities are
compared with TRL's own recomputation (`GRPOTrainer._get_per_token_logps_and_entropies`, fused LM head) and with a
plain full forward pass of the model.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from proactive_eval.episodes import Episode
from proactive_rewards.types import Target
from proactive_rl.data.frames import frames_of
from proactive_rl.grpo.streaming import trl_overrides
from proactive_rl.grpo.streaming.rollout import plan_window, rollout_window
from proactive_rl.grpo.streaming.windows import build_windows, composition
from proactive_rl.streaming import SamplingParams

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4  # docs/spec.md §8, fp32 CPU


def episode(task, duration, targets, **kw) -> Episode:
    return Episode(id=f"{task}_x", task=task, duration=duration, instruction="Watch.", targets=targets, **kw)


# --------------------------------------------------------------------------- windows


def test_windows_bounded_prefix_and_count_prefix_from_zero():
    acc = episode("accident", 30.0, [Target(20.0, "Warning")])
    cnt = episode("atomic", 30.0, [Target(20.0, "1")])
    (a,) = build_windows([acc], lead_s=4, tail_s=3, max_window_s=16, prefix_s=5)
    (c,) = build_windows([cnt], lead_s=4, tail_s=3, max_window_s=16, prefix_s=5)
    # window [20-4, 20+3]; accident prefix from 16-5 = 11, count prefix from 0 (P³I Appendix C)
    assert (a.start, a.end, a.prefix_start) == (16.0, 23.0, 11.0)
    assert (c.start, c.end, c.prefix_start) == (16.0, 23.0, 0.0)
    assert [t.time for t in a.targets] == [20.0]
    assert a.row() == {
        "prompt": a.id,
        "task": "accident",
        "targets": [{"time": 20.0, "text": "Warning", "window": None}],
    }


def test_compositional_one_window_or_split_start_and_end():
    short = episode("compositional", 40.0, [Target(10.0, "start"), Target(16.0, "end")])
    long = episode("compositional", 60.0, [Target(10.0, "start"), Target(40.0, "end")])
    (one,) = build_windows([short], lead_s=2, tail_s=2, max_window_s=12, prefix_s=4)
    assert (one.start, one.end, [t.text for t in one.targets]) == (8.0, 18.0, ["start", "end"])
    first, second = build_windows([long], lead_s=2, tail_s=2, max_window_s=12, prefix_s=4)
    assert (first.start, first.end, [t.text for t in first.targets]) == (8.0, 12.0, ["start"])
    assert (second.start, second.end, second.prefix_start, [t.text for t in second.targets]) == (
        38.0,
        42.0,
        34.0,
        ["end"],
    )
    assert composition([one, first, second]) == {"compositional": 3}


WINDOW = dict(lead_s=4, tail_s=4, max_window_s=16, prefix_s=8)


def test_windows_reject_bad_knobs_and_unknown_tasks():
    with pytest.raises(ValueError, match="max_window_s"):
        build_windows([], **{**WINDOW, "max_window_s": 0})
    with pytest.raises(ValueError, match="tasks: no streaming-GRPO reward for \\['pvqa'\\]"):
        build_windows([], tasks=["pvqa"], **WINDOW)


def test_windows_say_which_episodes_no_reward_trains(caplog):
    acc, pvqa = episode("accident", 30.0, [Target(20.0, "Warning")]), episode("pvqa", 30.0, [Target(9.0, "A cat.")])
    with caplog.at_level("WARNING", logger="proactive_rl.grpo.streaming.windows"):
        windows = build_windows([acc, pvqa, pvqa], **WINDOW)
    assert [w.task for w in windows] == ["accident"]
    assert "left out 2 pvqa episode(s): no trajectory reward" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="proactive_rl.grpo.streaming.windows"):
        assert [w.task for w in build_windows([acc, pvqa], tasks=["accident"], **WINDOW)] == ["accident"]
    assert "left out 1 pvqa episode(s): not in `tasks`" in caplog.text


# --------------------------------------------------------------------------- rollouts


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


@pytest.fixture(scope="module")
def windows():
    from proactive_rl.synthetic import generate_episodes

    eps = generate_episodes("accident", 1, seed=3, duration=(10, 12)) + generate_episodes(
        "atomic", 1, seed=3, duration=(10, 12)
    )
    return build_windows(eps, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)


def test_rollout_prompt_is_the_sft_rendering_and_masks_cover_policy_tokens(tiny, windows):
    from proactive_rl.chat import build_messages, encode_dialogue

    model, processor = tiny
    window = windows[0]
    trajs = rollout_window(model, processor, window, 2, SamplingParams(max_new_tokens=3, do_sample=True, seed=0))
    plan = plan_window(window)
    frames = [(t, f) for t, f in frames_of(window.episode) if window.prefix_start - 1e-6 <= t <= window.end + 1e-6]
    answers = [s.answer for s in plan.prefix] + ["</Silence>"] * len(plan.steps)
    reference = encode_dialogue(processor, build_messages(window.episode, frames, responses=answers))["input_ids"]
    for traj in trajs:
        assert traj.prompt_ids == reference[: len(traj.prompt_ids)].tolist()
        assert len(traj.texts) == len(plan.steps) == len(traj.times)
        assert len(traj.images) == len(frames)
        # every policy turn ends with its end-of-turn token, and env tokens carry no log-prob
        im_end = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
        policy = [i for i, m in zip(traj.completion_ids, traj.env_mask) if m]
        assert policy.count(im_end) == len(plan.steps)
        assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.env_mask) if not m)
        # image tokens of the window's later frames are in the completion, never under the mask
        image_id = model.config.image_token_id
        assert any(i == image_id for i in traj.completion_ids)
        assert not any(m and i == image_id for i, m in zip(traj.completion_ids, traj.env_mask))


@pytest.mark.parametrize("speculate", [False, True])
def test_rollout_logprobs_equal_a_full_forward_pass(proactive, windows, speculate):
    """Each recorded log-prob equals log_softmax(logits / T) of one full forward over prompt + completion with every
    frame, in every row of a group, with and without speculative silence (rows keep drafts, others reject them)."""
    model, processor = proactive
    params = SamplingParams(max_new_tokens=3, do_sample=True, temperature=1.5, seed=1)
    group = rollout_window(model, processor, windows[1], 4, params, speculate=speculate)
    kept = [sum(t == "</Silence>" for t in traj.texts) for traj in group]
    assert 0 < sum(kept) < sum(len(traj.texts) for traj in group)  # silent turns and others
    for traj in group:
        check_logprobs(model, processor, traj, params.temperature)


def check_logprobs(model, processor, traj, temperature):
    from proactive_rl.models.families import mm_token_types

    ids = torch.tensor([traj.prompt_ids + traj.completion_ids])
    vision = processor.image_processor(images=traj.images, return_tensors="pt")
    with torch.no_grad():
        logits = model(
            input_ids=ids,
            mm_token_type_ids=mm_token_types(ids, model.config.image_token_id),
            pixel_values=vision["pixel_values"],
            image_grid_thw=vision["image_grid_thw"],
        ).logits[0]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    P = len(traj.prompt_ids)
    checked = 0
    for i, (token, m, lp) in enumerate(zip(traj.completion_ids, traj.env_mask, traj.logprobs)):
        if m:
            assert abs(logp[P + i - 1, token].item() - lp) <= TOL
            checked += 1
    assert checked == sum(traj.env_mask) > 0


# --------------------------------------------------------------------------- the trainer


def test_trl_overrides_still_exist_in_the_installed_trl():
    """Fails loudly when a TRL upgrade removes or re-signs a private method streaming GRPO overrides."""
    import trl
    from trl import GRPOTrainer

    for name, params in trl_overrides.OVERRIDES.items():
        assert hasattr(GRPOTrainer, name), (
            f"trl {trl.__version__} has no GRPOTrainer.{name} (written for {trl_overrides.TRL_VERSION})"
        )
        have = list(inspect.signature(getattr(GRPOTrainer, name)).parameters)
        missing = [p for p in params if p not in have]
        assert not missing, (
            f"trl {trl.__version__}: GRPOTrainer.{name} lost parameters {missing}; review trl_overrides"
        )
    # the public hook the rollouts plug into
    assert "rollout_func" in inspect.signature(GRPOTrainer.__init__).parameters
    assert trl.__version__.split(".")[:2] == trl_overrides.TRL_VERSION.split(".")[:2], (
        f"trl {trl.__version__} installed; trl_overrides was written for {trl_overrides.TRL_VERSION}: re-check it"
    )


def make_trainer(model, processor, windows, tmp_path, replay=None, replay_coef=1.0, **overrides):
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer

    kwargs = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        max_turn_tokens=3,
        learning_rate=1e-3,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        seed=0,
        bf16=False,  # GRPOConfig defaults to bf16 autocast; the consistency bound is for fp32
    )
    kwargs.update(overrides)
    return StreamingGRPOTrainer(
        model=model,
        args=StreamingGRPOConfig(**kwargs),
        windows=windows,
        processing_class=processor,
        replay=replay,
        replay_coef=replay_coef,
    )


def generation_batch(trainer, windows):
    G = trainer.num_generations
    return [w.row() for w in windows for _ in range(G)]


@pytest.mark.parametrize("policy", ["untrained", "proactive"])
def test_trainer_recomputes_the_rollout_logprobs(policy, request, windows, tmp_path):
    """Acceptance 2: the rollout's log-probs equal the trainer's own recomputation on the same weights (≤ 1e-4).

    The batch mixes an accident window (bounded prefix) and a count window (prefix from 0), so prompts of different
    lengths are left-padded together. `steps_per_generation=2` makes TRL score the fresh batch itself
    (``old_per_token_logps``), which goes through the frame injection of `trl_overrides`; the loss path is then
    replayed with the batch's own frame tensors. The rollouts' silent drafts are mostly rejected by the untrained
    model and mostly kept by the proactive one (their log-probs come from the speculative calls).
    """
    model, processor = request.getfixturevalue("tiny" if policy == "untrained" else "proactive")
    trainer = make_trainer(model, processor, windows, tmp_path, steps_per_generation=2)
    model.train()
    out = trainer._generate_and_score_completions(generation_batch(trainer, windows))
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    assert out["prompt_mask"].sum(1).unique().numel() == 2  # two prompt lengths, left-padded
    assert sum(out["num_images"]) == out["image_grid_thw"].shape[0]
    sampled = out["sampling_per_token_logps"]
    old = out["old_per_token_logps"]
    assert (old - sampled)[mask].abs().max().item() <= TOL
    with torch.no_grad():
        recomputed, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model,
            torch.cat([out["prompt_ids"], out["completion_ids"]], 1),
            torch.cat([out["prompt_mask"], out["completion_mask"]], 1),
            out["completion_ids"].size(1),
            pixel_values=out["pixel_values"],
            image_grid_thw=out["image_grid_thw"],
            num_images=out["num_images"],
            mm_token_type_ids=out["mm_token_type_ids"],
        )
    assert (recomputed - sampled)[mask].abs().max().item() <= TOL
    # dropping the window's frames changes the scores: the frames really reach the forward pass
    with torch.no_grad():
        blind, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model,
            torch.cat([out["prompt_ids"], out["completion_ids"]], 1),
            torch.cat([out["prompt_mask"], out["completion_mask"]], 1),
            out["completion_ids"].size(1),
            pixel_values=out["pixel_values"] * 0,
            image_grid_thw=out["image_grid_thw"],
            num_images=out["num_images"],
            mm_token_type_ids=out["mm_token_type_ids"],
        )
    assert (blind - sampled)[mask].abs().max().item() > 1e-3


def test_one_training_step_runs_and_logs(tiny, windows, tmp_path):
    from proactive_rl.models import build_tiny

    model, processor = build_tiny("qwen3_vl", "xs", seed=1)
    trainer = make_trainer(model, processor, windows, tmp_path)
    trainer.train()
    logs = trainer.state.log_history[0]
    for key in ("loss", "reward", "rollout/responses_per_window", "rollout/steps_per_window", "entropy"):
        assert key in logs, key
    assert logs["rollout/steps_per_window"] > 1


def test_the_trainer_module_leaves_the_environment_alone_and_its_construction_warns_nothing(
    windows, tmp_path, monkeypatch
):
    """Importing changes no environment variable; TRL's "experimental rollout_func" warning is filtered where the
    trainer is built (it would appear without the filter: TRL warns unless TRL_EXPERIMENTAL_SILENCE=1)."""
    from proactive_rl.models import build_tiny

    code = (
        "import os; before = dict(os.environ); import proactive_rl.grpo.streaming.main; "
        "changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k)); print(changed)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[]"
    monkeypatch.delenv("TRL_EXPERIMENTAL_SILENCE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_trainer(*build_tiny("qwen2_5_vl", "xs", seed=0), windows, tmp_path)
    assert not [w for w in caught if "rollout_func" in str(w.message)]


def test_replay_term_is_added_to_the_grpo_loss(windows, tmp_path):
    """With ``replay_mixture`` the loss is GRPO's plus ``replay_coef ×`` the distillation term of the replayed
    dialogues (pvqa, a task the windows do not reward), logged as ``replay_kl``; the term is 0 until the policy moves."""
    from proactive_eval.episodes import save_episodes
    from proactive_rl.data import parse_mixture
    from proactive_rl.grpo.replay import StreamingReplay
    from proactive_rl.models import build_tiny
    from proactive_rl.synthetic import generate_episodes

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    path = tmp_path / "pvqa.json"
    save_episodes(path, generate_episodes("pvqa", 2, seed=5, duration=(10, 10)))
    replay = StreamingReplay(model, processor, parse_mixture([{"source": str(path)}]), batch_size=2, seed=0)
    trainer = make_trainer(model, processor, windows, tmp_path, replay=replay, replay_coef=3.0)
    assert replay.loss(model).item() == pytest.approx(0.0, abs=1e-6)
    torch.manual_seed(0)
    with torch.no_grad():  # the policy drifts from the starting model, which the replay keeps frozen
        model.lm_head.weight.add_(0.05 * torch.randn_like(model.lm_head.weight))
    model.train()
    inputs = trainer._generate_and_score_completions(generation_batch(trainer, windows))
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop
    state = replay.rng.getstate()
    with torch.no_grad():
        total = trainer.compute_loss(model, inputs).item()
        replay.rng.setstate(state)  # the same replay batch
        term = replay.loss(model).item()
        trainer.replay = None
        grpo = trainer.compute_loss(model, inputs).item()
    assert term > 1e-4
    assert total == pytest.approx(grpo + 3.0 * term, rel=1e-5, abs=1e-7)
    assert trainer._metrics["train"]["replay_kl"][-1] == pytest.approx(term, rel=1e-5)


def test_replay_arguments_are_checked_before_the_model_loads(tmp_path):
    from proactive_rl.grpo.streaming.config import StreamingGRPOScriptArguments

    episodes = [{"source": "synthetic", "task": "accident", "num_episodes": 2}]
    args = StreamingGRPOScriptArguments(
        dataset_mixture=episodes, replay_mixture=[{"source": str(tmp_path / "a.json")}]
    )
    assert args.replay_mixture[0].source == str(tmp_path / "a.json")
    with pytest.raises(ValueError, match="replay_coef"):
        StreamingGRPOScriptArguments(dataset_mixture=episodes, replay_mixture=episodes, replay_coef=-1.0)
    with pytest.raises(ValueError, match="replay_mixture"):
        StreamingGRPOScriptArguments(dataset_mixture=episodes, replay_mixture=[{"task": "accident"}])


def test_config_rejects_vllm_and_ungathered_zero3(tmp_path):
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig

    with pytest.raises(ValueError, match="use_vllm"):
        StreamingGRPOConfig(output_dir=str(tmp_path), use_vllm=True, use_cpu=True, report_to="none")
    with pytest.raises(ValueError, match="ds3_gather_for_generation"):
        StreamingGRPOConfig(output_dir=str(tmp_path), ds3_gather_for_generation=False, use_cpu=True, report_to="none")


# --------------------------------------------------------------------------- recipes


@pytest.mark.parametrize("recipe", ["recipes/tiny/grpo_streaming.yaml", "recipes/p3i_assistant/grpo_qwen3vl_4b.yaml"])
def test_recipes_parse(recipe):
    """(The lint of every shipped recipe: tests/rl/test_recipes.py.)"""
    from proactive_rl.grpo.streaming.main import make_parser

    path = ROOT / recipe
    raw = yaml.safe_load(path.read_text())
    if not torch.cuda.is_available():
        raw["bf16"] = False  # a GPU recipe parsed on a CPU machine (transformers rejects bf16 without a GPU)
    script_args, training_args, model_args = make_parser().parse_dict(raw, allow_extra_keys=False)
    assert script_args.trainer == "grpo_streaming"
    assert training_args.num_generations == raw["num_generations"]
    if "p3i_assistant" in recipe:
        assert training_args.reward_alpha == 0.05 and training_args.reward_lambda == 0.2
        # the paper's RL set: 300 accident + 100 atomic + 100 event type + 363 compositional windows
        assert script_args.expected_windows == {
            "accident": 300,
            "atomic": 100,
            "compositional": 363,
            "event_type": 100,
        }
        assert sum(script_args.expected_windows.values()) == 863
        assert model_args.model_name_or_path.startswith("outputs/")  # the SFT checkpoint


def test_expected_windows_mismatch_fails_before_the_model_loads(tmp_path):
    from trl import ModelConfig

    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig, StreamingGRPOScriptArguments
    from proactive_rl.grpo.streaming.main import build_trainer

    source = {"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 0, "knobs": {"duration": [10, 12]}}
    script = StreamingGRPOScriptArguments(dataset_mixture=[source], expected_windows={"accident": 300})
    args = StreamingGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", bf16=False)
    with pytest.raises(ValueError, match=r"expected_windows: the training data gives \{'accident': 2\}"):
        build_trainer(script, args, ModelConfig(model_name_or_path="no-such-org/no-such-model"))  # a hub id
