"""A KV-cache streaming session: append user turns, decode assistant turns, never re-encode the past (docs/spec.md §9).

A session holds B rows (B = 1 for evaluation, B = G for the G rollouts of a GRPO group). All rows see the same
appended chunks (frames, timestamps, user text); their assistant turns differ. The rows share one rectangular
`DynamicCache`: a row that finished its turn early feeds a masked pad slot while the others decode, so the
cache has holes that a 2-D attention mask hides. Every token gets an explicit 3-D rope position that
continues the row's own sequence, so holes change nothing but the floating-point summation order.

Vision features are computed once per frame (shared by all rows) and kept for the frames still in context,
so the `max_frames` re-prefill (docs/spec.md §2, §9) re-runs the language model only.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .cache import new_cache
from .rope import chunk_positions, find_vl_core, next_position
from .sampling import SamplingParams, choose_tokens


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
class _LMOutput:
    logits: torch.Tensor
    cache: object


@dataclass
class _Image:
    grid_thw: torch.Tensor  # (3,)
    embeds: torch.Tensor  # (n_tokens, hidden)
    deepstack: list[torch.Tensor] | None  # Qwen3-VL: one tensor per deepstack layer


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
    """Incremental multi-turn decoding over a Qwen-VL model with a KV cache.

    Args:
        model (`PreTrainedModel`): a Qwen2.5-VL / Qwen3-VL model, possibly PEFT-wrapped. Under ZeRO-3 call the
            session inside `gathered_for_generation` (parameters must be whole).
        processor (`ProcessorMixin`): its processor (tokenizer + image processor).
        max_frames (`int`, *optional*): keep only the latest K images in context; older images are dropped (their
            text stays) with one re-prefill (docs/spec.md §2, §9).
        record_logits (`bool`, *optional*, defaults to `False`): keep the logits of every fed token (tests,
            debugging); otherwise only the last position's logits are computed.

    Example (B = 1; `fork(G)` after the shared prefix gives a batched group)::

        session = StreamingSession(model, processor)
        session.append("<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>hi<|im_end|>\\n"
                       "<|im_start|>assistant\\n", images=[frame])
        turn = session.generate(SamplingParams(max_new_tokens=16))
    """

    def __init__(self, model, processor, max_frames: int | None = None, record_logits: bool = False):
        if max_frames is not None and max_frames < 1:
            raise ValueError(f"max_frames must be >= 1 or None, got {max_frames}")
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.core = find_vl_core(model)
        self.max_frames = max_frames
        self.record_logits = record_logits
        config = self.core.config
        self.image_token_id = config.image_token_id
        self.vision_start_id = getattr(config, "vision_start_token_id", None)
        self.vision_end_id = getattr(config, "vision_end_token_id", None)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.device = next(model.parameters()).device
        # The modules `_forward` calls directly, skipping the wrapper's per-call checks. Only for the library's own
        # classes (a transformers model, or PEFT around one): any other wrapper's `forward` may change the logits.
        self._lm_head = None
        if type(model).__module__.startswith(("transformers.", "peft.")):
            self._embed = self.core.get_input_embeddings()
            self._language_model = getattr(self.core, "language_model", None)
            self._lm_head = model.get_output_embeddings() if self._language_model is not None else None

        self.batch_size = 1
        self.cache = None
        self.mask: torch.Tensor | None = None  # (B, cache_len) 1 = real token, 0 = hole
        self._holes = False  # whether `mask` has any 0
        self.next_pos = [0]  # per row: first free rope position
        self.tokens: list[list[int]] = [[]]  # per row: every token of the dialogue, in order
        self.n_fed = [0]  # per row: how many of `tokens` are in the cache (the rest are pending)
        # per row, one span per kept image: (start, end, what replaces tokens[start:end] once the image is evicted)
        self.spans: list[list[tuple[int, int, tuple]]] = [[]]
        self.images: list[_Image] = []  # kept images, shared by all rows, in order
        self.last_logits: torch.Tensor | None = None  # (B, V) next-token logits after the last fed token
        self._logits: list[list[torch.Tensor]] = [[]]
        self._generator: torch.Generator | None = None
        self._features_cls = None  # the ModelOutput class `get_image_features` returns
        # counters for benchmarks and tests
        self.n_rebuilds = 0
        self.n_images_encoded = 0
        self.n_tokens_forwarded = 0
        self.n_forward_calls = 0  # language-model calls (not counting the vision encoder)

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
        images = list(images)
        image_token = getattr(self.processor, "image_token", "<|image_pad|>")
        if text.count(image_token) != len(images):
            raise ValueError(
                f"chunk has {text.count(image_token)} {image_token} placeholders but {len(images)} images were given"
            )
        enc = self.processor(text=[text], images=images or None, return_tensors="pt")
        self.append_tokens(enc["input_ids"][0].tolist(), enc.get("pixel_values"), enc.get("image_grid_thw"))

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
            image_grid_thw (`torch.Tensor`, *optional*): their ``(n_images, 3)`` grids.
            text_only_ids (`Sequence[int]`, *optional*): the chunk as rendered *without* its (single) image, used
                in its place once `max_frames` evicts the image. By default the image's
                ``<|vision_start|>…<|vision_end|>`` block is cut out, which equals re-rendering whenever the
                tokenizer does not merge the text on both sides of the block.
        """
        chunk = [int(t) for t in input_ids]
        n_slots = sum(1 for a, b in zip([None] + chunk, chunk) if b == self.image_token_id and a != b)
        n_images = 0 if image_grid_thw is None else len(image_grid_thw)
        if n_slots != n_images:
            raise ValueError(f"chunk has {n_slots} image placeholder runs but {n_images} image grids")
        if text_only_ids is not None and n_images != 1:
            raise ValueError(f"text_only_ids needs a chunk with exactly one image, got {n_images}")
        new_images = self._encode(pixel_values, image_grid_thw) if n_images else []
        if text_only_ids is None:
            spans = self._image_spans(chunk)
        else:
            spans = [(0, len(chunk), tuple(int(t) for t in text_only_ids))]
        if self.max_frames is not None and len(self.images) + len(new_images) > self.max_frames:
            if len(new_images) > self.max_frames:
                raise ValueError(f"one chunk carries {len(new_images)} images but max_frames={self.max_frames}")
            self._rebuild(chunk, new_images, spans)
        else:
            self._extend(chunk, new_images, spans)

    def generate(self, params: SamplingParams | None = None) -> TurnOutput:
        """Decode one assistant turn for every row; its tokens join the dialogue (the stop token is fed lazily,
        with the next chunk; so is the last content token of a capped turn under
        `SamplingParams.defer_capped_stop`)."""
        params = params or SamplingParams()
        if self.last_logits is None:
            raise RuntimeError("generate() needs a chunk appended first (the previous turn is already decoded)")
        stops = params.stop_token_ids or [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        suppress = params.suppress_token_ids
        if suppress is None:
            config = self.core.config
            suppress = [self.image_token_id, getattr(config, "video_token_id", None)]
            suppress += [self.vision_start_id, self.vision_end_id]
            # embedding rows past the tokenizer (vocabularies are padded to a multiple of 64) have no text
            suppress += list(range(len(self.tokenizer), self.last_logits.shape[-1]))
        suppress = torch.tensor([t for t in suppress if t is not None and t not in stops], dtype=torch.long)
        if params.do_sample and self._generator is None:
            self._generator = torch.Generator(device=self.last_logits.device)
            # without a seed, draw one from the global RNG (reproducible under a global seed, and unlike
            # `torch.seed()` it does not reseed the caller's generator)
            seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item())
            self._generator.manual_seed(seed)

        B = self.batch_size
        out = TurnOutput([[] for _ in range(B)], [""] * B, [[] for _ in range(B)], [False] * B)
        done = [False] * B
        logits = self.last_logits
        while True:
            tokens, logprobs = choose_tokens(logits, params, suppress, self._generator)
            for b in range(B):
                if done[b]:
                    continue
                token, logprob = int(tokens[b]), float(logprobs[b])
                if len(out.token_ids[b]) == params.max_new_tokens and token not in stops:
                    token, out.truncated[b] = stops[0], True
                    logprob = float(torch.log_softmax(logits[b].float() / params.logprob_temperature, -1)[token])
                out.token_ids[b].append(token)
                out.logprobs[b].append(logprob)
                self.tokens[b].append(token)
                done[b] = token in stops
            if all(done):
                break
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
            logits = self.last_logits
            for b in range(B):
                if not done[b]:
                    self.n_fed[b] += 1
                    self.next_pos[b] += 1
        self.last_logits = None
        out.texts = [self.tokenizer.decode(t[:-1], skip_special_tokens=False) for t in out.token_ids]
        return out

    def fork(self, n: int) -> StreamingSession:
        """A new session with every row repeated `n` times (rows ``b*n .. b*n+n-1`` copy row b).

        Forking after the shared prefix is how a GRPO group is built: the frames' vision encoding and prefill run
        once, then the G rows decode as one batch. The original session is left unchanged.
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
        return new

    # ------------------------------------------------------------------ internals
    def _encode(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[_Image]:
        # Vision features of the new frames only; kept for re-prefills.
        with _eval_mode(self.model):
            feats = self.core.get_image_features(pixel_values.to(self.device), grids.to(self.device), return_dict=True)
        deep = getattr(feats, "deepstack_features", None)
        self._features_cls = type(feats)
        self.n_images_encoded += len(grids)
        return [
            _Image(grids[i], feats.pooler_output[i], None if deep is None else [layer[i] for layer in deep])
            for i in range(len(grids))
        ]

    def _image_spans(self, ids: list[int]) -> list[tuple[int, int, tuple]]:
        # An image block is its run of placeholders plus the vision start/end tokens around it; evicted, it
        # leaves nothing behind.
        spans, i = [], 0
        while i < len(ids):
            if ids[i] != self.image_token_id:
                i += 1
                continue
            j = i
            while j < len(ids) and ids[j] == self.image_token_id:
                j += 1
            a = i - 1 if i > 0 and ids[i - 1] == self.vision_start_id else i
            z = j + 1 if j < len(ids) and ids[j] == self.vision_end_id else j
            spans.append((a, z, ()))
            i = j
        return spans

    def _extend(self, chunk: list[int], new_images: list[_Image], spans: list[tuple]) -> None:
        grids = torch.stack([im.grid_thw for im in new_images]) if new_images else None
        rel = chunk_positions(self.core, torch.tensor(chunk), grids, 0)
        pending = [self.tokens[b][self.n_fed[b] :] for b in range(self.batch_size)]
        width = max(len(p) for p in pending)
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
            self.next_pos[b] = next_position(row_pos[:, hole:])
            self.spans[b] += [(a + len(self.tokens[b]), z + len(self.tokens[b]), r) for a, z, r in spans]
            self.tokens[b] += chunk
            self.n_fed[b] = len(self.tokens[b])
        self.images += new_images
        self._forward(torch.tensor(ids), torch.tensor(mask), torch.stack(pos, dim=1), new_images)

    def _rebuild(self, chunk: list[int], new_images: list[_Image], spans: list[tuple]) -> None:
        # Replace the oldest images' spans by their text-only form, then re-prefill history + chunk in one pass.
        n_evict = len(self.images) + len(new_images) - self.max_frames
        kept = self.images[n_evict:]
        kept_grids = torch.stack([im.grid_thw for im in kept]) if kept else None
        chunk_grids = torch.stack([im.grid_thw for im in new_images]) if new_images else None
        rel = chunk_positions(self.core, torch.tensor(chunk), chunk_grids, 0)
        histories, kept_spans = [], []
        for b in range(self.batch_size):
            hist, row_spans = _evict(self.tokens[b], self.spans[b], n_evict)
            histories.append(hist)
            kept_spans.append(row_spans)
        width = max(len(h) for h in histories)
        ids, mask, pos = [], [], []
        for b, hist in enumerate(histories):
            # holes sit between history and chunk, so every row's last column is a real token
            hole = width - len(hist)
            hist_pos = chunk_positions(self.core, torch.tensor(hist), kept_grids, 0)
            start = next_position(hist_pos)
            ids.append(hist + [self.pad_id] * hole + chunk)
            mask.append([1] * len(hist) + [0] * hole + [1] * len(chunk))
            pos.append(torch.cat([hist_pos, torch.full((3, hole), start), rel + start], dim=1))
            self.next_pos[b] = next_position(rel + start)
            self.tokens[b] = hist + chunk
            self.spans[b] = kept_spans[b] + [(a + len(hist), z + len(hist), r) for a, z, r in spans]
            self.n_fed[b] = len(self.tokens[b])
            self._logits[b] = []
        self.images = kept + new_images
        self.cache, self.mask, self._holes = None, None, False
        self.n_rebuilds += 1
        self._forward(torch.tensor(ids), torch.tensor(mask), torch.stack(pos, dim=1), self.images)

    def _forward(self, ids: torch.Tensor, new_mask: torch.Tensor, positions: torch.Tensor, images: list) -> None:
        """Run the model on `ids` ``(B, S)`` after the cache; `images` are the chunk's images in each row."""
        B = ids.shape[0]
        mask = new_mask if self.mask is None else torch.cat([self.mask, new_mask.to(self.mask.device)], dim=1)
        mask = mask.to(self.device)
        if self._holes or not bool(new_mask.all()):
            self._holes = True
        kwargs = {}
        if images:
            # every row carries the same images; the model scatters features row-major over placeholder slots
            # (the model's own output class, so `to_tuple` and deepstack fields behave as after `get_image_features`)
            features = {"pooler_output": [im.embeds for im in images] * B}
            if images[0].deepstack is not None:
                n_layers = len(images[0].deepstack)
                features["deepstack_features"] = [[im.deepstack[k] for im in images] * B for k in range(n_layers)]
            kwargs["mm_encoder_outputs"] = {"image": self._features_cls(**features)}
        if self.cache is None:
            self.cache = new_cache(self.core.config)
        attention_mask = mask if self._holes else None  # without holes the causal mask alone is right (SDPA fast path)
        with _eval_mode(self.model), _native_gqa(self.device.type == "cpu"):
            if self._lm_head is None or (images and images[0].deepstack is not None):
                # a model class of unknown `forward`, or a Qwen3-VL image chunk (the wrapper threads the deepstack
                # features into the decoder layers)
                out = self.model(
                    input_ids=ids.to(self.device),
                    attention_mask=attention_mask,
                    position_ids=positions.to(self.device),
                    cache=self.cache,
                    use_cache=True,
                    logits_to_keep=0 if self.record_logits else 1,
                    **kwargs,
                )
                logits = out.logits
            else:
                # Per-call Python is a large part of a step's cost on small models: the VL wrappers
                # re-check multimodal inputs at every call. Embedding + image scatter + language model + lm_head is
                # exactly what they compute when positions and image features are given.
                out = self._language_model_forward(ids.to(self.device), images, attention_mask, positions)
                logits = out.logits
        self.cache = out.cache
        self.mask = mask
        self.n_tokens_forwarded += int(new_mask.sum())
        self.n_forward_calls += 1
        if self.record_logits:
            for b in range(B):
                self._logits[b].append(logits[b][new_mask[b].bool().to(logits.device)].float())
        self.last_logits = logits[:, -1].float()

    def _language_model_forward(self, ids, images, attention_mask, positions):
        """The wrapper's forward without its per-call checks: embed, scatter image features, decode, lm_head."""
        embeds = self._embed(ids)
        if images:
            features = torch.cat([im.embeds for im in images] * ids.shape[0]).to(embeds.device, embeds.dtype)
            slots = ids == self.image_token_id
            if int(slots.sum()) * embeds.shape[-1] != features.numel():
                raise ValueError(f"{int(slots.sum())} image placeholder tokens but {len(features)} image features")
            embeds = embeds.masked_scatter(slots.unsqueeze(-1).expand_as(embeds), features)
        out = self._language_model(
            inputs_embeds=embeds,
            attention_mask=attention_mask,
            position_ids=positions.to(self.device),
            cache=self.cache,
            use_cache=True,
        )
        hidden = out.last_hidden_state if self.record_logits else out.last_hidden_state[:, -1:]
        return _LMOutput(self._lm_head(hidden), out.cache)


def _evict(tokens: list[int], spans: list[tuple], n: int) -> tuple[list[int], list[tuple]]:
    """`tokens` with the first `n` spans replaced by their text-only form; the other spans, re-indexed."""
    out, kept, i = [], [], 0
    for k, (a, z, replacement) in enumerate(spans):
        out += tokens[i:a]
        if k < n:
            out += list(replacement)
        else:
            kept.append((len(out), len(out) + z - a, replacement))
            out += tokens[a:z]
        i = z
    return out + tokens[i:], kept
