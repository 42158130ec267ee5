"""The judge interface: ``async score(prompt) -> level | None`` plus a blocking, concurrent ``score_many``.

A judge rates one prompt (built by :func:`~proactive_eval.judges.prompts.pauc_prompt` or
:func:`~proactive_eval.judges.prompts.oeg_prompt`) and keeps counters in `stats`, so that an evaluation can
report how many calls it paid for, how many came from the cache, how many were retried, and how many
answers could not be parsed (docs/spec.md §5: an unparseable answer drops its PAUC point; it is never an error).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proactive_eval.judges.cache import JudgeCache
from proactive_eval.judges.prompts import parse_level
from proactive_eval.judges.transport import JudgeError


@dataclass
class JudgeStats:
    """What a judge did. ``calls`` are HTTP requests (retries and re-asks included); ``unparseable`` and
    ``failures`` count prompts whose final score is `None` because the answer could not be parsed or no
    answer came back."""

    prompts: int = 0
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    unparseable: int = 0
    failures: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Judge:
    """Base class. Subclasses implement :meth:`_fetch` (one uncached answer) or override :meth:`score`.

    Attributes:
        judge_id (`str`): part of the cache key; changes whenever the prompt or generation settings change.
        model (`str`): the model name (the other part of the cache key besides the prompt).
        parser (`Callable[[str], Any]`): turns a raw answer into a score, `None` when unparseable.
        reask_unparseable (`int`): how many times a fresh unparseable answer is asked again (a sampling judge
            may answer properly the second time); the last answer is cached either way.
        cache (`JudgeCache` or `None`): the on-disk cache, keyed by (judge_id, model, prompt).
    """

    judge_id: str = "judge"
    model: str = ""
    reask_unparseable: int = 0

    def __init__(self, parser: Callable[[str], Any] = parse_level, cache_path: str | Path | None = None):
        self.parser = parser
        self.stats = JudgeStats()
        self.cache = JudgeCache(cache_path) if cache_path is not None else None
        self._memo: dict[str, str] = {}

    async def _fetch(self, prompt: str) -> str | None:
        """Ask the backend (no cache); `None` when no answer came back. Implemented by subclasses."""
        raise NotImplementedError

    async def complete(self, prompt: str) -> str | None:
        """The raw answer to `prompt`, from memory, the disk cache, or the backend (then cached)."""
        return (await self._complete(prompt))[0]

    async def _complete(self, prompt: str, refresh: bool = False) -> tuple[str | None, bool]:
        if not refresh:
            answer = self._memo.get(prompt)
            if answer is None and self.cache is not None:
                answer = await asyncio.to_thread(self.cache.get, self.judge_id, self.model, prompt)
            if answer is not None:
                self.stats.cache_hits += 1
                self._memo[prompt] = answer
                return answer, True
        answer = await self._fetch(prompt)
        if answer is not None:
            self._memo[prompt] = answer
            if self.cache is not None:
                await asyncio.to_thread(self.cache.put, self.judge_id, self.model, prompt, answer)
        return answer, False

    async def score(self, prompt: str):
        """The parsed score of `prompt` (a level 1..3 for the PAUC parser), or `None` when unparseable.

        A fresh unparseable answer is asked again up to `reask_unparseable` times; a cached one is not (a
        re-run must not pay again), so a re-run returns exactly what the first run did.
        """
        self.stats.prompts += 1
        answer, cached = await self._complete(prompt)
        value = self._parse(answer)
        for _ in range(0 if cached or answer is None else self.reask_unparseable):
            if value is not None:
                break
            self.stats.reasks += 1
            answer, _ = await self._complete(prompt, refresh=True)
            value = self._parse(answer)
        if value is None and answer is not None:
            self.stats.unparseable += 1
        return value

    def score_many(self, prompts: list[str], progress: bool = True) -> list:
        """Score every prompt concurrently and return the scores in order (duplicates are asked once).

        Safe to call from code that is itself inside a running event loop (a notebook, an async server): the
        work then runs on its own loop in a worker thread instead of failing or nesting loops.
        """
        return self._map(self.score, prompts, progress, "judge")

    def complete_many(self, prompts: list[str], progress: bool = True) -> list[str | None]:
        """Raw answers for `prompts` (e.g. OEG bit lists, parsed per sample by the caller)."""
        return self._map(self.complete, prompts, progress, "judge")

    async def aclose(self) -> None:
        """Release network resources bound to the current event loop."""

    def _parse(self, answer: str | None):
        return None if answer is None else self.parser(answer)

    def _map(self, fn: Callable[[str], Awaitable[Any]], prompts: list[str], progress: bool, desc: str) -> list:
        unique = list(dict.fromkeys(prompts))
        results = _run_sync(lambda: self._gather(fn, unique, progress, desc))
        by_prompt = dict(zip(unique, results))
        return [by_prompt[p] for p in prompts]

    async def _gather(self, fn, prompts: list[str], progress: bool, desc: str) -> list:
        # deferred: tqdm.auto costs ~0.5 s to import; keeps `proactive-eval --help` fast
        from tqdm.auto import tqdm

        bar = tqdm(total=len(prompts), disable=not progress, desc=desc, leave=False)

        async def one(prompt):
            try:
                return await fn(prompt)
            finally:
                bar.update(1)

        try:
            results = await asyncio.gather(*(one(p) for p in prompts), return_exceptions=True)
        finally:
            bar.close()
            await self.aclose()
        errors = [r for r in results if isinstance(r, BaseException)]
        bugs = [e for e in errors if not isinstance(e, JudgeError)]
        if bugs:
            raise bugs[0]
        if errors:
            raise JudgeError(
                f"{len(errors)} of {len(prompts)} judge prompts failed; the answers received are cached, "
                f"so a re-run only pays for the rest. First error: {errors[0]}"
            ) from errors[0]
        return results


def _run_sync(make_coro: Callable[[], Awaitable[Any]]):
    """Run a coroutine to completion from sync code, on a worker thread when a loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make_coro())).result()
