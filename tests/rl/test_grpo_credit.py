"""Per-decision credit and dynamic sampling in streaming GRPO (docs/spec.md §8): the experimental trainer
(`proactive_rl.experimental`, ``trainer: grpo_streaming_experimental``).

References: the worked example of docs/spec.md §8 computed by hand (G = 4, three window steps), TRL's own loss with
its ``(B,)`` advantages for the ``trajectory`` path of the stable trainer, and the estimator's definition re-applied to
the trainer's real rollouts. Dynamic sampling is checked with a reward that gives one task's groups no spread. A
recipe of the stable trainer that sets one of these knobs is refused, naming the experimental trainer.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from proactive_rl.errors import InputError
from proactive_rl.experimental.credit import (
    decision_advantages,
    split_fraction,
    step_advantages,
    token_values,
    turn_steps,
)
from proactive_rl.experimental.trainer import ExperimentalStreamingGRPOTrainer
from proactive_rl.grpo.streaming.windows import build_windows

# docs/spec.md §8, worked example: rewards (1, 0, 0, 0.6), scale_rewards "none" -> A = R - mean = (.6, -.4, -.4, .2)
TURNS = [["S", "W", "S"], ["S", "S", "W"], ["W", "S", "S"], ["S", "W", "W"]]
A = [0.6, -0.4, -0.4, 0.2]
# by hand: step 0, all four share the (empty) history, mean A 0: S rows (.6 - .4 + .2) / 3 = .1333, W row -.4;
# step 1, rows 0, 1, 3 share "S" (mean .1333): W rows 0, 3 -> .4 - .1333, S row 1 -> -.4 - .1333; row 2 alone: 0;
# step 2, rows 0, 3 share "S W" (mean .4): row 0 S -> .2, row 3 W -> -.2; rows 1, 2 alone: 0.
D = [[2 / 15, 4 / 15, 0.2], [2 / 15, -8 / 15, 0.0], [-0.4, 0.0, 0.0], [2 / 15, 4 / 15, -0.2]]
# anchor "step" (the whole group shares each step's state), by hand: step 0 as above; step 1, W rows 0, 3 -> (.6 + .2)
# / 2 - 0 = .4, S rows 1, 2 -> -.4; step 2, S rows 0, 2 -> (.6 - .4) / 2 = .1, W rows 1, 3 -> -.1.
D_STEP = [[2 / 15, 0.4, 0.1], [2 / 15, -0.4, -0.1], [-0.4, -0.4, 0.1], [2 / 15, 0.4, -0.1]]


def close(got, expected, tol=1e-12) -> bool:
    """Nested lists equal to `tol` (pytest.approx takes flat ones)."""
    return len(got) == len(expected) and all(
        len(g) == len(e) and all(abs(x - y) <= tol for x, y in zip(g, e)) for g, e in zip(got, expected)
    )


def test_decision_advantages_are_the_hand_computed_ones():
    assert close(decision_advantages(TURNS, A), D)
    # where the anchor group agreed there is nothing to credit; a row alone in its state gets 0
    assert decision_advantages([["S", "S"], ["S", "S"]], [1.0, -1.0]) == [[0.0, 0.0], [0.0, 0.0]]


def test_the_step_anchor_compares_every_row_at_a_step():
    assert close(decision_advantages(TURNS, A, anchor="step"), D_STEP)
    assert close(
        step_advantages(TURNS, A, 4, "mixed", 0.5, "step"), [[a + 0.5 * d for d in row] for a, row in zip(A, D_STEP)]
    )
    # every decision of the example has a group that split at its step
    assert split_fraction(TURNS, 4, "step") == 1.0
    assert split_fraction([["S", "S"], ["S", "W"]], 2, "step") == 0.5
    with pytest.raises(ValueError, match="decision_anchor"):
        decision_advantages(TURNS, A, anchor="frame")


def test_step_advantages_modes_and_groups():
    two_groups = TURNS + [["S"] * 3] * 4
    adv = A + [0.5, -0.5, 0.25, -0.25]
    assert step_advantages(two_groups, adv, 4, "trajectory") == [[a] * 3 for a in adv]
    decision = step_advantages(two_groups, adv, 4, "decision")
    assert close(decision[:4], D) and decision[4:] == [[0.0] * 3] * 4
    mixed = step_advantages(two_groups, adv, 4, "mixed", 0.5)
    assert close(mixed[:4], [[a + 0.5 * d for d in row] for a, row in zip(A, D)])
    assert close(mixed[4:], [[a] * 3 for a in adv[4:]])  # nothing split in the second group: A alone
    with pytest.raises(ValueError, match="advantage"):
        step_advantages(TURNS, A, 4, "per_token")
    with pytest.raises(ValueError, match="groups of 3"):
        step_advantages(TURNS, A, 3, "decision")
    # 4 + 3 + 2 split decisions of the example (step 0 all four, step 1 rows 0, 1, 3, step 2 rows 0, 3) of 12
    assert split_fraction(TURNS, 4) == pytest.approx(9 / 12)


def test_the_override_lays_each_turns_advantage_on_its_tokens():
    """`_token_advantages` (the override TRL's loss reads) on the hand-built group: turn k's tokens carry D[i][k],
    frame and template tokens (env mask 0) and padding carry 0."""
    masks = [[1, 1, 0, 0, 1, 0, 1], [1, 0, 0, 1, 1, 0, 1], [1, 0, 1, 0, 1, 1], [1, 0, 1, 0, 1]]
    stub = SimpleNamespace(
        num_generations=4,
        model=SimpleNamespace(training=True),
        args=SimpleNamespace(advantage="decision", decision_weight=1.0, decision_anchor="history"),
        accelerator=SimpleNamespace(process_index=0, gather=lambda t: t),
        _credit_turns=TURNS,
        _credit_token_steps=[turn_steps(m) for m in masks],
        _metrics={"train": {"credit/split_decisions": []}},
    )
    got = ExperimentalStreamingGRPOTrainer._token_advantages(stub, torch.tensor(A), 8)
    d = D
    expected = torch.tensor(
        [
            [d[0][0], d[0][0], 0, 0, d[0][1], 0, d[0][2], 0],
            [d[1][0], 0, 0, d[1][1], d[1][1], 0, d[1][2], 0],
            [d[2][0], 0, d[2][1], 0, d[2][2], d[2][2], 0, 0],
            [d[3][0], 0, d[3][1], 0, d[3][2], 0, 0, 0],
        ]
    )
    assert got.shape == (4, 8)
    assert torch.allclose(got, expected, atol=1e-7)
    assert stub._metrics["train"]["credit/split_decisions"] == [pytest.approx(0.75)]
    assert token_values([1.0, 2.0], [0, -1, 1], 2) == [1.0, 0.0]  # cut to the padded width


# --------------------------------------------------------------------------- the trainer on real rollouts


@pytest.fixture(scope="module")
def windows():
    from proactive_rl.synthetic import generate_episodes

    eps = generate_episodes("accident", 1, seed=3, duration=(10, 12))
    eps += generate_episodes("atomic", 2, seed=3, duration=(10, 12))
    return build_windows(eps, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)


def make_trainer(model, processor, windows, tmp_path, experimental=None, **overrides):
    """The stable trainer, or the experimental one when `experimental` is set (by default: when a knob of it is)."""
    from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer

    if experimental is None:
        experimental = bool(set(overrides) & set(StreamingGRPOConfig.MOVED_FIELDS))
    config = ExperimentalStreamingGRPOConfig if experimental else StreamingGRPOConfig
    trainer = ExperimentalStreamingGRPOTrainer if experimental else StreamingGRPOTrainer
    kwargs = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        max_turn_tokens=3,
        temperature=1.5,
        loss_type="dapo",
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
        bf16=False,
    )
    reward_funcs = overrides.pop("reward_funcs", None)
    return trainer(
        model=model,
        args=config(**{**kwargs, **overrides}),
        windows=windows,
        processing_class=processor,
        reward_funcs=reward_funcs,
    )


def scored_batch(trainer, rows, seed=0):
    """One generation batch scored by TRL, with the rollout's turns captured (the override clears them)."""
    captured = {}
    roll = trainer.streaming_rollout

    def recording(prompts):
        out = roll(prompts)
        captured["turns"] = [list(t) for t in trainer._rollout_turns]
        return out

    trainer.streaming_rollout = recording
    trainer.model.train()
    torch.manual_seed(seed)
    try:
        batch = trainer._generate_and_score_completions(rows)
    finally:
        del trainer.streaming_rollout
    trainer.current_gradient_accumulation_steps = 1
    return batch, captured["turns"]


def test_decision_mode_applies_the_estimator_to_the_trainers_own_rollouts(proactive, windows, tmp_path):
    """Same seed, same rollouts: the ``decision`` trainer's per-token advantages are the estimator applied to the
    turns and TRL's trajectory advantages of the ``trajectory`` trainer, on exactly the policy tokens."""
    model, processor = proactive
    rows = [windows[1].row()] * 4
    plain, turns = scored_batch(make_trainer(model, processor, windows, tmp_path), rows)
    credit, turns_again = scored_batch(make_trainer(model, processor, windows, tmp_path, advantage="decision"), rows)
    assert turns == turns_again and len({tuple(t) for t in turns}) > 1  # same rollouts, and they diverge
    assert plain["advantages"].shape == (4,)
    assert credit["advantages"].shape == credit["completion_ids"].shape
    policy = (credit["completion_mask"] * credit["tool_mask"]).bool()
    per_step = step_advantages(turns, plain["advantages"].tolist(), 4, "decision")
    for b in range(4):
        steps = turn_steps(policy[b].int().tolist())
        expected = torch.tensor([per_step[b][s] if s >= 0 else 0.0 for s in steps])
        assert torch.allclose(credit["advantages"][b], expected, atol=1e-6)
    assert credit["advantages"][~policy].abs().max() == 0


def test_trajectory_advantages_per_token_give_todays_loss(proactive, windows, tmp_path):
    """TRL's loss with the ``(B,)`` trajectory advantages equals the loss with ``mixed`` at weight 0 (per token,
    ``(B, T)``) on the same batch, to 1e-6: the per-token path changes nothing but the values it is given."""
    model, processor = proactive
    rows = [windows[1].row()] * 4
    trainer = make_trainer(model, processor, windows, tmp_path)
    batch, _ = scored_batch(trainer, rows)
    mixed, _ = scored_batch(
        make_trainer(model, processor, windows, tmp_path, advantage="mixed", decision_weight=0.0), rows
    )
    policy = (mixed["completion_mask"] * mixed["tool_mask"]).bool()
    assert torch.allclose(mixed["advantages"][policy], batch["advantages"][:, None].expand_as(policy)[policy])
    with torch.no_grad():
        today = trainer._compute_loss(trainer.model, batch)
        per_token = trainer._compute_loss(trainer.model, {**batch, "advantages": mixed["advantages"]})
    assert abs(today.item() - per_token.item()) <= 1e-6


def test_the_experimental_trainer_at_its_defaults_is_the_stable_one(proactive, windows, tmp_path):
    """Same seed, same batch: the experimental trainer with every knob at its default gives the stable trainer's
    rollouts and TRL's ``(B,)`` advantages, bit for bit."""
    model, processor = proactive
    rows = [windows[1].row()] * 4
    stable, turns = scored_batch(make_trainer(model, processor, windows, tmp_path), rows)
    default, turns_again = scored_batch(make_trainer(model, processor, windows, tmp_path, experimental=True), rows)
    assert turns == turns_again and torch.equal(stable["completion_ids"], default["completion_ids"])
    assert default["advantages"].shape == (4,) and torch.equal(stable["advantages"], default["advantages"])


def test_config_checks_advantage_and_dynamic_sampling(tmp_path, monkeypatch):
    from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig as StreamingGRPOConfig

    base = dict(output_dir=str(tmp_path), report_to="none", use_cpu=True, bf16=False, num_generations=2)
    with pytest.raises(ValueError, match="advantage: expected one of"):
        StreamingGRPOConfig(**base, per_device_train_batch_size=2, advantage="per_token")
    with pytest.raises(ValueError, match="decision_anchor: expected one of"):
        StreamingGRPOConfig(**base, per_device_train_batch_size=2, advantage="decision", decision_anchor="frame")
    # two ranks of 3 rows: TRL accepts the 6-row generation batch, but a group of 2 would span the ranks
    monkeypatch.setattr(StreamingGRPOConfig, "world_size", property(lambda self: 2))
    StreamingGRPOConfig(**base, per_device_train_batch_size=3, steps_per_generation=1)
    with pytest.raises(ValueError, match="whole groups of num_generations=2"):
        StreamingGRPOConfig(**base, per_device_train_batch_size=3, steps_per_generation=1, dynamic_sampling=True)


def test_dynamic_sampling_refills_the_groups_without_spread(proactive, windows, tmp_path):
    """A reward that scores every accident rollout 0 and the count rollouts by their turns: the accident group has
    no spread and is replaced by a count window's group (the rewards then read the new window's columns); the batch
    keeps its size, and the fraction found and the refills are logged."""
    seen = []

    def reward(completions, task, **kw):
        seen.append(list(task))
        return [0.0 if t == "accident" else float(i) for i, t in enumerate(task)]

    model, processor = proactive
    trainer = make_trainer(
        model, processor, windows, tmp_path, reward_funcs=[reward], dynamic_sampling=True, max_refills=4
    )
    batch, turns = scored_batch(trainer, [windows[0].row()] * 4, seed=1)
    assert windows[0].task == "accident" and len(turns) == 4 == batch["completion_ids"].size(0)
    assert seen[-1] == ["atomic"] * 4  # TRL's own reward call: the refilled window's task
    metrics = trainer._metrics["train"]
    assert metrics["rollout/zero_spread_groups"] == [1.0] and metrics["rollout/refilled_groups"][0] >= 1
    assert metrics["frac_reward_zero_std"][-1] == 0.0


# --------------------------------------------------------------------------- which trainer has the knobs


def test_the_stable_config_names_the_trainer_that_has_its_moved_knobs():
    """`StreamingGRPOConfig.MOVED_FIELDS` lists exactly the fields the experimental config adds, and names a trainer
    of the table whose parser has them."""
    import dataclasses

    from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.recipe_args import field_names
    from proactive_rl.trainers import trainer_module

    stable = {f.name for f in dataclasses.fields(StreamingGRPOConfig)}
    added = {f.name for f in dataclasses.fields(ExperimentalStreamingGRPOConfig)} - stable
    assert set(StreamingGRPOConfig.MOVED_FIELDS) == added
    assert added == {"advantage", "decision_weight", "decision_anchor", "dynamic_sampling", "max_refills"}
    for trainer in set(StreamingGRPOConfig.MOVED_FIELDS.values()):
        assert added <= field_names(trainer_module(trainer).make_parser())


def _tiny_recipe(tmp_path, **fields):
    import yaml

    from proactive_rl.shipped import shipped_path

    recipe = yaml.safe_load(shipped_path("tiny/grpo_streaming.yaml").read_text())
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({**recipe, "output_dir": str(tmp_path / "out"), **fields}))
    return str(path)


