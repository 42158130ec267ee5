"""Shared by the SFT tests: a tiny model, and small state-token dialogues encoded without `proactive_rl.chat`.

The dialogues are rendered here with the processor's own chat template (one user turn per frame, one assistant
turn `</Silence>` or `</Response> n`), so the trainer tests do not depend on the renderer under test elsewhere.
"""

from __future__ import annotations

import numpy as np
import torch

from proactive_rl.models import build_tiny

SILENCE, RESPONSE = "</Silence>", "</Response>"


def tiny(seed: int = 0):
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=seed)
    return model.train(), processor


def encode_toy(processor, n_frames: int, respond_at: set[int], seed: int) -> dict:
    """One encoded dialogue: frames are random 32×32 images, labels cover the assistant turns only."""
    rng = np.random.default_rng(seed)
    tok = processor.tokenizer
    ids, labels, pixel_values, grids = [], [], [], []
    for k in range(n_frames):
        frame = rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)
        content = [{"type": "text", "text": f"<t={k}.0s>"}, {"type": "image"}]
        if k == 0:
            content.insert(0, {"type": "text", "text": "Count the flashes."})
        user = processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False)
        if k > 0:  # the template adds a default system turn before the first message only
            user = user[user.index("<|im_start|>user") :]
        enc = processor(text=[user], images=[frame], return_tensors="pt")
        ids += enc["input_ids"][0].tolist()
        labels += [-100] * enc["input_ids"].shape[1]
        pixel_values.append(enc["pixel_values"])
        grids.append(enc["image_grid_thw"])
        answer = f"{RESPONSE} {k}" if k in respond_at else SILENCE
        head = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        body = tok(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        tail = tok("\n", add_special_tokens=False)["input_ids"]
        ids += head + body + tail
        labels += [-100] * len(head) + body + [-100] * len(tail)
    return {
        "input_ids": ids,
        "labels": labels,
        "pixel_values": torch.cat(pixel_values),
        "image_grid_thw": torch.cat(grids),
    }


def toy_examples(processor, n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        frames = int(rng.integers(3, 6))
        respond = {int(k) for k in rng.choice(frames, size=1)}
        out.append(encode_toy(processor, frames, respond, seed=seed * 1000 + i))
    return out
