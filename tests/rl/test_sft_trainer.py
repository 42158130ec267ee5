"""ProactiveSFTTrainer: accumulation invariance (acceptance 2), resume (acceptance 4), Trainer internals, options."""

import inspect

import pytest
import torch
from transformers import Trainer, TrainerCallback

from proactive_rl.data import EpisodeCollator, PreparedData, as_hf_dataset
from proactive_rl.errors import InputError
from proactive_rl.sft.config import ProactiveSFTConfig
from proactive_rl.sft.main import state_token_ids
from proactive_rl.sft.trainer import ProactiveSFTTrainer
from proactive_rl.training import freeze_vision_tower
from tests.support.sft_fixtures import tiny, toy_examples


class GradCatcher(TrainerCallback):
    def __init__(self, model):
        self.model, self.grads = model, []

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self.grads.append({n: p.grad.detach().clone() for n, p in self.model.named_parameters() if p.grad is not None})


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kw):
        if state.global_step >= self.step:
            control.should_training_stop = True


def make_trainer(tmp_path, examples, processor, model, **overrides):
    config = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=1,
        gradient_accumulation_steps=1,
        max_steps=1,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        bf16=False,
        use_cpu=True,
        activation_checkpointing=False,
        max_grad_norm=0.0,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    config.update(overrides)
    data = PreparedData(examples, [type("E", (), {"id": str(i)})() for i in range(len(examples))])
    return ProactiveSFTTrainer(
        model=model,
        args=ProactiveSFTConfig(**config),
        train_dataset=as_hf_dataset(data),
        data_collator=EpisodeCollator(examples, processor.tokenizer.pad_token_id),
        processing_class=processor,
        state_token_ids=state_token_ids(processor),
    )


def losses(trainer):
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


@pytest.fixture(scope="module")
def toy():
    _, processor = tiny()
    return processor, toy_examples(processor, 8, seed=1)


def test_accumulation_invariance(tmp_path, toy):
    """bs 1 × accumulation 4 == bs 4 × accumulation 1: loss and gradients within 1e-5 (fp32, CPU)."""
    processor, examples = toy
    runs = {}
    for bs, acc in [(1, 4), (4, 1)]:
        model, _ = tiny()
        catcher = GradCatcher(model)
        trainer = make_trainer(
            tmp_path / f"{bs}x{acc}",
            examples,
            processor,
            model,
            per_device_train_batch_size=bs,
            gradient_accumulation_steps=acc,
        )
        trainer.add_callback(catcher)
        trainer.train()
        runs[bs] = (losses(trainer)[0], catcher.grads[0], trainer.state.log_history[0])
    (l1, g1, log1), (l4, g4, _) = runs[1], runs[4]
    assert l1 == pytest.approx(l4, abs=1e-5)
    assert g1.keys() == g4.keys() and g1
    for name in g1:
        assert torch.allclose(g1[name], g4[name], atol=1e-5, rtol=0), name
    for key in ("silence_accuracy", "response_recall", "response_precision", "focal_weight", "token_accuracy"):
        assert key in log1


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_loss_is_the_spec_loss_of_the_global_batch(tmp_path, toy, power):
    """The logged step loss equals docs/spec.md §3 computed by hand on one forward pass over the step's 4 dialogues
    (P³I's balancing and the smoothed one, ``state_balance_power`` 0.5)."""
    from proactive_rl.sft.loss import focal_state_loss

    processor, examples = toy
    examples = examples[:4]  # one optimizer step (2 x accumulation 2) sees all of them, in whatever order
    model, _ = tiny()
    trainer = make_trainer(
        tmp_path,
        examples,
        processor,
        model,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        state_balance_power=power,
    )
    ref_model, _ = tiny()
    batch = EpisodeCollator(examples, processor.tokenizer.pad_token_id)([{"index": i} for i in range(4)])
    with torch.no_grad():
        logits = ref_model(**{k: v for k, v in batch.items() if k != "labels"}).logits[:, :-1]
    labels = batch["labels"][:, 1:]
    ref = focal_state_loss(logits, labels, state_token_ids(processor), gamma=2.0, balance_power=power).loss.item()
    trainer.train()
    assert losses(trainer)[0] == pytest.approx(ref, abs=1e-5)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("state_balance_power", 1.5, "state_balance_power: must be in"),
        ("content_weight", 0.0, "content_weight: must be"),
    ],
)
def test_loss_options_out_of_range_are_a_clear_error(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        ProactiveSFTConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], **{field: value})


