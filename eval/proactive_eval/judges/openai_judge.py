"""LLM judge over an OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang), async, cached, retried (docs/spec.md §5)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proactive_eval.judges.base import Judge
from proactive_eval.judges.prompts import PAUC_SYSTEM_PROMPT, parse_level
from proactive_eval.judges.transport import ChatTransport, JudgeError


class OpenAIJudge(Judge):
    """A judge served behind ``/v1/chat/completions``.

    Args:
        base_url (`str`): e.g. ``https://api.openai.com/v1`` or ``http://localhost:8000/v1``.
        model (`str`): e.g. ``gpt-4.1``.
        api_key (`str`, *optional*): defaults to ``$OPENAI_API_KEY`` when set.
        concurrency (`int`, *optional*, defaults to `8`): requests in flight at once.
        max_retries (`int`, *optional*, defaults to `6`): retries on timeouts, 408/409/429, 5xx, connection
            errors and malformed bodies, with exponential backoff and jitter.
        timeout (`float`, *optional*, defaults to `60.0`): seconds per request.
        cache_path (`str`, *optional*): SQLite cache file; answers are keyed by (judge id, model, prompt).
        system_prompt (`str`, *optional*, defaults to `PAUC_SYSTEM_PROMPT`): use `OEG_SYSTEM_PROMPT` for OEG.
        parser (`Callable`, *optional*, defaults to `parse_level`): raw answer -> score.
        temperature (`float`, *optional*, defaults to `0.0`).
        max_tokens (`int`, *optional*): omitted from the request when `None` (reasoning judges need room).
        backoff (`float`, *optional*, defaults to `1.0`) / max_backoff (`float`, *optional*, defaults to `60.0`):
            the retry delays in seconds.
        reask_unparseable (`int`, *optional*, defaults to `1`): re-ask a fresh unparseable answer this often.
        on_failure (`str`, *optional*, defaults to `"raise"`): when retries are exhausted, `"raise"` a
            `JudgeError` at the end of `score_many` (everything received is cached, so a re-run only pays for
            the rest), or `"none"` to score the prompt `None` and count it in ``stats.failures``.
        extra_body (`dict`, *optional*): merged into every request (e.g. ``{"chat_template_kwargs": ...}``).
        judge_id (`str`, *optional*): cache namespace; by default a hash of the system prompt and settings.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        concurrency: int = 8,
        max_retries: int = 6,
        timeout: float = 60.0,
        cache_path: str | Path | None = None,
        system_prompt: str = PAUC_SYSTEM_PROMPT,
        parser: Callable[[str], Any] = parse_level,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        reask_unparseable: int = 1,
        on_failure: str = "raise",
        extra_body: dict[str, Any] | None = None,
        judge_id: str | None = None,
    ):
        if on_failure not in ("raise", "none"):
            raise ValueError(f"on_failure must be 'raise' or 'none', got {on_failure!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        super().__init__(parser=parser, cache_path=cache_path)
        self.model, self.system_prompt = model, system_prompt
        self.concurrency, self.on_failure = int(concurrency), on_failure
        self.reask_unparseable = int(reask_unparseable)
        self.transport = ChatTransport(base_url, api_key, timeout, max_retries, backoff, max_backoff, stats=self.stats)
        self.generation = {"temperature": temperature, **({"max_tokens": max_tokens} if max_tokens else {})}
        self.generation.update(extra_body or {})
        settings = json.dumps([system_prompt, self.generation], sort_keys=True)
        self.judge_id = judge_id or "openai:" + hashlib.sha256(settings.encode()).hexdigest()[:16]
        self._client = self._loop = self._semaphore = None

    def _payload(self, prompt: str) -> dict[str, Any]:
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": prompt}]
        return {"model": self.model, "messages": messages, **self.generation}

    async def _fetch(self, prompt: str) -> str | None:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # httpx clients and asyncio semaphores belong to one event loop; score_many makes a new one per call.
            self._client, self._loop = self.transport.async_client(), loop
            self._semaphore = asyncio.Semaphore(self.concurrency)
        try:
            return await self.transport.apost(self._client, self._payload(prompt), self._semaphore)
        except JudgeError:
            self.stats.failures += 1
            if self.on_failure == "raise":
                raise
            return None

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client, self._loop = self._client, None, None
            await client.aclose()