@pytest.mark.parametrize("knob", ["advantage: decision", "decision_anchor: step", "dynamic_sampling: true"])
def test_a_stable_recipe_with_a_study_knob_is_told_the_trainer_that_has_it(knob, tmp_path):
    import yaml

    from proactive_rl.grpo.streaming.main import make_parser
    from proactive_rl.recipe_args import parse_recipe

    key, value = knob.split(": ")
    path = _tiny_recipe(tmp_path, **{key: yaml.safe_load(value)})
    with pytest.raises(InputError) as err:
        parse_recipe(make_parser(), ["--config", path])
    assert str(err.value) == (
        f"{path}: `{key}` is a field of trainer `grpo_streaming_experimental`, not of this one: "
        "set `trainer: grpo_streaming_experimental` in the recipe"
    )
    with pytest.raises(InputError, match=r"command line: `--max_refills` is a field of trainer "):
        parse_recipe(make_parser(), ["--config", _tiny_recipe(tmp_path), "--max_refills", "1"])


def test_the_study_variants_parse_with_the_experimental_trainer(tmp_path):
    """`proactive-rl train` dispatches ``trainer: grpo_streaming_experimental`` to `proactive_rl.experimental`, whose
    parser takes every variant of the credit study (benchmarks/grpo_credit.py) over the tiny recipe."""
    from benchmarks.grpo_credit import TRAINER, VARIANTS
    from proactive_rl.recipe_args import parse_recipe
    from proactive_rl.trainers import recipe_trainer, trainer_module

    for name, fields in VARIANTS.items():
        path = _tiny_recipe(tmp_path, trainer=TRAINER, **fields)
        assert recipe_trainer(["--config", path]) == TRAINER
        script, training, _ = parse_recipe(trainer_module(TRAINER).make_parser(), ["--config", path])
        assert script.trainer == TRAINER, name
        assert {key: getattr(script, key, getattr(training, key, None)) for key in fields} == fields, name
