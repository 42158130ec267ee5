"""One OpenAI-compatible ``/v1/chat/completions`` transport, with retries, for judges and served policies.

Works with OpenAI and with any vLLM / SGLang server. Timeouts, connection errors, HTTP 408/409/429/5xx and
malformed response bodies are retried with exponential backoff and jitter (``Retry-After`` is honoured up to
`max_backoff`); any other HTTP error is a configuration problem (bad key, model or URL) and raises at once.
httpx is imported lazily so that ``import proactive_eval`` stays light.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from typing import Any

_RETRY_STATUS = {408, 409, 429}


class JudgeError(RuntimeError):
    """A chat request that cannot succeed (non-retryable HTTP error, or retries exhausted)."""


@dataclass
class TransportStats:
    """Counters shared by a transport's users: HTTP requests sent and retries made."""

    calls: int = 0
    retries: int = 0


def chat_url(base_url: str) -> str:
    """The completions endpoint for a base URL given with or without ``/v1``.

    >>> chat_url("http://127.0.0.1:8000"), chat_url("https://api.openai.com/v1/")
    ('http://127.0.0.1:8000/v1/chat/completions', 'https://api.openai.com/v1/chat/completions')
    """
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return url + ("/chat/completions" if url.endswith("/v1") else "/v1/chat/completions")


def _httpx():
    # deferred: optional extra (judge)
    try:
        import httpx
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("the OpenAI-compatible backend needs httpx: pip install 'proactive-eval[judge]'") from err
    return httpx


class ChatTransport:
    """Send chat requests and return the assistant text, retrying transient failures.

    Args:
        base_url (`str`): server URL, e.g. ``http://localhost:8000/v1``.
        api_key (`str`, *optional*): bearer token; defaults to ``$OPENAI_API_KEY`` when set.
        timeout (`float`, *optional*, defaults to `60.0`): seconds per request.
        max_retries (`int`, *optional*, defaults to `6`): retries after the first attempt.
        backoff (`float`, *optional*, defaults to `1.0`): first backoff delay in seconds, doubled each retry,
            times a uniform jitter in [1, 1.5).
        max_backoff (`float`, *optional*, defaults to `60.0`): cap on one delay.
        stats (*optional*): where to count requests and retries; a fresh `TransportStats` by default.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        stats=None,
    ):
        self.url = chat_url(base_url)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        # Any object with ``calls`` and ``retries`` counters (a judge passes its own `JudgeStats`).
        self.stats = stats if stats is not None else TransportStats()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def async_client(self):
        httpx = _httpx()
        return httpx.AsyncClient(timeout=self.timeout, headers=self.headers)

    def client(self):
        httpx = _httpx()
        return httpx.Client(timeout=self.timeout, headers=self.headers)

    async def apost(self, client, payload: dict[str, Any], semaphore: asyncio.Semaphore | None = None) -> str:
        """POST `payload` with an ``httpx.AsyncClient``; `semaphore` bounds requests in flight (not backoff)."""
        httpx = _httpx()
        for attempt in range(self.max_retries + 1):
            self.stats.calls += 1
            try:
                if semaphore is None:
                    response = await client.post(self.url, json=payload)
                else:
                    async with semaphore:
                        response = await client.post(self.url, json=payload)
            except httpx.TransportError as err:  # timeouts, refused/reset connections, protocol errors
                reason, retry_after = f"{type(err).__name__}: {err}", None
            else:
                text, reason, retry_after = self._classify(response)
                if reason is None:
                    return text
            await asyncio.sleep(self._next_delay(attempt, reason, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def post(self, client, payload: dict[str, Any]) -> str:
        """Blocking twin of :meth:`apost` with an ``httpx.Client``."""
        httpx = _httpx()
        for attempt in range(self.max_retries + 1):
            self.stats.calls += 1
            try:
                response = client.post(self.url, json=payload)
            except httpx.TransportError as err:
                reason, retry_after = f"{type(err).__name__}: {err}", None
            else:
                text, reason, retry_after = self._classify(response)
                if reason is None:
                    return text
            time.sleep(self._next_delay(attempt, reason, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def _classify(self, response) -> tuple[str | None, str | None, float | None]:
        """``(text, None, None)`` on success, ``(None, reason, retry_after)`` when worth retrying; raises otherwise."""
        status = response.status_code
        if status == 200:
            try:
                text = response.json()["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                return None, f"malformed response body: {response.text[:120]!r}", None
            if not isinstance(text, str):
                return None, "response without message content", None
            return text, None, None
        if status in _RETRY_STATUS or status >= 500:
            return None, f"HTTP {status}", _retry_after(response.headers.get("retry-after"))
        raise JudgeError(f"{self.url}: HTTP {status} (not retried): {response.text[:300]}")

    def _next_delay(self, attempt: int, reason: str, retry_after: float | None) -> float:
        if attempt >= self.max_retries:
            raise JudgeError(f"{self.url}: giving up after {attempt + 1} attempts; last error: {reason}")
        self.stats.retries += 1
        delay = self.backoff * (2**attempt) * (1.0 + 0.5 * random.random())
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_backoff)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None
