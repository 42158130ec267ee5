"""One OpenAI-compatible ``/v1/chat/completions`` transport, with retries, for judges and served policies.

Works with OpenAI and with any vLLM / SGLang server. Timeouts, connection errors, HTTP 408/409/429/5xx and
malformed response bodies are retried with exponential backoff and jitter (``Retry-After`` is honoured up to
`max_backoff`); any other HTTP error is a configuration problem (bad key, model or URL) and raises at once.
An API key bound for a plain ``http://`` URL on another machine is warned about once per server
(`sends_key_in_clear`). httpx is imported lazily so that ``import proactive_eval`` stays light.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 429}
_WARNED_CLEAR: set[str] = set()  # the servers already warned about (one warning per server and process)


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


def sends_key_in_clear(url: str, api_key: str | None) -> bool:
    """True when `api_key` would cross a network unencrypted: a key, a URL that is not ``https``, and a host that is
    not this machine (``localhost``, 127.0.0.0/8, ``::1``).

    >>> [sends_key_in_clear(u, "k") for u in ("http://example.org/v1", "https://example.org", "http://127.0.0.2:80")]
    [True, False, False]
    >>> sends_key_in_clear("http://example.org/v1", None), sends_key_in_clear("http://[::1]:8000", "k")
    (False, False)
    """
    if not api_key:
        return False
    parts = urlsplit(url.strip())
    if parts.scheme.lower() == "https":
        return False
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always this machine
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name: it may resolve anywhere
        return True
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return not (address.is_loopback or (mapped is not None and mapped.is_loopback))


def _warn_if_key_in_clear(url: str, api_key: str | None) -> None:
    if not sends_key_in_clear(url, api_key):
        return
    parts = urlsplit(url.strip())
    server = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # never log credentials put in the URL
    if server in _WARNED_CLEAR:
        return
    _WARNED_CLEAR.add(server)
    logger.warning(
        "the API key will be sent unencrypted to %s (not https, not this machine): anyone on the network path can "
        "read it; use an https URL, or unset the key for a server that needs none",
        server,
    )


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
        api_key (`str`, *optional*): bearer token; defaults to ``$OPENAI_API_KEY`` when set. Sent to a plain
            ``http://`` URL on another machine, it is warned about once (`sends_key_in_clear`).
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
        _warn_if_key_in_clear(self.url, self.api_key)
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
