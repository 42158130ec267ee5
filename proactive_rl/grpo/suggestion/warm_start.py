"""Supervised warm start for the tiny proactive-suggestion GRPO (ProactiveBench §5; docs/spec.md §6, §7).

The paper post-trains instruction-tuned VLMs that already recognise objects and answer multiple-choice questions
("reference setting": 79.8 % acc on the informative frames, §4.2) but are not proactive (ps ≈ 0.3). A tiny model
built from random weights can do neither, so GRPO alone has nothing to trade off (every category guess is worth
~0.25 and "always suggest" wins for any ``r_p >= 0.5``). This stage makes the tiny model such a base model:

- by default it trains only on each environment's *reference* image (the informative one, ``reference_image``),
  so it learns what the categories look like but nothing about when to ask; with ``states="all"`` every state on
  the way there is a row whose target is still the correct category, so the model learns each state's best guess
  (a base model's posterior) — and again nothing about when to ask;
- the target is the correct category's option letter, except for a `suggest_rate` fraction of rows drawn at
  random whose target is the environment's suggestion option: the model learns which option is the suggestion
  (GRPO then samples it often enough to be rewarded), independently of the image (on the reference image that
  suggestion would not even be valid, so it cannot teach when to ask).

The loss is cross-entropy over the option letters at the first answer position, the same restricted vocabulary
``answer_letters_only`` samples from. Run alone (the model and processor are saved for
``model_name_or_path``)::

    python -m proactive_rl.grpo.suggestion.warm_start --config recipes/tiny/grpo_suggestion.yaml \\
        --output_dir outputs/tiny-suggestion-warmup

or let `proactive_rl.grpo.suggestion` run it first (``warm_start_steps`` in the recipe).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from PIL import Image

from proactive_eval.benchmarks.proactivebench.environments import MCQAObservation
from proactive_rl.data.mcqa import environment_rows, letter_token_ids, mcqa_messages

logger = logging.getLogger(__name__)


STATES = ("reference", "all")


def warm_start_rows(
    environments: list, processor, suggest_rate: float, seed: int = 0, states: str = "reference"
) -> list[dict[str, Any]]:
    """Tokenised warm-start rows: prompt and image tensors, target option index.

    Args:
        environments (`list`): synthetic `SequenceEnvironment`s (they need ``reference_image``, ``images``,
            ``moves`` and ``answer``).
        processor: the model's processor (chat template and image processor).
        suggest_rate (`float`): fraction of rows (drawn with `seed`) whose target is the suggestion option.
        seed (`int`, *optional*, defaults to `0`): which rows get the suggestion target.
        states (`str`, *optional*, defaults to `"reference"`): ``"reference"``: one row per environment at its
            informative image; ``"all"``: one row per state on the way there (`mcqa_data.environment_rows`), the
            target being the correct category even where the image is ambiguous, so the model learns the best
            guess of each state (its posterior) and still nothing about when to ask.
    """
    if not 0.0 <= suggest_rate < 1.0:
        raise ValueError(f"suggest_rate: expected a fraction in [0, 1), got {suggest_rate!r}")
    if states not in STATES:
        raise ValueError(f"states: expected one of {', '.join(STATES)}, got {states!r}")
    rng = random.Random(seed)
    rows = []
    for env in environments:
        for attr in ("reference_image", "images", "moves", "answer"):
            if not hasattr(env, attr):
                raise ValueError(f"environment {getattr(env, 'id', '?')!r}: the warm start needs `{attr}`")
        env.reset()
        options = list(env.choices)
        images = [env.images[env.reference_image]]
        if states == "all":
            images = [row["image"] for row in environment_rows(env) if row["answer"]]
        suggestion = next(iter(env.moves))  # the suggestion option (the first valid move)
        for image in images:
            observation = MCQAObservation(image, env.prompt, options, [], 0)
            target = suggestion if rng.random() < suggest_rate else env.answer
            text = processor.apply_chat_template(
                mcqa_messages(observation), add_generation_prompt=True, tokenize=False
            )
            inputs = processor(text=[text], images=[Image.fromarray(image)], return_tensors="pt")
            rows.append({"inputs": inputs, "target": options.index(target), "n_options": len(options)})
    return rows


def _collate(rows: list[dict], pad_id: int):
    # deferred: keeps torch/transformers out of light import paths
    import torch

    length = max(r["inputs"]["input_ids"].shape[1] for r in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):  # left padding: the answer position is the last one for every row
        n = r["inputs"]["input_ids"].shape[1]
        ids[i, length - n :] = r["inputs"]["input_ids"][0]
        mask[i, length - n :] = 1
    batch = {"input_ids": ids, "attention_mask": mask}
    # The processor's image fields, whatever the family: pixel_values + image_grid_thw (Qwen-VL) or pixel_values +
    # image_sizes (LLaVA-NeXT; its crops per image depend on the image size, and the synthetic frames share one).
    # Token-aligned fields (e.g. transformers 5's mm_token_type_ids) are not padded here, so they are left out.
    for key, value in rows[0]["inputs"].items():
        if key not in batch and value.shape != rows[0]["inputs"]["input_ids"].shape:
            batch[key] = torch.cat([r["inputs"][key] for r in rows])
    targets = torch.tensor([r["target"] for r in rows])
    n_options = torch.tensor([r["n_options"] for r in rows])
    return batch, targets, n_options


def warm_start(
    model,
    processor,
    environments: list,
    steps: int = 100,
    learning_rate: float = 3e-3,
    batch_size: int = 16,
    suggest_rate: float = 0.1,
    seed: int = 0,
    states: str = "reference",
    replay=None,
    replay_coef: float = 1.0,
) -> list[float]:
    """Train `model` in place on the reference images of `environments` (module docstring); returns the losses.

    Args:
        model: a Qwen-VL or LLaVA-NeXT model (`build_tiny` or loaded), trained in fp32 on its current device.
        processor: its processor.
        environments (`list`): training environments (synthetic).
        steps (`int`, *optional*, defaults to `100`): AdamW steps.
        learning_rate (`float`, *optional*, defaults to `3e-3`): constant learning rate (tiny models need large steps).
        batch_size (`int`, *optional*, defaults to `16`): rows per step (sampled with replacement across steps).
        suggest_rate (`float`, *optional*, defaults to `0.1`): fraction of rows whose target is the suggestion option.
        seed (`int`, *optional*, defaults to `0`): row sampling seed.
        states (`str`, *optional*, defaults to `"reference"`): which states give rows (`warm_start_rows`).
        replay (*optional*): a `StreamingReplay` whose term, times `replay_coef`, is added at every step.
        replay_coef (`float`, *optional*, defaults to `1.0`): its weight.
    """
    # deferred: keeps torch/transformers out of light import paths
    import torch

    if steps < 1:
        raise ValueError(f"steps: expected >= 1, got {steps}")
    rows = warm_start_rows(environments, processor, suggest_rate, seed, states)
    tokenizer = getattr(processor, "tokenizer", processor)
    n_max = max(r["n_options"] for r in rows)
    letters = torch.tensor(letter_token_ids(tokenizer, n_max))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0)
    rng = random.Random(seed)
    was_training = model.training
    model.train()
    losses = []
    for step in range(steps):
        batch, targets, n_options = _collate(rng.sample(rows, min(batch_size, len(rows))), pad_id)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        logits = model(**batch).logits[:, -1, letters.to(model.device)]
        # Letters beyond a row's options cannot be sampled there either (banned at generation: `letters_only`).
        logits = logits.masked_fill(torch.arange(n_max, device=logits.device)[None] >= n_options[:, None], -1e9)
        loss = torch.nn.functional.cross_entropy(logits, targets.to(logits.device))
        if replay is not None:
            loss = loss + replay_coef * replay.loss(model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            logger.info("warm start step %d/%d: loss %.4f", step + 1, steps, losses[-1])
    model.train(was_training)
    return losses