def test_resume_equivalence(tmp_path, toy):
    """4 steps straight == 2 steps, save, resume, 2 steps: same losses (≤ 1e-6) and same final weights."""
    processor, examples = toy
    common = dict(max_steps=4, per_device_train_batch_size=2, save_strategy="steps", save_steps=2)
    model, _ = tiny()
    straight = make_trainer(tmp_path / "a", examples, processor, model, **common)
    straight.train()
    model_a = straight.model

    model, _ = tiny()
    first = make_trainer(tmp_path / "b", examples, processor, model, **common)
    first.add_callback(StopAt(2))  # an interrupted 4-step run (same schedule), not a 2-step one
    first.train()
    model, _ = tiny()
    resumed = make_trainer(tmp_path / "b", examples, processor, model, **common)
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "checkpoint-2"))

    got = losses(first) + losses(resumed)[-2:]
    assert len(losses(straight)) == 4 and len(got) == 4
    for a, b in zip(losses(straight), got):
        assert a == pytest.approx(b, abs=1e-6)
    for (name, pa), (_, pb) in zip(model_a.named_parameters(), resumed.model.named_parameters()):
        assert torch.allclose(pa, pb, atol=1e-6, rtol=0), name


class _Line(torch.nn.Module):
    """The smallest model a Trainer trains: ``loss = mean((w x - labels)^2)``."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(2, 1)

    def forward(self, x, labels):
        return {"loss": ((self.w(x).squeeze(-1) - labels) ** 2).mean()}


def _recording_trainer(tmp_path, scaled: bool, calls: list) -> Trainer:
    """A plain `Trainer` (2 accumulation steps, a save every step) that logs how its loop calls what
    ProactiveSFTTrainer overrides, and returns each micro-batch's loss as `training_step` reports it."""
    from transformers import TrainingArguments

    class Recording(Trainer):
        loss_is_scaled_for_ga = scaled

        def get_batch_samples(self, epoch_iterator, num_batches, device):
            batches, n_items = super().get_batch_samples(epoch_iterator, num_batches, device)
            calls.append(("get_batch_samples", num_batches, len(batches)))
            return batches, n_items

        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = super().training_step(model, inputs, num_items_in_batch)
            with torch.no_grad():
                calls.append(("training_step", loss.item(), model(**inputs)["loss"].item()))
            return loss

        def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
            calls.append(("load", resume_from_checkpoint))
            super()._load_from_checkpoint(resume_from_checkpoint, model)

    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=1, gradient_accumulation_steps=2, max_steps=2,
        learning_rate=0.0, save_strategy="steps", save_steps=1, report_to="none", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    data = [{"x": torch.tensor([1.0, float(i)]), "labels": torch.tensor(float(i))} for i in range(4)]
    return Recording(model=_Line(), args=args, train_dataset=data)


def test_trainer_loop_calls_what_the_sft_trainer_overrides(tmp_path):
    """Fails loudly when transformers changes what ProactiveSFTTrainer overrides (pinned: transformers 5.25.0): the
    loop asks `get_batch_samples` for one optimizer step's micro-batches, `loss_is_scaled_for_ga = True` stops
    `training_step` dividing the loss by the accumulation steps, and resuming goes through `_load_from_checkpoint`."""
    sig = inspect.signature(Trainer.get_batch_samples)
    assert list(sig.parameters) == ["self", "epoch_iterator", "num_batches", "device"], sig
    assert "num_items_in_batch" in inspect.signature(Trainer.compute_loss).parameters
    assert list(inspect.signature(Trainer._load_from_checkpoint).parameters) == [
        "self",
        "resume_from_checkpoint",
        "model",
    ]
    for scaled, divisor in ((True, 1), (False, 2)):
        calls = []
        _recording_trainer(tmp_path / str(scaled), scaled, calls).train()
        assert [c for c in calls if c[0] == "get_batch_samples"] == [("get_batch_samples", 2, 2)] * 2
        steps = [c for c in calls if c[0] == "training_step"]
        assert len(steps) == 4
        for _, reported, loss in steps:  # lr 0: the weights never move
            assert reported == pytest.approx(loss / divisor)
    calls = []
    checkpoint = str(tmp_path / "True" / "checkpoint-1")
    _recording_trainer(tmp_path / "True", True, calls).train(resume_from_checkpoint=checkpoint)
    assert ("load", checkpoint) in calls and len([c for c in calls if c[0] == "training_step"]) == 2


def test_freeze_vision_tower_keeps_merger_trainable():
    model, _ = tiny()
    assert freeze_vision_tower(model) > 0
    visual = dict(model.model.visual.named_parameters())
    assert all(p.requires_grad == ("merger" in n) for n, p in visual.items())
    assert all(p.requires_grad for p in model.model.language_model.parameters())


def test_flash_attention_missing_is_a_clear_error():
    from transformers.utils import is_flash_attn_2_available
    from trl import ModelConfig

    from proactive_rl.training import load_for_training

    if is_flash_attn_2_available():
        pytest.skip("flash-attn is installed here")
    with pytest.raises(InputError, match="flash-attn"):
        load_for_training(
            ModelConfig(model_name_or_path="tiny:qwen2_5_vl:xs", attn_implementation="flash_attention_2")
        )


def test_deepspeed_config_ref_still_there():
    """`build_unpartitioned` reads transformers' private ZeRO-3 config reference (pinned: transformers 5.25.0)."""
    from transformers.integrations import deepspeed as hf_ds

    assert hasattr(hf_ds, "_hf_deepspeed_config_weak_ref")
    assert callable(hf_ds.set_hf_deepspeed_config) and callable(hf_ds.unset_hf_deepspeed_config)
