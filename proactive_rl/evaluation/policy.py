"""The live model as a `StreamingPolicy` / an "answer an observation" function (MCQA, OEG), and ZeRO-3-safe
generation (every rank decodes its own shard).

Both decode greedily and render their prompt exactly as the matching trainer does, so a model sees at evaluation
what it was trained on: the streaming policy through the KV-cache engine of `proactive_rl.streaming` (docs/spec.md
§9) over turns rendered by `proactive_rl.chat` (the SFT / streaming GRPO dialogue); the answer function through the
processor's chat template over the single-turn rows of the suggestion trainer (`proactive_rl.data.mcqa`, §6).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
from PIL import Image

from proactive_rl.data.mcqa import image_messages, letters_only, mcqa_text
from proactive_rl.streaming import HFStreamingPolicy, SamplingParams, gathered_for_generation

DEFAULT_MAX_NEW_TOKENS = 16
# Frames decided per call in a batch: the call is shared by the batch's episodes, so a short block costs little, and
# a rejected draft wastes fewer frames fed again (16 alone, where each call is the episode's own).
BATCHED_LOOKAHEAD = 4


def model_policy(
    model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, max_frames: int | None = None, batcher=None
):
    """The live model as a greedy `proactive_rl.streaming.HFStreamingPolicy` (a `StreamingPolicy`); with a
    `proactive_rl.streaming.batch.Batcher`, one whose episode plays in the batcher's lockstep rounds."""
    return HFStreamingPolicy(
        model,
        processor,
        sampling=SamplingParams(max_new_tokens=max_new_tokens),
        max_frames=max_frames,
        batcher=batcher,
    )


def image_answer_fn(model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> Callable:
    """``(image, text, banned_ids=None) -> answer text``: answer one observation, greedily.

    The one way an image and a question are put to a model here (MCQA, OEG): one user turn, the image then the text,
    through the processor's own chat template with the generation prompt (`proactive_rl.data.mcqa.image_messages`),
    exactly the prompt the suggestion trainer's rows give TRL's `GRPOTrainer`; no streaming system turn. Greedy
    `generate` (``banned_ids`` never generated, e.g. every token but the option letters, as in training:
    `proactive_rl.data.mcqa.letters_only`), in eval mode; the
    caller's mode is restored. Under ZeRO-3, call it inside `generation_model` (every rank decodes its own shard).
    """
    # deferred: keeps torch/transformers out of light import paths
    import torch

    def answer(image, text: str, banned_ids: list[int] | None = None) -> str:
        if not isinstance(image, Image.Image):
            image = Image.fromarray(image)
        prompt = processor.apply_chat_template(image_messages(text), add_generation_prompt=True, tokenize=False)
        inputs = processor(text=[prompt], images=[image], return_tensors="pt").to(model.device)
        was_training = model.training
        if was_training:  # no dropout while answering; eval() walks every module, so only when needed
            model.eval()
        try:
            with torch.no_grad():
                out = model.generate(
                    **inputs,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    **letters_only(banned_ids),
                    use_cache=True,
                    # The weights are whole here (`generation_model`); transformers would otherwise step in lockstep
                    # with the other ranks under ZeRO-3, and ranks answering different numbers of turns would hang.
                    synced_gpus=False,
                )
        finally:
            if was_training:
                model.train()
        return processor.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()

    return answer


def observation_image(observation):
    """The observation's image; decoded from ``image_path`` when the environment was built without images
    (`proactivebench_environments` gives 1×1 placeholders, so that training rows decode lazily)."""
    image = observation.image
    if observation.image_path is not None and image.shape[:2] == (1, 1):
        with Image.open(observation.image_path) as decoded:
            image = np.array(decoded.convert("RGB"))
    return image


def mcqa_answer_fn(
    model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, banned_ids: list[int] | None = None
) -> Callable:
    """``(observation, hint="") -> answer text``: the observation's image and the authors' multiple-choice text
    (`proactive_rl.data.mcqa.mcqa_text`, the suggestion trainer's row text) through `image_answer_fn`."""
    answer = image_answer_fn(model, processor, max_new_tokens)
    return lambda observation, hint="": answer(
        observation_image(observation), mcqa_text(observation, hint), banned_ids
    )


@contextlib.contextmanager
def generation_model(model, trainer=None) -> Iterator:
    """The model to generate with, entered once by every rank around a whole evaluation. Under DeepSpeed ZeRO-3
    the parameters are gathered whole (and the engine's hooks lifted, TRL's `unwrap_model_for_generation`), so
    each rank decodes its own shard for as many steps as it needs: a sharded forward is a collective and ranks
    decoding different episodes would hang."""
    if trainer is not None:
        with gathered_for_generation(trainer.model_wrapped, trainer.accelerator) as unwrapped:
            yield unwrapped
    else:
        with gathered_for_generation(model) as unwrapped:
            yield unwrapped
