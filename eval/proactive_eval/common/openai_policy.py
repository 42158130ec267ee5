"""A `StreamingPolicy` for OpenAI-compatible chat servers, so a served VLM (vLLM, SGLang, OpenAI) can be
evaluated end to end by the streaming loop (docs/spec.md §2).

Each episode is one chat. Every decision step appends a user turn (the instruction on the first turn, then
the timestamp text ``<t=12.0s>``, the new frame(s) as base64 ``image_url`` parts, and any scheduled user text)
and asks the server for the assistant turn, which is kept in the history. ``max_frames`` keeps only the latest
K images in the history sent (older user turns keep their text). Pillow is imported lazily.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from proactive_eval.judges.transport import ChatTransport
from proactive_eval.policy import Observation

DEFAULT_SYSTEM_PROMPT = (
    "You are a proactive assistant watching a live video stream, one frame at a time. At every frame, answer "
    "with exactly one of: '</Silence>' when there is nothing to say yet, or '</Response> ' followed by your "
    "message when the user's request calls for one now. Stay silent unless the current frames give you "
    "something new to say."
)


def encode_image(frame, image_format: str = "jpeg", quality: int = 90) -> str:
    """A ``data:`` URL of an ``H×W×3`` uint8 array (or a PIL image), as OpenAI-style ``image_url`` expects."""
    # deferred: optional extra
    from PIL import Image

    image = frame if isinstance(frame, Image.Image) else Image.fromarray(frame)
    buffer = io.BytesIO()
    fmt = image_format.lower()
    if fmt in ("jpg", "jpeg"):
        image.convert("RGB").save(buffer, format="JPEG", quality=quality)
        mime = "image/jpeg"
    elif fmt == "png":
        image.save(buffer, format="PNG")
        mime = "image/png"
    else:
        raise ValueError(f"image_format must be 'jpeg' or 'png', got {image_format!r}")
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


class OpenAIChatPolicy:
    """Drive a served chat VLM as a streaming policy.

    Args:
        base_url (`str`): e.g. ``http://localhost:8000/v1``.
        model (`str`): the served model name.
        api_key (`str`, *optional*): defaults to ``$OPENAI_API_KEY`` when set.
        system_prompt (`str`, *optional*): the role and when to stay silent (docs/spec.md §2).
        max_frames (`int`, *optional*): keep only the latest K images in the history; an observation's
            ``meta["max_frames"]`` (set by `run_streaming`) wins.
        image_format (`str`, *optional*, defaults to `"jpeg"`): `"jpeg"` or `"png"`.
        timestamp_format (`str`, *optional*, defaults to ``"<t={time:.1f}s>"``).
        temperature (`float`, *optional*, defaults to `0.0`); max_tokens (`int`, *optional*, defaults to `128`).
        timeout, max_retries, backoff, max_backoff: the transport's retry settings (see `ChatTransport`).
        extra_body (`dict`, *optional*): merged into every request.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_frames: int | None = None,
        image_format: str = "jpeg",
        timestamp_format: str = "<t={time:.1f}s>",
        temperature: float = 0.0,
        max_tokens: int = 128,
        timeout: float = 120.0,
        max_retries: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        extra_body: dict[str, Any] | None = None,
    ):
        self.model, self.system_prompt, self.max_frames = model, system_prompt, max_frames
        self.image_format, self.timestamp_format = image_format, timestamp_format
        self.generation = {"temperature": temperature, "max_tokens": max_tokens, **(extra_body or {})}
        self.transport = ChatTransport(base_url, api_key, timeout, max_retries, backoff, max_backoff)
        self._client = None
        self.history: list[dict[str, Any]] = []

    def reset(self, episode) -> None:
        self.history = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []

    def step(self, observation: Observation) -> str:
        content: list[dict[str, Any]] = []
        if observation.first and observation.instruction:
            content.append({"type": "text", "text": observation.instruction})
        content.append({"type": "text", "text": self.timestamp_format.format(time=observation.time)})
        for frame in observation.frames:
            url = encode_image(frame, self.image_format)
            content.append({"type": "image_url", "image_url": {"url": url}})
        if observation.user_text:
            content.append({"type": "text", "text": observation.user_text})
        self.history.append({"role": "user", "content": content})
        max_frames = observation.meta.get("max_frames", self.max_frames)
        payload = {"model": self.model, "messages": self.messages(max_frames), **self.generation}
        if self._client is None:
            self._client = self.transport.client()
        reply = self.transport.post(self._client, payload)
        self.history.append({"role": "assistant", "content": reply})
        return reply

    def messages(self, max_frames: int | None = None) -> list[dict[str, Any]]:
        """The history to send: every turn, with only the latest `max_frames` images kept."""
        if max_frames is None:
            return self.history
        keep = int(max_frames)
        out = []
        for message in reversed(self.history):
            if isinstance(message["content"], list):
                parts = []
                for part in reversed(message["content"]):
                    if part["type"] == "image_url":
                        if keep <= 0:
                            continue
                        keep -= 1
                    parts.append(part)
                message = {**message, "content": parts[::-1]}
            out.append(message)
        return out[::-1]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
