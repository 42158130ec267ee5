"""Ask-for-help environments in the SFT mixture: single-turn MCQA examples beside the streaming dialogues
(docs/spec.md §3, §6).

ProactiveBench post-trains models that already recognise what an image shows (docs/spec.md §6); a tiny model
trained from scratch on streaming dialogues does not read the MCQA prompt (image first, then the question and the
lettered options), and learning it only in the suggestion stage's warm start, against the streaming replay that
keeps the earlier skills, did not happen in two of three demo seeds (benchmarks/RESULTS.md, "ask-for-help in
SFT"). With ``environments`` in an SFT recipe, each environment state becomes one example trained with the
dialogues: the prompt exactly as the MCQA evaluator and the suggestion trainer render it (`mcqa_messages`, the
processor's chat template and generation prompt), then the correct category's option letter and the end-of-turn
token, the only supervised positions (weight ``content_weight`` of docs/spec.md §3: no state token). States where
no category is correct yet (ROD's first frame) give no example; nothing teaches the suggestion: when to ask is the
suggestion stage's lesson.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from PIL import Image

from proactive_rl.chat.render import turn_markers
from proactive_rl.data.mcqa import EnvironmentSpec, image_messages, training_rows

# Which states of an environment give examples: its informative image only, or every state on the way there
# (the correct category as target even where the image is ambiguous: each state's best guess).
ENVIRONMENT_STATES = ("reference", "all")


def mcqa_example(row: dict[str, Any], processor) -> dict[str, Any]:
    """One MCQA row (`proactive_rl.data.mcqa.environment_rows`) as an SFT example: ``input_ids``, ``labels``,
    ``attention_mask``, ``mm_token_type_ids``, ``pixel_values``, ``image_grid_thw`` (1-D token tensors)."""
    # deferred: keeps torch out of light import paths
    import torch

    letter = string.ascii_uppercase[row["options"].index(row["answer"])]
    image = row["image"]
    if isinstance(image, str):  # a training-rows file's image path
        with Image.open(image) as decoded:
            image = decoded.convert("RGB")
    else:
        image = Image.fromarray(np.asarray(image))
    messages = image_messages(row["prompt"][0]["content"])
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[prompt], images=[image], return_tensors="pt")
    tokenizer = getattr(processor, "tokenizer", processor)
    # the answer is tokenised alone: the ids a model decodes after the prompt's generation prompt
    answer = tokenizer(letter + turn_markers(processor)[1], add_special_tokens=False)["input_ids"]
    prompt_ids = inputs["input_ids"][0]
    ids = torch.cat([prompt_ids, torch.tensor(answer, dtype=torch.long)])
    labels = torch.full_like(ids, -100)
    labels[len(prompt_ids) :] = ids[len(prompt_ids) :]
    image_token = getattr(processor, "image_token_id", None)
    if image_token is None:
        image_token = tokenizer.convert_tokens_to_ids(processor.image_token)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": labels,
        "mm_token_type_ids": (ids == image_token).long(),
        "pixel_values": inputs["pixel_values"],
        "image_grid_thw": inputs["image_grid_thw"],
    }


def mcqa_examples(
    sources: list[EnvironmentSpec], processor, states: str = "all", hint: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """The SFT examples of `sources` and their ids (``<env_id>@<step>``).

    Args:
        sources (`list[EnvironmentSpec]`): synthetic kinds or ProactiveBench JSONL (records or training rows).
        processor: the model's processor (chat template and image processor).
        states (`str`, *optional*, defaults to `"all"`): ``"reference"``: each environment's informative image
            only (its last state); ``"all"``: every state with a correct category.
        hint (`bool`, *optional*, defaults to `False`): add each environment's hint to the question.
    """
    if states not in ENVIRONMENT_STATES:
        raise ValueError(f"environment_states: expected one of {', '.join(ENVIRONMENT_STATES)}, got {states!r}")
    rows = training_rows(sources, hint)
    if states == "reference":  # the last state of each environment (rows come in step order)
        last = {row["env_id"]: i for i, row in enumerate(rows)}
        rows = [rows[i] for i in sorted(last.values())]
    rows = [row for row in rows if row["answer"]]
    return [mcqa_example(row, processor) for row in rows], [f"{row['env_id']}@{row['step']}" for row in rows]
