"""Sampling parameters and one token-choice step for the streaming engine (docs/spec.md §9)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class SamplingParams:
    """How one assistant turn is decoded.

    Args:
        max_new_tokens (`int`, *optional*, defaults to `32`): per-turn cap on content tokens. A turn that reaches it
            is closed with the first stop token (forced, flagged in `TurnOutput.truncated`), so the dialogue stays
            well formed.
        do_sample (`bool`, *optional*, defaults to `False`): sample instead of greedy argmax.
        temperature (`float`, *optional*, defaults to `1.0`): softmax temperature when sampling.
        top_p (`float`, *optional*, defaults to `1.0`): nucleus mass kept when sampling (1.0 = off).
        top_k (`int`, *optional*, defaults to `0`): keep the k most likely tokens when sampling (0 = off).
        stop_token_ids (`list[int]`, *optional*): tokens that end a turn; defaults to the tokenizer's ``<|im_end|>``.
        suppress_token_ids (`list[int]`, *optional*): never emitted; defaults to the vision placeholder tokens
            (``<|vision_start|>``, ``<|vision_end|>``, ``<|image_pad|>``, ``<|video_pad|>``), which in generated text
            would be mistaken for image slots when the session re-prefills, and the padding rows of the embedding
            past the tokenizer's vocabulary (ids without text).
        seed (`int`, *optional*): seeds the session's sampling generator at its first sampled turn (reproducible
            rollouts); without it the seed is drawn from torch's global RNG.
        defer_capped_stop (`bool`, *optional*, defaults to `False`): when every live row reaches `max_new_tokens`
            and there is a single stop token, that stop is known without the model, so the last content token is
            not fed on its own: it joins the next chunk's forward with the stop (one model call less per capped
            turn). The stop's log-probability is then unknown (``nan``) and `TurnOutput.truncated` means "hit the
            cap". For evaluation, where only the text is used; rollouts that train on log-probabilities keep it off.
    """

    max_new_tokens: int = 32
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: list[int] | None = None
    suppress_token_ids: list[int] | None = None
    seed: int | None = None
    defer_capped_stop: bool = False

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and not self.temperature > 0:
            raise ValueError(f"SamplingParams.temperature must be > 0 when sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"SamplingParams.top_k must be >= 0, got {self.top_k}")

    @property
    def logprob_temperature(self) -> float:
        """The temperature the recorded log-probabilities use: TRL's GRPO scores ``logits / temperature``."""
        return self.temperature if self.do_sample else 1.0


def _scores(logits: torch.Tensor, params: SamplingParams, suppress: torch.Tensor | None) -> torch.Tensor:
    """The scores a token is chosen from: suppressed tokens at -inf; when sampling, divided by the temperature and
    cut to the top-k / top-p support (their softmax is the sampling distribution)."""
    scores = logits.clone()
    if suppress is not None and suppress.numel():
        scores[:, suppress.to(scores.device)] = float("-inf")
    if not params.do_sample:
        return scores
    scores = scores / params.temperature
    if params.top_k:
        kth = torch.topk(scores, min(params.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
        cum = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        # drop a token when the mass before it already reaches top_p (the most likely token always stays)
        drop_sorted = (cum - torch.softmax(sorted_scores, dim=-1)) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


def choose_tokens(
    logits: torch.Tensor,
    params: SamplingParams,
    suppress: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    draft: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row of ``logits`` ``(B, V)``; return ``(tokens (B,), logprobs (B,))``.

    The log-probability is that of the chosen token under ``log_softmax(logits / T)`` of the *unfiltered*
    logits (T = `SamplingParams.logprob_temperature`), which is what a trainer recomputes; top-k/top-p and
    suppression only restrict the choice.

    With a ``draft`` token per row ``(B,)`` (speculative decoding, docs/spec.md §9), the choice has the same
    distribution as without, but prefers the draft: greedy takes the argmax as always (the draft is kept exactly
    when it is the argmax); sampling keeps the draft with its probability p(d) and otherwise draws from the
    residual ``max(0, p - q) / Z``, which for a draft q that is a point mass on d is p with d removed and
    renormalised. P(d) = p(d), and P(x) = (1 - p(d)) p(x) / (1 - p(d)) = p(x) for x ≠ d.
    """
    logits = logits.float()
    logprobs_all = torch.log_softmax(logits / params.logprob_temperature, dim=-1)
    scores = _scores(logits, params, suppress)
    if not params.do_sample:
        tokens = scores.argmax(dim=-1)
    elif draft is None:
        tokens = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator).squeeze(-1)
    else:
        probs = torch.softmax(scores, dim=-1)
        draft = draft.to(probs.device).view(-1, 1)
        keep = torch.rand(len(probs), 1, generator=generator, device=probs.device) < probs.gather(-1, draft)
        residual = probs.scatter(-1, draft, 0.0)
        # a row whose draft has all the mass always keeps it (u < 1); give it any valid row to draw from
        empty = residual.sum(-1, keepdim=True) <= 0
        residual = torch.where(empty, probs, residual)
        drawn = torch.multinomial(residual, 1, generator=generator)
        tokens = torch.where(keep | empty, draft, drawn).squeeze(-1)
    return tokens, logprobs_all.gather(-1, tokens[:, None]).squeeze(-1)
