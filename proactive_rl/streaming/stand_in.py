"""A random model that answers like a proactive one: silent at most frames, responding at some (docs/spec.md §2, §9).

A randomly initialised model (`build_tiny`, or a large config with random weights) never says ``</Silence>``: its
turns are whatever tokens its random head prefers. Benchmarks and tests of the streaming engine's speculative
silence need the cost structure of a trained proactive model instead: ``</Silence><|im_end|>`` at most frames,
a ``</Response> ...`` turn at a few. `proactive_stand_in` gets that without training the network: it unties the
output head from the input embedding and fits only three of its rows (``</Silence>``, ``</Response>``,
``<|im_end|>``) by softmax regression on the model's own final hidden states over ground-truth dialogues of
synthetic episodes (the turn start predicts the ground-truth state token, the position after ``</Silence>``
predicts the end of turn). The rest of the model, and every other row of the head, is unchanged, so the logits
are still a function of every frame and token in context: where the model responds depends on what it saw.
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


@torch.no_grad()
def _hidden_states(model, processor, episodes) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Final hidden states (the head's input) at every turn start and after every ``</Silence>``, and the state
    token each turn start should predict (the ground truth)."""
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.synthetic import render_frames

    tokenizer = processor.tokenizer
    silence, response = tokenizer.convert_tokens_to_ids([SILENCE_TOKEN, RESPONSE_TOKEN])
    device = next(model.parameters()).device
    captured = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: captured.append(args[0][0]))
    starts, targets, after = [], [], []
    try:
        for episode in episodes:
            enc = encode_dialogue(processor, build_messages(episode, render_frames(episode)))
            ids = enc["input_ids"]
            captured.clear()
            model(
                input_ids=ids[None].to(device),
                mm_token_type_ids=enc["mm_token_type_ids"][None].to(device),
                pixel_values=enc["pixel_values"].to(device, model.dtype),
                image_grid_thw=enc["image_grid_thw"].to(device),
            )
            hidden = captured[0].float()
            state = ((ids == silence) | (ids == response)).nonzero().squeeze(-1)
            starts.append(hidden[state - 1])
            targets.append(ids[state].to(device))
            after.append(hidden[(ids == silence).nonzero().squeeze(-1)])
    finally:
        hook.remove()
    return torch.cat(starts), torch.cat(targets), torch.cat(after)


def proactive_stand_in(model, processor, respond: float = 0.1, episodes: int = 8, steps: int = 300, seed: int = 0):
    """Fit the head rows of ``</Silence>``, ``</Response>`` and ``<|im_end|>`` so that greedy decoding is silent at
    most frames (see the module docstring). Modifies `model` in place and returns it.

    Args:
        model (`PreTrainedModel`): a Qwen-VL model (any weights), in eval mode.
        processor (`ProcessorMixin`): its processor, with the state tokens in its tokenizer.
        episodes (`int`, *optional*, defaults to `8`): synthetic ``accident`` episodes (10-14 frames, one warning
            each) whose ground-truth dialogues give the regression's examples.
        steps (`int`, *optional*, defaults to `300`): Adam steps of the regression.
        seed (`int`, *optional*, defaults to `0`): the episodes' seed.
    """
    from proactive_rl.synthetic import generate_episodes

    tokenizer = processor.tokenizer
    rows = tokenizer.convert_tokens_to_ids([SILENCE_TOKEN, RESPONSE_TOKEN, "<|im_end|>"])
    if tokenizer.unk_token_id is not None and tokenizer.unk_token_id in rows:
        raise ValueError(f"the tokenizer lacks {SILENCE_TOKEN} / {RESPONSE_TOKEN}: add the state tokens first")
    starts, targets, after = _hidden_states(
        model, processor, generate_episodes("accident", episodes, seed, duration=[10, 14])
    )
    head = untie_output_head(model)
    weight = head.weight
    features = torch.cat([starts, after])
    index = torch.tensor(rows, device=features.device)
    end = torch.full((len(after),), 2, device=features.device)
    labels = torch.cat([(targets == index[1]).long(), end])  # 0 silence, 1 response, 2 end of turn
    # Every other row keeps its logits: together they enter the softmax as one log-sum-exp term.
    others = features @ weight.detach().float().T
    others[:, index] = float("-inf")
    rest = torch.logsumexp(others, dim=-1, keepdim=True)
    fitted = weight.detach()[index].float().clone().requires_grad_(True)
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
            # Move the </Response> row along the mean turn-start state until it wins at a `respond` share of the
            # turn starts: the ones where the fitted rows separate the two least.
            direction = torch.nn.functional.normalize(starts.mean(0), dim=0)
            reach = starts @ direction
            logits = starts @ fitted.T
            needed = (logits[:, 0] - logits[:, 1]) / reach.clamp(min=1e-6)
            fitted[1] += torch.quantile(needed, respond) * 1.0001 * direction
    with torch.no_grad():
        weight[index] = fitted.to(weight.dtype)
    return model
