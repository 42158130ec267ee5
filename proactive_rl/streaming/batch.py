"""Batched streaming: many episodes in lockstep, one vision call and one language-model call per round
(docs/spec.md §9).

Every episode (or GRPO group) is played by the one-at-a-time code itself -- `HFStreamingPolicy` under
`proactive_eval.streaming.run_episode`, `proactive_rl.grpo.streaming.rollout.rollout_window` -- on a
`BatchedSession`, in a worker thread of a `Batcher`. A `BatchedSession` is a `StreamingSession` whose model calls
are not run on the spot: its vision encoding and language-model calls hand their inputs to the batcher and wait.
When every worker waits, the batcher runs one round: all the frames to encode in one vision call, and all the rows'
new tokens packed into one language-model call (`proactive_rl.streaming.packed`: each row its own KV cache and its
own 3-D rope positions, no padding). Everything decided between calls -- speculative drafts kept or rejected,
sampled tokens, roll-backs, `max_frames` re-prefills -- stays in the episode's own code, so an episode played in a
batch makes the choices it makes alone: greedy turns are the same tokens, and a sampled turn has the same
distribution (each session draws from its own generator; with the same seed, the same tokens).

Continuous batching: `Batcher.map` keeps `batch_size` workers busy; an episode that ends frees its worker, which
takes the next one, so a long episode does not hold the others. The threads only interleave per-episode Python;
every model call runs in the thread that called `map`, inside whatever it entered (``no_grad``,
`gathered_for_generation`: under ZeRO-3 every rank gathers once around its whole `map`, and each rank's rounds are
local, as its one-at-a-time episodes are).

Example::

    batcher = Batcher(model, processor)
    policies = lambda: HFStreamingPolicy(model, processor, batcher=batcher)
    outputs = batcher.map(episodes, lambda episode: run_episode(policies(), episode), batch_size=16)
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from proactive_rl.models.families import ImageFeatures, family_of

from .forward import LanguageModelForward
from .packed import RowKV, Span, packed_rows
from .session import StreamingSession, _eval_mode, _native_gqa


@dataclass
class Segment:
    """One row's new tokens in a language-model round.

    Args:
        row (`RowKV`): the row's cache.
        ids (`torch.Tensor`): ``(n,)`` token ids.
        positions (`torch.Tensor`): ``(3, n)`` rope positions.
        images (`list[ImageFeatures]`): the features of the images whose placeholders are in `ids`, in order.
        want (`list[int]`): indices into `ids` whose next-token logits to return.
    """

    row: RowKV
    ids: torch.Tensor
    positions: torch.Tensor
    images: list
    want: list[int]


@dataclass
class _Request:
    kind: str  # "vision" or "language"
    payload: object
    slot: int = 0
    done: bool = False
    result: object = None
    error: BaseException | None = None


@dataclass
class BatchStats:
    """What the rounds did: calls, rows per language-model call, tokens, the most KV-cache bytes held at once."""

    rounds: int = 0
    vision_calls: int = 0
    language_calls: int = 0
    rows: int = 0
    tokens: int = 0
    peak_cache_bytes: int = 0  # allocated (buffers double when full)
    peak_cache_used: int = 0  # the kept tokens' keys and values
    rows_per_call: list[int] = field(default_factory=list)
    vision_s: float = 0.0  # wall time in vision calls
    language_s: float = 0.0  # wall time in language-model calls


class _Rows:
    """A batched session's cache: one `RowKV` per row, plus the session's column count (`StreamingSession` crops
    and measures its cache by columns; a row's own length follows its attention-mask row)."""

    def __init__(self, rows: list[RowKV], columns: int = 0):
        self.rows, self.columns = rows, columns

    def get_seq_length(self) -> int:
        return self.columns

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError(f"crop() takes the number of columns to remove as a negative int, got {tokens_to_remove}")
        self.columns += tokens_to_remove

    def batch_repeat_interleave(self, n: int) -> None:
        self.rows = [row if k == 0 else row.clone() for row in self.rows for k in range(n)]

    def __deepcopy__(self, memo) -> _Rows:
        return _Rows([row.clone() for row in self.rows], self.columns)


class BatchedSession(StreamingSession):
    """A `StreamingSession` whose model calls run in its `Batcher`'s rounds (see the module docstring).

    Args:
        batcher (`Batcher`): runs the calls (its model and processor are the session's).
        max_frames, record_logits: as in `StreamingSession`.
    """

    def __init__(self, batcher: Batcher, max_frames: int | None = None, record_logits: bool = False):
        super().__init__(batcher.model, batcher.processor, max_frames=max_frames, record_logits=record_logits)
        self.batcher = batcher

    def cache_bytes(self) -> tuple[int, int]:
        """(allocated, used) bytes of this session's KV cache."""
        rows = [] if self.cache is None else self.cache.rows
        return sum(row.nbytes() for row in rows), sum(row.used_bytes() for row in rows)

    def _encode(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[ImageFeatures]:
        images = self.batcher.submit("vision", (pixel_values, grids))
        self.n_images_encoded += len(grids)
        self.n_vision_calls += 1
        return images

    def _forward(self, ids, new_mask, positions, images: list, keep: list[int] | None = None):
        B, S = ids.shape
        if self.cache is None:
            self.cache = _Rows([RowKV() for _ in range(B)])
        elif self.mask is not None:  # a roll-back cuts rows' tails: a row keeps the tokens its mask row still shows
            for row, n in zip(self.cache.rows, self.mask.sum(1).tolist()):
                row.length = int(n)
        real = new_mask.bool()
        columns = list(range(S)) if self.record_logits else ([S - 1] if keep is None else [int(k) for k in keep])
        segments, placed = [], []
        for b in range(B):
            idx = real[b].nonzero().squeeze(1)
            if not len(idx):
                continue
            rank = real[b].long().cumsum(0) - 1
            js = [j for j, c in enumerate(columns) if real[b, c]]
            row_ids = ids[b, idx]
            row_images = images if bool((row_ids == self.image_token_id).any()) else []
            want = [int(rank[columns[j]]) for j in js]
            segments.append(Segment(self.cache.rows[b], row_ids, positions[:, b, idx], row_images, want))
            placed.append((b, js))
        outs = self.batcher.submit("language", segments)
        logits = torch.zeros(B, len(columns), outs[0].shape[-1])
        for (b, js), out in zip(placed, outs):
            logits[b, js] = out
        self.cache.columns += S
        self.mask = new_mask.cpu() if self.mask is None else torch.cat([self.mask, new_mask.cpu()], dim=1)
        self._holes = self._holes or not bool(real.all())
        self.n_tokens_forwarded += int(real.sum())
        self.n_forward_calls += 1
        if self.record_logits:
            for b in range(B):
                self._logits[b].append(logits[b][real[b]])
            logits = logits[:, [S - 1] if keep is None else list(keep)]
        if keep is None:
            self.last_logits = logits[:, -1]
            return None
        self.last_logits = None
        return logits


class Batcher:
    """Plays many episodes in lockstep over one model (see the module docstring).

    Args:
        model (`PreTrainedModel`): a model of a registered family (whole parameters: under ZeRO-3, inside `gathered_for_generation`).
        processor (`ProcessorMixin`): its processor.
    """

    def __init__(self, model, processor):
        self.model, self.processor = model, processor
        self.family = family_of(model)
        self.core = self.family.core
        self.device = next(model.parameters()).device
        self.image_token_id = self.family.image_token_id
        self._lm_forward = LanguageModelForward(model, self.family)
        self.stats = BatchStats()
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._live = 0
        self._error: BaseException | None = None
        self._server: int | None = None  # the thread running the rounds, while `map` runs
        self._local = threading.local()
        self._sessions: weakref.WeakSet = weakref.WeakSet()  # for the peak cache size

    def session(self, max_frames: int | None = None, record_logits: bool = False) -> BatchedSession:
        """A new `BatchedSession` on this batcher (outside `map`, its calls run at once, one session per round)."""
        session = BatchedSession(self, max_frames=max_frames, record_logits=record_logits)
        with self._cond:
            self._sessions.add(session)
        return session

    def map(self, items: Sequence, work: Callable, batch_size: int) -> list:
        """``[work(item) for item in items]``, at most `batch_size` at a time in lockstep; in item order.

        `work` runs in a worker thread and makes its model calls through `BatchedSession`s of this batcher. The
        first exception a `work` raises stops the others at their next model call and is raised here.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        items = list(items)
        queue, results = deque(enumerate(items)), [None] * len(items)
        workers = [
            threading.Thread(target=self._work, args=(slot, queue, work, results), daemon=True)
            for slot in range(min(batch_size, len(items)))
        ]
        self._live, self._error, self._server = len(workers), None, threading.get_ident()
        try:
            for worker in workers:
                worker.start()
            self._serve()
        finally:
            for worker in workers:
                worker.join()
            self._server = None
        if self._error is not None:
            raise self._error
        return results

    def submit(self, kind: str, payload):
        """Hand a model call to the next round and wait for its result (called by `BatchedSession`)."""
        request = _Request(kind, payload, getattr(self._local, "slot", 0))
        if self._server is None or threading.get_ident() == self._server:
            self._round([request])  # not inside `map`: run it now
            return request.result
        with self._cond:
            if self._error is not None:
                raise RuntimeError("the batch was stopped by another item's error") from self._error
            self._pending.append(request)
            self._cond.notify_all()
            while not request.done:
                self._cond.wait()
        if request.error is not None:
            raise request.error
        return request.result

    # ------------------------------------------------------------------ threads
    def _work(self, slot: int, queue: deque, work: Callable, results: list) -> None:
        self._local.slot = slot
        try:
            while True:
                with self._cond:
                    if self._error is not None or not queue:
                        return
                    index, item = queue.popleft()
                results[index] = work(item)
        except BaseException as err:
            with self._cond:
                if self._error is None:
                    self._error = err
        finally:
            with self._cond:
                self._live -= 1
                self._cond.notify_all()

    def _serve(self) -> None:
        while True:
            with self._cond:
                while self._live and len(self._pending) < self._live:
                    self._cond.wait()
                if not self._live:
                    return
                batch, self._pending = sorted(self._pending, key=lambda r: r.slot), []
            try:
                self._round(batch)
            except BaseException as err:
                for request in batch:
                    request.error = err
            with self._cond:
                for request in batch:
                    request.done = True
                self._cond.notify_all()

    # ------------------------------------------------------------------ rounds
    def _round(self, requests: list[_Request]) -> None:
        """One vision call for every vision request, one language-model call for every language request."""
        self.stats.rounds += 1
        with _eval_mode(self.model):
            vision = [r for r in requests if r.kind == "vision"]
            start = time.perf_counter()
            if vision:
                self._vision(vision)
            language = [r for r in requests if r.kind == "language"]
            middle = time.perf_counter()
            if language:
                self._language(language)
            self.stats.vision_s += middle - start
            self.stats.language_s += time.perf_counter() - middle
        with self._cond:
            live = [s.cache_bytes() for s in list(self._sessions)]
        self.stats.peak_cache_bytes = max(self.stats.peak_cache_bytes, sum(a for a, _ in live))
        self.stats.peak_cache_used = max(self.stats.peak_cache_used, sum(u for _, u in live))

    def _vision(self, requests: list[_Request]) -> None:
        pixels = torch.cat([r.payload[0] for r in requests]).to(self.device)
        grids = torch.cat([r.payload[1] for r in requests])
        images = self.family.image_features(pixels, grids)
        for request in requests:
            n = len(request.payload[1])
            request.result, images = images[:n], images[n:]
        self.stats.vision_calls += 1

    def _language(self, requests: list[_Request]) -> None:
        segments = [s for r in requests for s in r.payload]
        spans, select, start = [], [], 0
        for s in segments:
            spans.append(Span(s.row, start, len(s.ids)))
            select += [start + w for w in s.want]
            start += len(s.ids)
        ids = torch.cat([s.ids for s in segments])[None].to(self.device)
        positions = torch.cat([s.positions for s in segments], dim=1)[:, None].to(self.device)
        images = [im for s in segments for im in s.images]
        columns = torch.tensor(select, dtype=torch.long, device=self.device)
        text_config = self.core.config.get_text_config(decoder=True)
        with _native_gqa(self.device.type == "cpu"), packed_rows(text_config, spans):
            logits = self._lm_forward(ids, positions, images, columns).logits  # no cache: `packed_rows` holds them
        logits = logits[0].float().cpu()
        offset = 0
        for request in requests:
            outs = []
            for s in request.payload:
                outs.append(logits[offset : offset + len(s.want)])
                offset += len(s.want)
            request.result = outs
        self.stats.language_calls += 1
        self.stats.rows += len(segments)
        self.stats.tokens += start
        self.stats.rows_per_call.append(len(segments))
