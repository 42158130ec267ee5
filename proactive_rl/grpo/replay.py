"""Streaming replay: keep the skills a GRPO stage has no reward for (docs/spec.md §7, §8).

The suggestion stage (warm start, then GRPO) trains every weight on single-image MCQA prompts; started from a
streaming model (SFT + streaming GRPO, docs/spec.md §3, §7) it forgets when to speak and what to say. Streaming GRPO
rewards only the tasks of its rollout windows, and what it teaches there (say "Warning", not an object's name)
spreads to the tasks it does not roll out (the free-text pvqa answers). Replay adds, at every optimizer step, a
distillation term on a batch of streaming dialogues (training episodes of the earlier stages): the KL divergence
from the *starting* model's next-token distribution to the current one, at every assistant position of the dialogue
(the ``</Silence>`` / ``</Response>`` decision and the response words):

    L = L_stage + c · ⅓ [ (1/|S|) Σ_{i∈S} KL_i + (1/|R|) Σ_{i∈R} KL_i + (1/|W|) Σ_{i∈W} KL_i ],
    KL_i = KL(p_ref(· | x_<i) ‖ p_θ(· | x_<i))

with ``S`` the supervised positions whose target is ``</Silence>``, ``R`` those whose target is ``</Response>``,
``W`` the other supervised positions (the words of the responses) and ``c`` = ``replay_coef``. The three groups
weigh the same: a dialogue has a silence decision at almost every frame but one response decision per event and a
few response words. With a plain mean over positions the words (what a count task says, e.g. "1") drift while the
silence decisions hold; with silence and response decisions in one group, the one "speak now" frame of an accident
episode weighs 1/40 of the decisions, and the suggestion stage taught the model to stay silent there (no warning in 6
of 10 held-out accident episodes; three groups: the study diary (git show ee8ae2d:benchmarks/RESULTS.md), "the suggestion stage keeps what it is
given"). A group absent from the batch is left out of the mean.
Distilling the starting model (rather than cross-entropy on the dialogues' targets) keeps its calibrated state-token
decision as the earlier stages left it, without re-deriving the focal balancing of docs/spec.md §3.
"""

from __future__ import annotations

import copy
import logging
import random
from typing import Any

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN
from proactive_rl.data import EpisodeCollator, load_mixture, prepare_examples
from proactive_rl.data.lazy import EpisodeEncoder

logger = logging.getLogger(__name__)

PRIVATE_TOUCHES = {
    "_metrics": "trl 1.16.0: GRPOTrainer._metrics[mode][name] is a list of floats averaged into the next log",
}


class StreamingReplay:
    """A frozen copy of the starting model and the encoded replay dialogues; ``loss(model)`` is the replay term.

    Args:
        model: the policy before the stage trains it (copied and frozen here as the reference).
        processor: its processor (the tokenizer must hold the state tokens: a streaming checkpoint does).
        sources (`list`): a dataset mixture (`proactive_rl.data.parse_mixture`) of streaming episodes.
        batch_size (`int`, *optional*, defaults to `2`): dialogues per replay batch.
        seed (`int`, *optional*, defaults to `0`): batch sampling seed.
        max_length (`int`, *optional*, defaults to `1024`): longest dialogue in tokens (early frames dropped).
    """

    def __init__(self, model, processor, sources: list, batch_size: int = 2, seed: int = 0, max_length: int = 1024):
        # deferred: keeps torch/transformers out of light import paths
        import torch

        if batch_size < 1:
            raise ValueError(f"replay_batch_size: expected >= 1, got {batch_size}")
        tokenizer = getattr(processor, "tokenizer", processor)
        episodes, _ = load_mixture(sources)
        encode = EpisodeEncoder(processor, max_length)  # the SFT encoding: frames, chat template, label mask
        self.examples = prepare_examples(episodes, encode, max_length=max_length).examples
        self.collate = EpisodeCollator(self.examples, tokenizer.pad_token_id)
        self.reference = copy.deepcopy(model).eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)
        self.state_ids = torch.tensor([tokenizer.convert_tokens_to_ids(t) for t in (SILENCE_TOKEN, RESPONSE_TOKEN)])
        self.batch_size = min(batch_size, len(self.examples))
        self.rng = random.Random(seed)
        logger.info("streaming replay: %d dialogues, %d per step", len(self.examples), self.batch_size)

    def batch(self) -> dict[str, Any]:
        return self.collate(self.rng.sample(self.examples, self.batch_size))

    def loss(self, model):
        """KL(reference ‖ model) over the assistant positions of one replay batch, silence decisions, response
        decisions and response words weighing the same (module docstring)."""
        # deferred: keeps torch/transformers out of light import paths
        import torch
        import torch.nn.functional as F

        batch = self.batch()
        labels = batch.pop("labels")
        device = next(model.parameters()).device
        batch = {k: v.to(device) for k, v in batch.items()}
        # position i predicts token i + 1: keep the positions whose next token is supervised
        targets = labels[:, 1:].to(device)
        mask = targets != -100
        with torch.no_grad():
            ref = F.log_softmax(self.reference(**batch).logits[:, :-1][mask].float(), dim=-1)
        cur = F.log_softmax(model(**batch).logits[:, :-1][mask].float(), dim=-1)
        kl = (ref.exp() * (ref - cur)).sum(-1)
        target = targets[mask]
        silence, response = (target == int(i) for i in self.state_ids)
        groups = [kl[silence], kl[response], kl[~(silence | response)]]
        return sum(g.mean() for g in groups if g.numel()) / sum(1 for g in groups if g.numel())


class ReplayLossMixin:
    """A ``trl.GRPOTrainer`` mixin: the training loss plus ``replay_coef ×`` `StreamingReplay.loss` (none without one).

    Args:
        replay (`StreamingReplay`, *optional*): the replayed dialogues; `None`: the trainer's own loss.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of the term.

    The term's value is logged as ``replay_kl`` (``GRPOTrainer._metrics``, trl 1.16.0); its batch RNG is saved and
    resumed with the checkpoint (`proactive_rl.grpo.resume_state`).
    """

    def __init__(self, *args, replay: StreamingReplay | None = None, replay_coef: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.replay, self.replay_coef = replay, replay_coef

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.replay is None or not model.training:
            return loss
        term = self.replay.loss(model)
        self._metrics["train"]["replay_kl"].append(term.item())
        return loss + self.replay_coef * term
