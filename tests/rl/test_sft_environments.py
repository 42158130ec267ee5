"""Ask-for-help environments in the SFT mixture (`proactive_rl.sft.environments`): the examples' prompts are the
evaluator's, only the answer is supervised, the states kept, the recipe checks, and an SFT run that trains them."""

import pytest
import torch
from PIL import Image

from proactive_rl.data.mcqa import parse_environments, training_rows
from proactive_rl.models import build_tiny
from proactive_rl.sft.environments import mcqa_examples

KNOBS = {
    "negatives": "easy",
    "colours": ["red", "green", "blue", "yellow"],
    "layout": "fixed",
    "corruptions": ["merge"],
}


@pytest.fixture(scope="module")
def processor():
    return build_tiny("qwen2_5_vl", "xs")[1]


def specs(n=2, seed=2):
    return parse_environments([{"kind": "corruption", "num_envs": n, "seed": seed, **KNOBS}], "environments")


def test_prompt_is_the_evaluators_and_only_the_letter_and_end_of_turn_are_supervised(processor):
    examples, ids = mcqa_examples(specs(), processor, "all")
    rows = training_rows(specs())
    assert ids == [f"{r['env_id']}@{r['step']}" for r in rows] and len(ids) == 8  # merge: 4 states each
    tok = processor.tokenizer
    for example, row in zip(examples, rows):
        # what `proactive_rl.evaluation.policy.image_answer_fn` feeds the model before it decodes the answer
        text = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": row["prompt"][0]["content"]}]}],
            add_generation_prompt=True,
            tokenize=False,
        )
        prompt = processor(text=[text], images=[Image.fromarray(row["image"])], return_tensors="pt")
        n = prompt["input_ids"].shape[1]
        assert torch.equal(example["input_ids"][:n], prompt["input_ids"][0])
        assert torch.equal(example["pixel_values"], prompt["pixel_values"])
        letter = "ABCDEFGHI"[row["options"].index(row["answer"])]
        assert [tok.decode([i]) for i in example["labels"][n:]] == [letter, "<|im_end|>"]
        assert (example["labels"][:n] == -100).all()
        assert int(example["mm_token_type_ids"].sum()) == int((example["input_ids"] == processor.image_token_id).sum())


def test_reference_keeps_each_environments_informative_image(processor):
    examples, ids = mcqa_examples(specs(3), processor, "reference")
    assert ids == [f"corruption_s2_0000{i}@3" for i in range(3)]  # the clean image is the 4th state
    assert len(examples) == 3
    with pytest.raises(ValueError, match="environment_states: expected one of reference, all, got 'clean'"):
        mcqa_examples(specs(), processor, "clean")


def test_recipe_checks_name_the_field():
    from proactive_rl.sft.config import SFTScriptArguments

    mixture = [{"source": "synthetic", "task": "atomic", "num_episodes": 1}]
    env = [{"kind": "corruption", "num_envs": 1, **KNOBS}]
    with pytest.raises(ValueError, match="environments: the MCQA examples are encoded in memory; set data_pipeline"):
        SFTScriptArguments(dataset_mixture=mixture, environments=env)
    with pytest.raises(ValueError, match=r"environments\[0\].kind: expected one of"):
        SFTScriptArguments(
            dataset_mixture=mixture, environments=[{"kind": "blur", "num_envs": 1}], data_pipeline="eager"
        )
    with pytest.raises(ValueError, match="environment_states: expected one of reference, all"):
        SFTScriptArguments(dataset_mixture=mixture, environments=env, data_pipeline="eager", environment_states="x")
    args = SFTScriptArguments(dataset_mixture=mixture, environments=env, data_pipeline="eager")
    assert args.environments[0].num_envs == 1


def test_sft_trains_the_mcqa_examples_with_the_dialogues(tmp_path):
    """The real entry point on a recipe with environments: the examples are in the training set, and the answer
    letter's loss falls as the dialogues train beside it."""
    from proactive_rl.sft.main import build_trainer, make_parser

    recipe = tmp_path / "sft.yaml"
    recipe.write_text(
        "model_name_or_path: tiny:qwen2_5_vl:xs\n"
        "dataset_mixture: [{source: synthetic, task: atomic, num_episodes: 2, seed: 0, knobs: {duration: [10, 12]}}]\n"
        f"environments: [{{kind: corruption, num_envs: 4, seed: 2, negatives: easy, layout: fixed, "
        "colours: [red, green, blue, yellow], corruptions: [merge]}]\n"
        "environment_states: reference\n"
        "data_pipeline: eager\nfreeze_vision_tower: false\n"
        f"output_dir: {tmp_path / 'out'}\nmax_steps: 40\nper_device_train_batch_size: 3\nlearning_rate: 3.0e-3\n"
        "save_strategy: 'no'\nreport_to: none\nuse_cpu: true\nlogging_steps: 1\nseed: 0\nmax_length: 1024\n"
    )
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(recipe)]))
    ids = trainer.train_dataset["episode_id"]
    assert ids[-4:] == [f"corruption_s2_0000{i}@3" for i in range(4)] and len(ids) == 6
    collate = trainer.data_collator
    batch = collate([{"index": i} for i in range(len(ids) - 4, len(ids))])  # the four MCQA examples

    def letter_loss():  # at the answer letter alone (the dialogues never write a letter)
        with torch.no_grad():
            logits = trainer.model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        first = (batch["labels"] != -100).long().argmax(-1)  # each row's letter position
        rows = torch.arange(len(first))
        return torch.nn.functional.cross_entropy(logits[rows, first - 1], batch["labels"][rows, first])

    before = letter_loss()
    trainer.train()
    assert letter_loss() < 0.5 * before
