"""Exact resume of the two GRPO trainers (`proactive_rl.grpo.resume_state`): a run stopped after ``checkpoint-2``
and resumed from it ends with the weights (max |Δw| ≤ 1e-6, fp32 CPU), the logged metrics and the evaluation
results of the uninterrupted run.

The reference is the uninterrupted run itself, trained with the same code and seed. In one process the interrupted
run is stopped by a callback at step 2 and a *fresh* trainer (new model, new data objects) resumes; in two processes
under ZeRO-3 one rank is killed with SIGKILL at the start of step 3 and the launch is run again with
``resume_from_checkpoint`` (`tests/rl/test_grpo_resume_distributed.py`). Every test also checks that it could fail:
the weights moved after the checkpoint, and the rewards varied (non-zero loss) after it.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from transformers import Trainer, TrainerCallback

from proactive_rl.grpo import resume_state

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-6
TIMING = ("time", "runtime", "per_second")


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kw):
        if state.global_step >= self.step:
            control.should_training_stop = True


def logged(trainer, steps) -> list[dict]:
    """The per-step log lines of `steps`, timing keys dropped."""
    rows = [h for h in trainer.state.log_history if "loss" in h and h["step"] in steps]
    return [{k: v for k, v in sorted(h.items()) if not any(t in k for t in TIMING)} for h in rows]


def same_logs(got: list[dict], want: list[dict]) -> None:
    assert [sorted(g) for g in got] == [sorted(w) for w in want]
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=TOL), (g, w)


def max_dw(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def checkpoint_weights(trainer, folder) -> dict[str, torch.Tensor]:
    model = type(trainer.model).from_pretrained(folder, dtype=torch.float32)
    return weights(model)


def guard_counts(trainer) -> list[tuple[int, int]]:
    return [(g.seen, g.errors) for g in trainer.reward_funcs if hasattr(g, "seen")]


def check_resume(straight, resumed, checkpoint: Path, steps=(3, 4)) -> float:
    """The assertions every resume test makes; returns max |Δw| (printed for the record)."""
    dw = max_dw(weights(straight.model), weights(resumed.model))
    print(f"max |dw| resumed vs uninterrupted: {dw:.3g}")
    assert dw <= TOL
    after = logged(straight, set(steps))
    assert len(after) == len(steps)
    same_logs(logged(resumed, set(steps)), after)
    assert guard_counts(resumed) == guard_counts(straight)
    # it could fail: the weights moved after the checkpoint, and some group's rewards differed (non-zero advantages)
    assert max_dw(checkpoint_weights(resumed, checkpoint), weights(resumed.model)) > 1e-5
    assert any(h.get("frac_reward_zero_std", 1) < 1 for h in after), after  # logged on rollout steps
    return dw


# --------------------------------------------------------------------------- streaming GRPO


@pytest.fixture(scope="module")
def windows():
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.synthetic import generate_episodes

    eps = generate_episodes("accident", 3, seed=3, duration=(10, 12)) + generate_episodes(
        "atomic", 3, seed=3, duration=(10, 12)
    )
    return build_windows(eps, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)


def streaming_trainer(out: Path, windows, **overrides):
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
    from proactive_rl.models import build_tiny
    from tests.support.stand_in import proactive_stand_in

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    model = proactive_stand_in(model, processor, respond=0.3)  # responds now and then: rewards vary in a group
    kwargs = dict(
        output_dir=str(out),
        per_device_train_batch_size=8,
        num_generations=4,
        max_steps=4,
        max_turn_tokens=3,
        learning_rate=1e-3,
        temperature=1.5,
        report_to="none",
        use_cpu=True,
        save_strategy="steps",
        save_steps=2,
        logging_steps=1,
        seed=0,
        bf16=False,
        disable_tqdm=True,
    )
    kwargs.update(overrides)
    return StreamingGRPOTrainer(
        model=model, args=StreamingGRPOConfig(**kwargs), windows=windows, processing_class=processor
    )


def prs_results(trainer, tmp_path: Path) -> dict:
    from proactive_rl.evaluation import EvaluatorConfig, build_evaluators, evaluate_model

    source = {
        "source": "synthetic",
        "task": "accident",
        "num_episodes": 2,
        "seed": 99,
        "knobs": {"duration": [10, 10]},
    }
    evaluators = build_evaluators(
        [EvaluatorConfig.from_dict({"type": "prs", "episodes": [source], "max_new_tokens": 3}, "prs")]
    )
    return evaluate_model(trainer.model, trainer.processing_class, evaluators, out_dir=tmp_path, plots=False)[
        "metrics"
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "cycle",
    [
        pytest.param({}, id="checkpoint-between-rollouts"),
        # 6 windows, 2 per step: checkpoint-3 ends the first epoch, the resumed run starts the second one
        pytest.param({"save_steps": 3}, id="checkpoint-at-an-epoch-end"),
        # 2 steps per rollout batch, a save after step 1: the resumed run must train step 2 on the buffered rollouts
        pytest.param({"steps_per_generation": 2, "save_steps": 1}, id="checkpoint-inside-a-rollout-cycle"),
    ],
)
def test_streaming_grpo_resumes_exactly(cycle, windows, tmp_path):
    stop = cycle.get("save_steps", 2)
    straight = streaming_trainer(tmp_path / "a", windows, **cycle)
    straight.train()
    first = streaming_trainer(tmp_path / "b", windows, **cycle)
    first.add_callback(StopAt(stop))
    first.train()
    checkpoint = tmp_path / "b" / f"checkpoint-{stop}"
    assert (checkpoint / resume_state.STATE_FILE.format(rank=0)).is_file()
    resumed = streaming_trainer(tmp_path / "b", windows, **cycle)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    check_resume(straight, resumed, checkpoint, steps=range(stop + 1, 5))
    assert prs_results(resumed, tmp_path / "eval_b") == prs_results(straight, tmp_path / "eval_a")


# --------------------------------------------------------------------------- suggestion GRPO


def suggestion_trainer(tmp_path: Path, out: Path, **overrides):
    from test_grpo_eval_callback import suggestion_recipe

    from proactive_rl.grpo.suggestion.main import build_trainer, make_parser

    replay = [
        {"source": "synthetic", "task": "accident", "num_episodes": 3, "seed": 5, "knobs": {"duration": [10, 10]}}
    ]
    # G = 4 at temperature 1.5: the untrained model's answer letters differ within some group (non-zero advantages)
    fields = dict(
        max_steps=4,
        save_steps=2,
        output_dir=str(out),
        replay_mixture=replay,
        temperature=1.5,
        num_generations=4,
        per_device_train_batch_size=4,
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    recipe = suggestion_recipe(tmp_path, None, **{**fields, **overrides})
    return build_trainer(*make_parser().parse_args_and_config(["--config", str(recipe)]))


def mcqa_results(trainer, tmp_path: Path) -> dict:
    from proactive_rl.evaluation import EvaluatorConfig, build_evaluators, evaluate_model

    block = {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 3, "seed": 0}], "max_new_tokens": 1}
    evaluators = build_evaluators([EvaluatorConfig.from_dict(block, "mcqa")])
    return evaluate_model(trainer.model, trainer.processing_class, evaluators, out_dir=tmp_path, plots=False)[
        "metrics"
    ]


@pytest.mark.slow
def test_suggestion_grpo_with_replay_resumes_exactly(tmp_path):
    straight = suggestion_trainer(tmp_path / "ra", tmp_path / "a")
    straight.train()
    first = suggestion_trainer(tmp_path / "rb", tmp_path / "b")
    first.add_callback(StopAt(2))
    first.train()
    checkpoint = tmp_path / "b" / "checkpoint-2"
    resumed = suggestion_trainer(tmp_path / "rc", tmp_path / "b")
    assert resumed.replay.rng.getstate() != first.replay.rng.getstate()  # before the restore
    resumed.train(resume_from_checkpoint=str(checkpoint))
    check_resume(straight, resumed, checkpoint)
    assert resumed.replay.rng.getstate() == straight.replay.rng.getstate()
    assert mcqa_results(resumed, tmp_path / "eval_b") == mcqa_results(straight, tmp_path / "eval_a")


# --------------------------------------------------------------------------- the state file and the private touches


def test_resume_state_restores_guard_counters_and_refuses_another_recipe(tmp_path):
    from types import SimpleNamespace

    from proactive_rl.grpo.reward_guard import GuardedReward

    def reward(completions, **kw):
        return [0.0] * len(completions)

    def trainer(n_guards):
        return SimpleNamespace(
            reward_funcs=[GuardedReward(reward) for _ in range(n_guards)],
            accelerator=SimpleNamespace(process_index=0, device="cpu"),
            state=SimpleNamespace(global_step=2),
            args=SimpleNamespace(steps_per_generation=1, output_dir=str(tmp_path)),
            num_iterations=1,
            _step=2,
            _buffered_inputs=[{"x": torch.ones(1)}],
        )

    saved = trainer(1)
    saved.reward_funcs[0].seen, saved.reward_funcs[0].errors = 12, 3
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    resume_state.ResumeStateCallback(saved).on_save(saved.args, saved.state, None)
    back = trainer(1)
    back._step, back._buffered_inputs = 0, None
    resume_state.restore_resume_state(back, str(folder))
    assert (back.reward_funcs[0].seen, back.reward_funcs[0].errors, back._step) == (12, 3, 2)
    assert back._buffered_inputs is None  # at a rollout boundary the buffer is not needed (nor saved)
    with pytest.raises(ValueError, match="1 guarded reward"):
        resume_state.restore_resume_state(trainer(2), str(folder))


def test_private_touches_still_exist_in_the_installed_libraries():
    """Fails loudly when transformers or TRL change what `resume_state` relies on (pinned: trl 1.16.0,
    transformers 5.25.0)."""
    from trl import GRPOTrainer
    from trl.trainer.utils import RepeatSampler

    params = list(inspect.signature(Trainer._load_from_checkpoint).parameters)
    assert params == ["self", "resume_from_checkpoint", "model"], params
    # that the loop calls it on resume: tests/rl/test_sft_trainer.py::test_trainer_loop_calls_what_the_sft_trainer_overrides
    source = inspect.getsource(GRPOTrainer)
    for name in ("_step", "_buffered_inputs"):
        assert f"self.{name} = " in source, name
    assert "self._buffered_inputs[self._step % self.args.steps_per_generation]" in source
    assert list(inspect.signature(GRPOTrainer._get_train_sampler).parameters) == ["self", "dataset"]
    assert "return RepeatSampler(" in inspect.getsource(GRPOTrainer._get_train_sampler)
    sampler = RepeatSampler(list(range(4)), mini_repeat_count=2, seed=0)  # one generator draws every epoch's order
    first, second = list(sampler), list(sampler)
    assert first != second and isinstance(sampler.generator, torch.Generator)
