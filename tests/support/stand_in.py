"""A random model that answers like a proactive one: silent at most frames, responding at some (docs/spec.md §2, §9).

A randomly initialised model (`build_tiny`, or a large config with random weights) never says ``</Silence>``: its
turns are whatever tokens its random head prefers. Benchmarks and tests of the streaming engine's speculative
silence need the cost structure of a trained proactive model instead: ``</Silence><|im_end|>`` at most frames,
a ``</Response> ...`` turn at a few. `proactive_stand_in` gets that without training the network: it unties the
output head from the input embedding and fits only the rows of the tokens that assistant turns say (the state
tokens, the responses' words, ``<|im_end|>``) by softmax regression on the model's own final hidden states over
example dialogues (each position predicts the dialogue's next assistant token). The rest of the model, and every
other row of the head, is unchanged, so the logits are still a function of every frame and token in context.

A helper of the benchmarks and the tests (not of the library): ``from tests.support.stand_in import
proactive_stand_in``.
"""

from __future__ import annotations

import torch

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN


def untie_output_head(model) -> torch.nn.Module:
    """Give the output head its own weight (a copy of the tied input embedding), so its rows can change alone."""
    head = model.get_output_embeddings()
    if head.weight is model.get_input_embeddings().weight:
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
    for config in (model.config, model.config.get_text_config(decoder=True)):
        config.tie_word_embeddings = False
    return head


def ground_truth_dialogues(processor, episodes: int = 8, seed: int = 0) -> list[dict]:
    """`encode_dialogue` inputs of the ground-truth dialogues of `episodes` synthetic ``accident`` episodes (10-14
    frames, one warning each): the default examples of `proactive_stand_in`."""
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.synthetic import generate_episodes, render_frames

    return [
        encode_dialogue(processor, build_messages(e, render_frames(e)))
        for e in generate_episodes("accident", episodes, seed, duration=[10, 14])
    ]


@torch.no_grad()
def _examples(model, dialogues) -> tuple[torch.Tensor, torch.Tensor]:
    """The final hidden state (the head's input) before every supervised token of the dialogues (assistant turns'
    content and end-of-turn tokens, `encode_dialogue`'s labels), and that token."""
    device = next(model.parameters()).device
    captured = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: captured.append(args[0][0]))
    features, labels = [], []
    try:
        for enc in dialogues:
            captured.clear()
            model(
                input_ids=enc["input_ids"][None].to(device),
                mm_token_type_ids=enc["mm_token_type_ids"][None].to(device),
                pixel_values=enc["pixel_values"].to(device, model.dtype),
                image_grid_thw=enc["image_grid_thw"].to(device),
            )
            said = (enc["labels"] != -100).nonzero().squeeze(-1)
            features.append(captured[0].float()[said - 1])
            labels.append(enc["input_ids"][said].to(device))
    finally:
        hook.remove()
    return torch.cat(features), torch.cat(labels)


def proactive_stand_in(model, processor, respond: float = 0.0, dialogues: list[dict] | None = None, steps: int = 300):
    """Fit the head rows of the tokens the dialogues' assistant turns say (state tokens, content, end of turn) so
    that greedy decoding says those turns; modifies `model` in place and returns it. See the module docstring.

    Args:
        model (`PreTrainedModel`): a Qwen-VL model (any weights), in eval mode.
        processor (`ProcessorMixin`): its processor, with the state tokens in its tokenizer.
        respond (`float`, *optional*, defaults to `0`): then move the ``</Response>`` row until it beats
            ``</Silence>`` at this share of the examples' turn starts (the ones the fit separates least), so that
            the model also responds where the examples are silent: on other dialogues, a model fit to few responses
            is silent almost everywhere, and where it speaks then depends on what it sees.
        dialogues (`list[dict]`, *optional*): the examples, `proactive_rl.chat.encode_dialogue` outputs of state-token
            dialogues; defaults to `ground_truth_dialogues(processor)`. Fit to the dialogue a benchmark streams, the
            model says that dialogue's turns where the fit separates them (every turn, typically).
        steps (`int`, *optional*, defaults to `300`): Adam steps of the regression.
    """
    tokenizer = processor.tokenizer
    silence, response = tokenizer.convert_tokens_to_ids([SILENCE_TOKEN, RESPONSE_TOKEN])
    if tokenizer.unk_token_id is not None and tokenizer.unk_token_id in (silence, response):
        raise ValueError(f"the tokenizer lacks {SILENCE_TOKEN} / {RESPONSE_TOKEN}: add the state tokens first")
    dialogues = ground_truth_dialogues(processor) if dialogues is None else dialogues
    features, said = _examples(model, dialogues)
    rows = torch.unique(torch.cat([said, torch.tensor([silence, response], device=said.device)]))
    labels = torch.searchsorted(rows, said)
    weight = untie_output_head(model).weight
    # Every other row keeps its logits: together they enter the softmax as one log-sum-exp term.
    others = features @ weight.detach().float().T
    others[:, rows] = float("-inf")
    rest = torch.logsumexp(others, dim=-1, keepdim=True)
    fitted = weight.detach()[rows].float().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([fitted], lr=0.05)
    with torch.enable_grad():
        for _ in range(steps):
            logits = torch.cat([features @ fitted.T, rest], dim=-1)
            loss = torch.nn.functional.cross_entropy(logits, labels) + 1e-3 * fitted.pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    fitted = fitted.detach()
    if respond > 0:
        # along the mean turn-start state, far enough to win at a `respond` share of the turn starts
        starts = features[(said == silence) | (said == response)]
        s, r = int(torch.searchsorted(rows, silence)), int(torch.searchsorted(rows, response))
        direction = torch.nn.functional.normalize(starts.mean(0), dim=0)
        needed = (starts @ (fitted[s] - fitted[r])) / (starts @ direction).clamp(min=1e-6)
        fitted[r] += torch.quantile(needed, respond) * 1.0001 * direction
    with torch.no_grad():
        weight[rows] = fitted.to(weight.dtype)
    return model
