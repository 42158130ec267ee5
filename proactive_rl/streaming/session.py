"""A KV-cache streaming session: append user turns, decode assistant turns, never re-encode the past (docs/spec.md §9).

A session holds B rows (B = 1 for evaluation, B = G for the G rollouts of a GRPO group). All rows see the same
appended chunks (frames, timestamps, user text); their assistant turns differ. The rows share one rectangular
`DynamicCache`: a row that finished its turn early feeds a masked pad slot while the others decode, so the
cache has holes that a 2-D attention mask hides. Every token gets an explicit 3-D rope position that
continues the row's own sequence, so holes change nothing but the floating-point summation order.

Vision features are computed once per frame (shared by all rows; frames known in advance in one call per block)
and kept for the frames still in context, so the `max_frames` re-prefill (docs/spec.md §2, §9) re-runs the
language model only. `speculate` / `resolve` decide silent frames in the call that appends them
(`proactive_rl.streaming.speculation`).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from proactive_rl.models.families import ImageFeatures, family_of

from .attention import maskless_chunks
from .cache import new_cache
from .chunks import Chunk, evict, image_spans
from .forward import LanguageModelForward
from .sampling import SamplingParams, choose_tokens
from .speculation import check_draft, lay_out


@dataclass
class TurnOutput:
    """One decoded assistant turn of every row.

    Args:
        token_ids (`list[list[int]]`): per row, the tokens added to the dialogue, ending with a stop token.
        texts (`list[str]`): per row, the decoded turn without its stop token (special tokens such as the state
            tokens are kept).
        logprobs (`list[list[float]]`): per row and token, ``log_softmax(logits / T)`` of the chosen token
            (see `SamplingParams.logprob_temperature`).
        truncated (`list[bool]`): per row, whether the turn hit `max_new_tokens` and its stop token was forced.
    """

    token_ids: list[list[int]]
    texts: list[str]
    logprobs: list[list[float]]
    truncated: list[bool]


@dataclass
class _Fed:
    # Where a fed sequence landed: per row, the index in `tokens` and the rope position of its first token; the
    # cache column of its first token (the same in every row); its positions relative to its start.
    token_base: list[int]
    pos_base: list[int]
    col_base: int
    rel: torch.Tensor  # (3, S)
    logits: torch.Tensor | None  # (B, len(keep), V) at the requested offsets


@dataclass
class _Speculation:
    # A fed block whose drafts are not yet checked (see `speculate`).
    draft: list[int]
    fed: _Fed
    ends: list[int]  # per frame: the offset of its draft in the fed block
    n_images: list[int]  # per frame
    logits: torch.Tensor  # (B, K, len(draft), V): the logits deciding each draft token


def next_position(positions: torch.Tensor) -> int:
    """The first free position after a chunk: its maximum position + 1 (what the rope index continues from)."""
    return int(positions.max()) + 1


@contextlib.contextmanager
def _eval_mode(model: torch.nn.Module):
    # Rollouts must not see dropout (LoRA dropout included); the caller's mode is restored afterwards.
    was_training = model.training
    if was_training:  # (eval() walks every module; skip it when already in eval mode)
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if was_training:
            model.train()


@contextlib.contextmanager
def _native_gqa(enabled: bool):
    # transformers' SDPA path repeats the grouped K/V heads (a copy of the whole cache, every layer, every call)
    # whenever an attention mask is passed, which every chunk appended to a cache has. On CPU, torch's SDPA takes
    # grouped heads with a mask natively (`enable_gqa`); transformers reads this switch at each attention call.
    # Measured on the tiny model at T=256: the engine ~25% faster. Not on CUDA, where a mask + GQA falls back to
    # the math kernel.
    name = "TRANSFORMERS_SDPA_FORCE_GQA"
    if not enabled or os.environ.get(name) == "1":
        yield
        return
    saved = os.environ.get(name)
    os.environ[name] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


class StreamingSession:
    """Incremental multi-turn decoding over a vision-language model with a KV cache.

    Args:
        model (`PreTrainedModel`): a model of a registered family (`proactive_rl.models.families`: Qwen2.5-VL,
            Qwen3-VL, LLaVA-NeXT), possibly PEFT-wrapped. Under ZeRO-3 call the session inside
            `gathered_for_generation` (parameters must be whole).
        processor (`ProcessorMixin`): its processor (tokenizer + image processor).
        max_frames (`int`, *optional*): keep only the latest K images in context; older images are dropped (their
            text stays) with one re-prefill (docs/spec.md §2, §9).
        record_logits (`bool`, *optional*, defaults to `False`): keep the logits of every fed token (tests,
            debugging); otherwise only the logits that decide a token are computed.

    Example (B = 1; `fork(G)` after the shared prefix gives a batched group)::

        session = StreamingSession(model, processor)
        session.append("<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>hi<|im_end|>\\n"
                       "<|im_start|>assistant\\n", images=[frame])
        turn = session.generate(SamplingParams(max_new_tokens=16))

    Speculative silence (`speculate` + `resolve`, or `step`): frames' chunks fed with a silent-turn draft after
    each, the drafts checked against the model's own choices; see `proactive_rl.streaming.speculation`.
    """

    def __init__(self, model, processor, max_frames: int | None = None, record_logits: bool = False):
        if max_frames is not None and max_frames < 1:
            raise ValueError(f"max_frames must be >= 1 or None, got {max_frames}")
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.family = family_of(model)
        self.core = self.family.core
        self.max_frames = max_frames
        self.record_logits = record_logits
        self.image_token_id = self.family.image_token_id
        self.vision_start_id, self.vision_end_id = self.family.image_delimiters
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.device = next(model.parameters()).device
        self._lm_forward = LanguageModelForward(model, self.family)

        self.batch_size = 1
        self.cache = None
        self.mask: torch.Tensor | None = None  # (B, cache_len) 1 = real token, 0 = hole
        self._holes = False  # whether `mask` has any 0
        self.next_pos = [0]  # per row: first free rope position
        self.tokens: list[list[int]] = [[]]  # per row: every token of the dialogue, in order
        self.n_fed = [0]  # per row: how many of `tokens` are in the cache (the rest are pending)
        # per row, one span per kept image: (start, end, what replaces tokens[start:end] once the image is evicted)
        self.spans: list[list[tuple[int, int, tuple]]] = [[]]
        self.images: list[ImageFeatures] = []  # kept images, shared by all rows, in order
        self.last_logits: torch.Tensor | None = None  # (B, V) next-token logits after the last fed token
        self._logits: list[list[torch.Tensor]] = [[]]
        self._generator: torch.Generator | None = None
        self._speculation: _Speculation | None = None
        # counters for benchmarks and tests
        self.n_rebuilds = 0
        self.n_images_encoded = 0
        self.n_vision_calls = 0
        self.n_tokens_forwarded = 0
        self.n_forward_calls = 0  # language-model calls (not counting the vision encoder)
        self.n_drafts = 0  # frames decided from a draft (kept or rejected)
        self.n_drafts_kept = 0  # of which every row kept the whole draft

    # ------------------------------------------------------------------ public API
    @property
    def num_images(self) -> int:
        return len(self.images)

    def token_ids(self, row: int = 0) -> list[int]:
        """Every token of `row`'s dialogue so far (including a pending stop token not yet in the cache)."""
        return list(self.tokens[row])

    def image_grids(self) -> torch.Tensor | None:
        """``image_grid_thw`` of the images in context, in order (None when there are none)."""
        return torch.stack([im.grid_thw for im in self.images]) if self.images else None

    def logits(self, row: int = 0) -> torch.Tensor:
        """``(n_fed, V)`` logits of every token of `row` in the cache (needs ``record_logits=True``); after a
        `max_frames` re-prefill, of the rebuilt sequence."""
        if not self.record_logits:
            raise RuntimeError("StreamingSession(record_logits=True) is needed to read per-token logits")
        return torch.cat(self._logits[row], dim=0)

    def append(self, text: str, images: Sequence = ()) -> None:
        """Append one chunk (a user turn, or any dialogue text) to every row.

        Args:
            text (`str`): the chunk, with one ``<|image_pad|>`` placeholder (the processor's image token) per image.
            images (`Sequence`): the chunk's frames (``H×W×3`` uint8 arrays or PIL images), in placeholder order.
        """
        self.append_chunk(self.chunk(text, images))

    def chunk(self, text: str, images: Sequence = ()) -> Chunk:
        """`text` and its frames tokenised and processed into a `Chunk` (see `append`)."""
        images = list(images)
        image_token = getattr(self.processor, "image_token", "<|image_pad|>")
        if text.count(image_token) != len(images):
            raise ValueError(
                f"chunk has {text.count(image_token)} {image_token} placeholders but {len(images)} images were given"
            )
        enc = self.processor(text=[text], images=images or None, return_tensors="pt")
        return Chunk(enc["input_ids"][0].tolist(), enc.get("pixel_values"), enc.get(self.family.image_key))

    def chunks(self, texts: Sequence[str], images: Sequence[Sequence]) -> list[Chunk]:
        """Several `chunk`s made by one processor call (frames known in advance: one image-processing call)."""
        texts, images = list(texts), [list(i) for i in images]
        if len(texts) != len(images):
            raise ValueError(f"{len(texts)} chunk texts but {len(images)} image lists")
        image_token = getattr(self.processor, "image_token", "<|image_pad|>")
        for text, frames in zip(texts, images):
            if text.count(image_token) != len(frames):
                raise ValueError(
                    f"a chunk has {text.count(image_token)} {image_token} placeholders but {len(frames)} images"
                )
        flat = [f for frames in images for f in frames]
        enc = self.processor(text=texts, images=flat or None)
        pixels, grids = enc.get("pixel_values"), enc.get(self.family.image_key)
        out = []
        for ids, frames in zip(enc["input_ids"], images):
            chunk = Chunk(list(ids))
            if frames:
                rows = self.family.pixel_rows(grids[: len(frames)])
                chunk.pixel_values, chunk.image_grid_thw = pixels[:rows], grids[: len(frames)]
                pixels, grids = pixels[rows:], grids[len(frames) :]
            out.append(chunk)
        return out

    def append_tokens(
        self,
        input_ids: Sequence[int],
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        text_only_ids: Sequence[int] | None = None,
    ) -> None:
        """Append one already tokenised chunk to every row (e.g. from `proactive_rl.chat.render_user_turn`).

        Args:
            input_ids (`Sequence[int]`): the chunk, every image's placeholder tokens expanded.
            pixel_values (`torch.Tensor`, *optional*): the processed images of the chunk.
            image_grid_thw (`torch.Tensor`, *optional*): their rows of the family's per-image field
                (`ModelFamily.image_key`: ``(n_images, 3)`` grids for Qwen-VL, image sizes for LLaVA-NeXT).
            text_only_ids (`Sequence[int]`, *optional*): the chunk as rendered *without* its (single) image, used
                in its place once `max_frames` evicts the image. By default the image's
                ``<|vision_start|>…<|vision_end|>`` block is cut out, which equals re-rendering whenever the
                tokenizer does not merge the text on both sides of the block.
        """
        self.append_chunk(Chunk(input_ids, pixel_values, image_grid_thw, text_only_ids))

    def append_chunk(self, chunk: Chunk) -> None:
        """Append a `Chunk` to every row (its frames encoded unless it carries their features already)."""
        self._check_idle()
        self.encode([chunk])
        ids, spans = self._prepare(chunk)
        self._feed(ids, chunk.images, spans)

    def encode(self, chunks: Sequence[Chunk]) -> None:
        """Encode the frames of every chunk that lacks vision features, in one vision call, and store the features in
        the chunks (frames known in advance: one call per block instead of one per frame)."""
        todo = [c for c in chunks if c.images is None and c.n_images]
        if todo:
            pixels = torch.cat([c.pixel_values for c in todo])
            features = self._encode(pixels, torch.cat([c.image_grid_thw for c in todo]))
            for c in todo:
                c.images, features = features[: c.n_images], features[c.n_images :]
        for c in chunks:
            if c.images is None:  # a text chunk
                c.images = []

    def generate(self, params: SamplingParams | None = None) -> TurnOutput:
        """Decode one assistant turn for every row; its tokens join the dialogue (the stop token is fed lazily,
        with the next chunk; so is the last content token of a capped turn under
        `SamplingParams.defer_capped_stop`)."""
        params = params or SamplingParams()
        if self._speculation is not None:
            raise RuntimeError("a speculated block is pending: call resolve() to decide its turns")
        if self.last_logits is None:
            raise RuntimeError("generate() needs a chunk appended first (the previous turn is already decoded)")
        stops, suppress = self._turn_setup(params, self.last_logits.shape[-1])
        out, done = self._new_turn(), [False] * self.batch_size
        tokens, logprobs = choose_tokens(self.last_logits, params, suppress, self._generator)
        for b in range(self.batch_size):
            done[b] = self._take(out, b, int(tokens[b]), float(logprobs[b]), self.last_logits[b], params, stops)
        return self._finish_turn(out, done, params, stops, suppress)

    def speculate(self, chunks: Sequence[Chunk], draft: Sequence[int]) -> int:
        """Append `chunks` to every row, each followed by `draft` (a whole assistant turn, e.g. `silent_draft`), in
        one language-model call; `resolve` then decides the turns. Returns how many chunks were fed: all of them,
        unless `max_frames` would evict an image within the block (a frame-by-frame engine would evict between
        frames), in which case the chunks that fit, or the first one alone with its re-prefill.

        The frames of all `chunks` are encoded (one vision call for those without features), fed or not.
        """
        self._check_idle()
        chunks, draft = list(chunks), [int(t) for t in draft]
        if not chunks or not draft:
            raise ValueError("speculate() needs at least one chunk and a non-empty draft")
        self.encode(chunks)
        if self.max_frames is not None:
            fit, room = 0, self.max_frames - len(self.images)
            while fit < len(chunks) and chunks[fit].n_images <= room:
                room -= chunks[fit].n_images
                fit += 1
            chunks = chunks[: max(fit, 1)]
        block = lay_out(chunks, draft, lambda c: self._prepare(c)[1])
        fed = self._feed(block.ids, [im for c in chunks for im in c.images], block.spans, block.keep)
        B, V = self.batch_size, fed.logits.shape[-1]
        logits = fed.logits.view(B, len(chunks), len(draft), V)
        self._speculation = _Speculation(draft, fed, block.ends, block.n_images, logits)
        return len(chunks)

    def resolve(self, params: SamplingParams | None = None) -> list[TurnOutput]:
        """Decide the turns of the block `speculate` fed: per frame, every row checks the draft token by token
        (`choose_tokens` with the draft); frames whose drafts every row kept are done. At the first frame where a
        row rejects a draft token, the cache is rolled back to that token (in every row; the frames after it are
        dropped), the rows that rejected decode the rest of their turn, and the turns up to that frame are returned
        (one `TurnOutput` per frame decided, in order; the caller appends the dropped frames again).
        """
        params = params or SamplingParams()
        spec, self._speculation = self._speculation, None
        if spec is None:
            raise RuntimeError("resolve() needs a block fed by speculate()")
        stops, suppress = self._turn_setup(params, spec.logits.shape[-1])
        check_draft(spec.draft, stops)
        B, K, d = spec.logits.shape[:3]
        turns = []
        for frame in range(K):
            out, kept = self._new_turn(), [0] * B
            rows = list(range(B))  # the rows still on the draft
            for j, token in enumerate(spec.draft):
                if not rows:
                    break
                logits = spec.logits[rows, frame, j]
                if params.defer_capped_stop and len(stops) == 1 and j == params.max_new_tokens:
                    # every live row is at the cap (they all said j tokens): the stop is forced, as in `generate`
                    chosen, logprobs = torch.full((len(rows),), stops[0]), torch.full((len(rows),), float("nan"))
                    for b in rows:
                        out.truncated[b] = True
                else:
                    draft = torch.full((len(rows),), token)
                    chosen, logprobs = choose_tokens(logits, params, suppress, self._generator, draft=draft)
                still = []
                for r, b in enumerate(rows):
                    done = self._take(out, b, int(chosen[r]), float(logprobs[r]), logits[r], params, stops, False)
                    if out.token_ids[b][-1] == token:
                        kept[b] += 1
                        if not done:
                            still.append(b)
                rows = still
            turns.append(out)
            self.n_drafts += 1
            if all(k == d for k in kept):
                self.n_drafts_kept += 1
                out.texts = self._texts(out)
                continue
            self._roll_back(spec, frame, kept)
            done = [False] * B
            for b in range(B):
                done[b] = kept[b] == d or out.token_ids[b][-1] in stops
                if kept[b] < d:
                    self.tokens[b].append(out.token_ids[b][-1])  # the model's own choice, fed next
            self._finish_turn(out, done, params, stops, suppress)
            return turns
        return turns

    def step(
        self, chunks: Sequence[Chunk], params: SamplingParams | None = None, draft: Sequence[int] | None = None
    ) -> list[TurnOutput]:
        """Append chunks and decode the turn after each: with a `draft`, `speculate` + `resolve` (the turns of the
        first n >= 1 chunks come back; append the others again); without, one chunk at a time (all come back)."""
        if draft is not None:
            self.speculate(chunks, draft)
            return self.resolve(params)
        self.encode(chunks)
        turns = []
        for chunk in chunks:
            self.append_chunk(chunk)
            turns.append(self.generate(params))
        return turns

    def fork(self, n: int) -> StreamingSession:
        """A new session with every row repeated `n` times (rows ``b*n .. b*n+n-1`` copy row b).

        Forking after the shared prefix is how a GRPO group is built: the frames' vision encoding and prefill run
        once, then the G rows decode as one batch. A block fed by `speculate` and not yet resolved is forked too:
        its rows then check the drafts independently. The original session is left unchanged.
        """
        if n < 1:
            raise ValueError(f"fork(n) needs n >= 1, got {n}")
        new = copy.copy(self)

        def rep(rows):
            return [copy.copy(r) for r in rows for _ in range(n)]

        new.batch_size = self.batch_size * n
        new.tokens, new.n_fed, new.spans = rep(self.tokens), rep(self.n_fed), rep(self.spans)
        new.next_pos = rep(self.next_pos)
        new._logits = rep(self._logits)
        new.images = list(self.images)
        if self.cache is not None:
            new.cache = copy.deepcopy(self.cache)
            new.cache.batch_repeat_interleave(n)
            new.mask = self.mask.repeat_interleave(n, dim=0)
        if self.last_logits is not None:
            new.last_logits = self.last_logits.repeat_interleave(n, dim=0)
        if self._generator is not None:
            new._generator = torch.Generator(device=self._generator.device)
            new._generator.set_state(self._generator.get_state())
        spec = self._speculation
        if spec is not None:
            fed = _Fed(rep(spec.fed.token_base), rep(spec.fed.pos_base), spec.fed.col_base, spec.fed.rel, None)
            logits = spec.logits.repeat_interleave(n, dim=0)
            new._speculation = _Speculation(spec.draft, fed, spec.ends, spec.n_images, logits)
        return new

    # ------------------------------------------------------------------ decoding
    def _check_idle(self) -> None:
        if self._speculation is not None:
            raise RuntimeError("a speculated block is pending: call resolve() before appending")

    def _turn_setup(self, params: SamplingParams, vocab: int) -> tuple[list[int], torch.Tensor]:
        """The stop tokens and the suppressed tokens of a turn; seeds the sampling generator on first use."""
        stops = params.stop_token_ids or [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        suppress = params.suppress_token_ids
        if suppress is None:
            suppress = self.family.vision_token_ids()
            # embedding rows past the tokenizer (vocabularies are padded to a multiple of 64) have no text
            suppress += list(range(len(self.tokenizer), vocab))
        suppress = torch.tensor([t for t in suppress if t is not None and t not in stops], dtype=torch.long)
        if params.do_sample and self._generator is None:
            device = self.last_logits.device if self.last_logits is not None else self.device
            self._generator = torch.Generator(device=device)
            # without a seed, draw one from the global RNG (reproducible under a global seed, and unlike
            # `torch.seed()` it does not reseed the caller's generator)
            seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item())
            self._generator.manual_seed(seed)
        return stops, suppress

    def _new_turn(self) -> TurnOutput:
        B = self.batch_size
        return TurnOutput([[] for _ in range(B)], [""] * B, [[] for _ in range(B)], [False] * B)

    def _take(self, out, b, token, logprob, logits, params, stops, into_dialogue=True) -> bool:
        """Add row b's chosen token to its turn (at the cap, a stop is forced); whether the turn is over."""
        if len(out.token_ids[b]) == params.max_new_tokens and token not in stops:
            token, out.truncated[b] = stops[0], True
            logprob = float(torch.log_softmax(logits.float() / params.logprob_temperature, -1)[token])
        out.token_ids[b].append(token)
        out.logprobs[b].append(logprob)
        if into_dialogue:
            self.tokens[b].append(token)
        return token in stops

    def _texts(self, out: TurnOutput) -> list[str]:
        return [self.tokenizer.decode(t[:-1], skip_special_tokens=False) for t in out.token_ids]

    def _finish_turn(self, out, done, params, stops, suppress) -> TurnOutput:
        """Decode until every row's turn is over; each live row's last chosen token is pending (not yet fed)."""
        B = self.batch_size
        while not all(done):
            live_rows = [b for b in range(B) if not done[b]]
            if params.defer_capped_stop and len(stops) == 1:
                if all(len(out.token_ids[b]) == params.max_new_tokens for b in live_rows):
                    # The stop is forced next whatever the logits say: skip the forward that would only produce
                    # them; the last content token and the stop are fed with the next chunk.
                    for b in live_rows:
                        out.token_ids[b].append(stops[0])
                        out.logprobs[b].append(float("nan"))
                        out.truncated[b] = True
                        self.tokens[b].append(stops[0])
                    break
            ids = torch.tensor([[self.pad_id if done[b] else out.token_ids[b][-1]] for b in range(B)])
            live = torch.tensor([[0 if done[b] else 1] for b in range(B)])
            pos = torch.tensor(self.next_pos).view(1, B, 1).expand(3, B, 1)
            self._forward(ids, live, pos, [])
            for b in live_rows:
                self.n_fed[b] += 1
                self.next_pos[b] += 1
            tokens, logprobs = choose_tokens(self.last_logits, params, suppress, self._generator)
            for b in live_rows:
                done[b] = self._take(out, b, int(tokens[b]), float(logprobs[b]), self.last_logits[b], params, stops)
        self.last_logits = None
        out.texts = self._texts(out)
        return out

    def _roll_back(self, spec: _Speculation, frame: int, kept: list[int]) -> None:
        """Keep, in row b, the fed block up to `frame`'s turn start plus the kept[b] draft tokens it kept."""
        fed, B = spec.fed, self.batch_size
        cuts = [spec.ends[frame] + kept[b] for b in range(B)]
        cols = fed.col_base + max(cuts)
        self.cache.crop(cols - self.cache.get_seq_length())
        self.mask = self.mask[:, :cols].clone()
        for b in range(B):
            self.mask[b, fed.col_base + cuts[b] :] = 0
        self._holes = self._holes or min(cuts) < max(cuts)
        dropped = sum(spec.n_images[frame + 1 :])
        self.images = self.images[: len(self.images) - dropped]
        S = fed.rel.shape[1]
        for b in range(B):
            end = fed.token_base[b] + cuts[b]
            self.tokens[b] = self.tokens[b][:end]
            self.n_fed[b] = end
            self.spans[b] = [s for s in self.spans[b] if s[0] < end]
            self.next_pos[b] = fed.pos_base[b] + next_position(fed.rel[:, : cuts[b]])
            if self.record_logits:
                self._logits[b][-1] = self._logits[b][-1][: len(self._logits[b][-1]) - (S - cuts[b])]
        self.last_logits = None

    # ------------------------------------------------------------------ feeding
    def _prepare(self, chunk: Chunk) -> tuple[list[int], list[tuple]]:
        """A chunk's ids and image spans, checked."""
        ids = [int(t) for t in chunk.input_ids]
        n_slots = sum(1 for a, b in zip([None] + ids, ids) if b == self.image_token_id and a != b)
        if n_slots != chunk.n_images:
            raise ValueError(f"chunk has {n_slots} image placeholder runs but {chunk.n_images} image grids")
        if chunk.text_only_ids is not None:
            if chunk.n_images != 1:
                raise ValueError(f"text_only_ids needs a chunk with exactly one image, got {chunk.n_images}")
            return ids, [(0, len(ids), tuple(int(t) for t in chunk.text_only_ids))]
        return ids, image_spans(ids, self.image_token_id, self.vision_start_id, self.vision_end_id)

    def _feed(self, ids: list[int], new_images, spans: list[tuple], keep: list[int] | None = None) -> _Fed:
        """Append `ids` (carrying `new_images`, or their chunk's frames to encode) to every row, re-prefilling
        first when `max_frames` evicts; `keep`: offsets into `ids` whose logits to return."""
        if new_images is None:
            raise RuntimeError("a chunk's frames must be encoded first (StreamingSession.encode)")
        if self.max_frames is not None and len(self.images) + len(new_images) > self.max_frames:
            if len(new_images) > self.max_frames:
                raise ValueError(f"one chunk carries {len(new_images)} images but max_frames={self.max_frames}")
            return self._rebuild(ids, new_images, spans, keep)
        return self._extend(ids, new_images, spans, keep)

    def _encode(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[ImageFeatures]:
        # Vision features of new frames only; kept for re-prefills.
        with _eval_mode(self.model):
            images = self.family.image_features(pixel_values.to(self.device), grids)
        self.n_images_encoded += len(grids)
        self.n_vision_calls += 1
        return images

    def _extend(self, chunk: list[int], new_images: list, spans: list[tuple], keep: list[int] | None) -> _Fed:
        grids = torch.stack([im.grid_thw for im in new_images]) if new_images else None
        rel = self.family.positions(torch.tensor(chunk), grids, 0)
        pending = [self.tokens[b][self.n_fed[b] :] for b in range(self.batch_size)]
        width = max(len(p) for p in pending)
        fed = _Fed([], [], width + (0 if self.mask is None else self.mask.shape[1]), rel, None)
        ids, mask, pos = [], [], []
        for b, p in enumerate(pending):
            # pending tokens (a stop token) are text: one shared position each; holes pad the shorter rows
            hole = width - len(p)
            start = self.next_pos[b]
            ids.append([self.pad_id] * hole + p + chunk)
            mask.append([0] * hole + [1] * (len(p) + len(chunk)))
            text_pos = torch.arange(start, start + len(p)).view(1, -1).expand(3, -1)
            row_pos = torch.cat([torch.full((3, hole), start), text_pos, rel + start + len(p)], dim=1)
            pos.append(row_pos)
            fed.token_base.append(len(self.tokens[b]))
            fed.pos_base.append(start + len(p))
            self.next_pos[b] = next_position(row_pos[:, hole:])
            self.spans[b] += [(a + len(self.tokens[b]), z + len(self.tokens[b]), r) for a, z, r in spans]
            self.tokens[b] += chunk
            self.n_fed[b] = len(self.tokens[b])
        self.images += new_images
        keep = None if keep is None else [width + k for k in keep]
        fed.logits = self._forward(torch.tensor(ids), torch.tensor(mask), torch.stack(pos, dim=1), new_images, keep)
        return fed

    def _rebuild(self, chunk: list[int], new_images: list, spans: list[tuple], keep: list[int] | None) -> _Fed:
        # Replace the oldest images' spans by their text-only form, then re-prefill history + chunk in one pass.
        n_evict = len(self.images) + len(new_images) - self.max_frames
        kept = self.images[n_evict:]
        kept_grids = torch.stack([im.grid_thw for im in kept]) if kept else None
        chunk_grids = torch.stack([im.grid_thw for im in new_images]) if new_images else None
        rel = self.family.positions(torch.tensor(chunk), chunk_grids, 0)
        histories, kept_spans = [], []
        for b in range(self.batch_size):
            hist, row_spans = evict(self.tokens[b], self.spans[b], n_evict)
            histories.append(hist)
            kept_spans.append(row_spans)
        width = max(len(h) for h in histories)
        fed = _Fed([], [], width, rel, None)
        ids, mask, pos = [], [], []
        for b, hist in enumerate(histories):
            # holes sit between history and chunk, so every row's last column is a real token
            hole = width - len(hist)
            hist_pos = self.family.positions(torch.tensor(hist), kept_grids, 0)
            start = next_position(hist_pos)
            ids.append(hist + [self.pad_id] * hole + chunk)
            mask.append([1] * len(hist) + [0] * hole + [1] * len(chunk))
            pos.append(torch.cat([hist_pos, torch.full((3, hole), start), rel + start], dim=1))
            fed.token_base.append(len(hist))
            fed.pos_base.append(start)
            self.next_pos[b] = next_position(rel + start)
            self.tokens[b] = hist + chunk
            self.spans[b] = kept_spans[b] + [(a + len(hist), z + len(hist), r) for a, z, r in spans]
            self.n_fed[b] = len(self.tokens[b])
            self._logits[b] = []
        self.images = kept + new_images
        self.cache, self.mask, self._holes = None, None, False
        self.n_rebuilds += 1
        keep = None if keep is None else [width + k for k in keep]
        images = self.images
        fed.logits = self._forward(torch.tensor(ids), torch.tensor(mask), torch.stack(pos, dim=1), images, keep)
        return fed

    def _forward(self, ids, new_mask, positions, images: list, keep: list[int] | None = None) -> torch.Tensor | None:
        """Run the model on `ids` ``(B, S)`` after the cache; `images` are the chunk's images in each row. Without
        `keep`, sets `last_logits` (the last column's); with it, returns ``(B, len(keep), V)`` at those columns."""
        B, S = ids.shape
        mask = new_mask if self.mask is None else torch.cat([self.mask, new_mask.to(self.mask.device)], dim=1)
        mask = mask.to(self.device)
        if self._holes or not bool(new_mask.all()):
            self._holes = True
        columns = torch.tensor([S - 1] if keep is None else keep, dtype=torch.long, device=self.device)
        if self.cache is None:
            self.cache = new_cache(self.core.config)
        attention_mask = mask if self._holes else None  # without holes the causal mask alone is right (SDPA fast path)
        text_config = self.core.config.get_text_config(decoder=True)
        cpu = self.device.type == "cpu"
        with _eval_mode(self.model), _native_gqa(cpu), maskless_chunks(text_config, cpu and attention_mask is None):
            # every row carries the same images; the model scatters features row-major over placeholder slots
            out = self._lm_forward(
                ids.to(self.device),
                positions,
                images * B,
                None if self.record_logits else columns,
                attention_mask=attention_mask,
                cache=self.cache,
            )
        logits = out.logits
        self.cache = out.cache
        self.mask = mask
        self.n_tokens_forwarded += int(new_mask.sum())
        self.n_forward_calls += 1
        if self.record_logits:
            for b in range(B):
                self._logits[b].append(logits[b][new_mask[b].bool().to(logits.device)].float())
            logits = logits[:, columns]
        if keep is None:
            self.last_logits = logits[:, -1].float()
            return None
        self.last_logits = None
        return logits.float()
