"""The live model as a `StreamingPolicy` / a single-image answer function (MCQA, OEG), and ZeRO-3-safe generation
(STYLE.md #5).

Both decode greedily through the KV-cache engine of `proactive_rl.streaming` (docs/spec.md §9) over turns rendered by
`proactive_rl.chat` exactly as training renders them, so an SFT model sees at evaluation what it was trained on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

DEFAULT_MAX_NEW_TOKENS = 16


def model_policy(model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, max_frames: int | None = None):
    """The live model as a greedy `proactive_rl.streaming.HFStreamingPolicy` (a `StreamingPolicy`)."""
    from proactive_rl.streaming import HFStreamingPolicy, SamplingParams

    return HFStreamingPolicy(
        model, processor, sampling=SamplingParams(max_new_tokens=max_new_tokens), max_frames=max_frames
    )


def image_answer_fn(model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> Callable:
    """``(image, text) -> answer text``: a fresh dialogue (system turn, one user turn: the image then the text, as
    the GRPO rows are rendered) and a greedy reply. The MCQA and OEG evaluators both answer through it."""
    from proactive_rl.chat import generation_prompt_ids, render_system_turn
    from proactive_rl.chat.render import _renderer
    from proactive_rl.streaming import SamplingParams, StreamingSession

    system = list(render_system_turn(processor).input_ids)
    header = list(generation_prompt_ids(processor))
    renderer = _renderer(processor)
    sampling = SamplingParams(max_new_tokens=max_new_tokens)

    def answer(image, text: str) -> str:
        content = [{"type": "image", "image": image}, {"type": "text", "text": text}]
        turn = renderer.turn({"role": "user", "content": content})
        pixel_values, grids = renderer.process_images(turn.images)
        session = StreamingSession(model, processor)
        session.append_tokens(system + turn.input_ids + header, pixel_values, grids)
        return session.generate(sampling).texts[0].strip()

    return answer


def observation_image(observation):
    """The observation's image; decoded from ``image_path`` when the environment was built without images
    (`proactivebench_environments` gives 1×1 placeholders, so that training rows decode lazily)."""
    image = observation.image
    if observation.image_path is not None and image.shape[:2] == (1, 1):
        import numpy as np
        from PIL import Image

        with Image.open(observation.image_path) as decoded:
            image = np.array(decoded.convert("RGB"))
    return image


def mcqa_answer_fn(model, processor, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> Callable:
    """``observation -> answer text`` for `proactive_eval.environments.run_environment`: the image and the authors'
    multiple-choice text through `image_answer_fn`."""
    from proactive_rl.data.mcqa import mcqa_text

    answer = image_answer_fn(model, processor, max_new_tokens)
    return lambda observation: answer(observation_image(observation), mcqa_text(observation))


@contextlib.contextmanager
def generation_model(model, trainer=None) -> Iterator:
    """The model to generate with, entered once by every rank around a whole evaluation. Under DeepSpeed ZeRO-3
    the parameters are gathered whole (and the engine's hooks lifted, TRL's `unwrap_model_for_generation`), so
    each rank decodes its own shard for as many steps as it needs: a sharded forward is a collective and ranks
    decoding different episodes would hang."""
    from proactive_rl.streaming import gathered_for_generation

    if trainer is not None:
        with gathered_for_generation(trainer.model_wrapped, trainer.accelerator) as unwrapped:
            yield unwrapped
    else:
        with gathered_for_generation(model) as unwrapped:
            yield unwrapped
