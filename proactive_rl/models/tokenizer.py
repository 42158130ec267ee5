"""A small byte-level BPE tokenizer for the tiny models, trained at build time on the world's vocabulary.

Byte-level BPE (as in Qwen) encodes any text, so the corpus only decides which words are cheap; it
covers the synthetic world's instructions and answers (counts, colours, shapes, ``Warning``,
``start``/``end``, ...), the dialogue's timestamps and system prompt. The Qwen chat-template tokens are single special tokens; the two
state tokens (docs/spec.md §2) are single *plain* added tokens (`plain_state_tokens`), so that decoding with
``skip_special_tokens=True`` (TRL, vLLM, ``batch_decode``) keeps them in the text a reward reads. `build_mistral_tokenizer` trains the same corpus into
the layout of Mistral's sentencepiece-style tokenizer (``▁`` word marks, byte fallback) for the tiny LLaVA-NeXT.
"""

from __future__ import annotations

import json

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN

# Control tokens the Qwen-VL processors and chat templates use, in Qwen's order.
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
STATE_TOKENS = (SILENCE_TOKEN, RESPONSE_TOKEN)
PRIVATE_TOUCHES = {
    "_tokenizer": "transformers 5.25.0: a fast tokenizer's tokenizers.Tokenizer backend, read and replaced",
    "_added_tokens_decoder": "transformers 5.25.0: a slow tokenizer's {id: AddedToken}, its tokens' special flag set",
}


def plain_state_tokens(tokenizer) -> bool:
    """Make the state tokens that `tokenizer` holds single *non-special* added tokens; ids are unchanged.

    A special token is deleted by ``decode(..., skip_special_tokens=True)``, which is how TRL, vLLM and most
    evaluation code decode completions: the rewards would never see ``</Silence>`` / ``</Response>``. A non-special
    added token is still matched whole in any text (one id), so tokenisation, the chat rendering and the loss are
    unchanged. Checkpoints saved with the tokens as special are re-registered on load. Returns whether anything
    changed.
    """
    changed = False
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        rebuilt = plain_backend(backend)
        if rebuilt is not backend:
            tokenizer._tokenizer, changed = rebuilt, True
    elif hasattr(tokenizer, "_added_tokens_decoder"):  # a Python (slow) tokenizer
        for token in tokenizer._added_tokens_decoder.values():
            if token.content in STATE_TOKENS and token.special:
                token.special, changed = False, True
    extra = getattr(tokenizer, "extra_special_tokens", None)
    if isinstance(extra, list) and any(str(t) in STATE_TOKENS for t in extra):
        tokenizer.extra_special_tokens = [t for t in extra if str(t) not in STATE_TOKENS]
        changed = True
    return changed


def plain_backend(backend):
    """`backend` (a `tokenizers.Tokenizer`) with its state tokens non-special and unnormalised (same object if so)."""
    # deferred: keeps torch/transformers out of light import paths

    from tokenizers import Tokenizer

    data = json.loads(backend.to_str())
    changed = False
    for entry in data.get("added_tokens", []):
        if entry["content"] in STATE_TOKENS and (entry["special"] or entry["normalized"]):
            entry.update(special=False, normalized=False)
            changed = True
    # The Rust tokenizer keeps its set of special ids apart from the entries: rebuilding it is the way to update it.
    return Tokenizer.from_str(json.dumps(data)) if changed else backend


COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "cyan", "black", "white", "grey", "pink", "brown")
SHAPES = ("circle", "square", "triangle", "diamond", "ring", "bar", "board", "star", "shape", "object", "objects")

# Sentences of the synthetic world (instructions, questions, answers, prompts). Kept as a plain list so the
# tokenizer, and therefore every tiny model, is a pure function of this file.
CORPUS = (
    "You are a proactive assistant watching a live video stream, one frame at a time.",
    "After each frame, answer with </Silence> when nothing needs to be said, or with </Response> followed by "
    "your answer as soon as the user's request calls for it. Stay silent otherwise.",
    # The synthetic world's instructions and answers (proactive_rl.synthetic), one per task.
    "You are watching a road from above. Say 'Warning' as soon as two vehicles are about to collide, early "
    "enough to avoid the crash.",
    "This is a security camera watching a yellow package. Say 'Warning' as soon as anyone steals it.",
    "Tell me each time a new object appears. Answer with the running count.",
    "The blue tank at the bottom is filled from time to time. Say 'start' when it starts filling and 'end' when "
    "it is full.",
    "Keep track of the black triangle. Tell me when it leaves the view, and on which side: say left, right, top "
    "or bottom.",
    "I am putting squares into the slots from left to right in this order: green, purple, blue, yellow, orange. "
    "If I make a mistake, tell me right away how to fix it.",
    "The fourth slot should hold a yellow square, not a cyan one: replace the cyan square with a yellow square.",
    "Tell me whenever a new shape appears: what colour and shape is it? A purple diamond appears.",
    "first second third fourth fifth sixth slot slots tank vehicle vehicles road camera package steals crash",
    "Warn me before two objects collide. Answer Warning when a collision is about to happen.",
    "Warning",
    "Tell me each time the red circle touches the blue square. Answer with the running count.",
    "Count every time an object enters the board. Answer with the running count.",
    "Count each event of the specified category: appear, disappear, flash, bounce, collide, split, merge.",
    "Tell me when the process starts and when it ends. Answer start or end.",
    "start",
    "end",
    "Tell me when the tracked object leaves the view. Answer left, right, top or bottom.",
    "The object left the view.",
    "Tell me if something suspicious happens: an object taking another object away.",
    "An object stole another object. Alert: theft.",
    "Watch the steps of the task and tell me when I make a mistake and how to fix it.",
    "You skipped a step. Fill the bar before moving the square. Fix: move it back.",
    "Question: what colour is the moving shape? Answer: the moving shape is red.",
    "Which shape appears next? How many objects are on the board? Where did it go?",
    "Which category does the object belong to? Options: A. B. C. D. I abstain. Move the occluder left.",
    "Move the occluder right. Denoise the image. Add one more stroke. Zoom out. Ask for help.",
    "The answer is circle, square, triangle or diamond.",
    "left right top bottom up down faster slower small large big tiny moving still fast slow",
    "appear appears appeared disappear disappears flash flashes bounce bounces collide collides collision",
    "enter enters leaves leave touch touches fill fills empty full step steps mistake fix",
    "<t=0.0s> <t=1.0s> <t=2.0s> <t=3.0s> <t=4.0s> <t=5.0s> <t=6.0s> <t=7.0s> <t=8.0s> <t=9.0s>",
    "<t=10.0s> <t=12.0s> <t=15.5s> <t=20.0s> <t=30.0s> <t=45.0s> <t=60.0s> <t=99.0s> <t=120.0s>",
    "the a an and or of to in on at is are it this that each every when before after with how many",
    " ".join(COLOURS),
    " ".join(SHAPES),
    " ".join(f"{c} {s}" for c in COLOURS for s in SHAPES),
    " ".join(str(i) for i in range(0, 121)),
    "0 1 2 3 4 5 6 7 8 9 . , : ; ! ? ' \" ( ) [ ] < > / = - + * # %",
)


def build_tokenizer(vocab_size: int = 1024, model_max_length: int = 32768, state_tokens: bool = True):
    """Train the byte-level BPE on `CORPUS` and wrap it as a `PreTrainedTokenizerFast` with Qwen's special tokens.

    Deterministic: the same arguments give the same vocabulary and merges.

    Args:
        vocab_size (`int`, *optional*, defaults to `1024`): size of the BPE vocabulary, special tokens included.
        model_max_length (`int`, *optional*, defaults to `32768`): recorded on the tokenizer.
        state_tokens (`bool`, *optional*, defaults to `True`): include the two state tokens (`False` mimics a
            released checkpoint's tokenizer).
    """
    # deferred: keeps torch/transformers out of light import paths
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = list(QWEN_SPECIAL_TOKENS) + (list(STATE_TOKENS) if state_tokens else [])
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    bpe = plain_backend(bpe)  # the state tokens keep their ids but are not special
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        # Every control token but eos/pad is an extra special token (skipped when decoding with skip_special_tokens).
        extra_special_tokens=[t for t in QWEN_SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    return tokenizer


# Mistral / Llama (sentencepiece) control tokens in their order, then the two LLaVA-NeXT adds after the vocabulary.
MISTRAL_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>")
LLAVA_SPECIAL_TOKENS = ("<image>", "<pad>")


def build_mistral_tokenizer(vocab_size: int = 1024, model_max_length: int = 32768, state_tokens: bool = True):
    """A Mistral-style tokenizer (as llava-hf/llava-v1.6-mistral-7b-hf ships it) trained on `CORPUS`.

    The layout of the real one: ``<unk> <s> </s>``, the 256 byte-fallback tokens ``<0x00>``..``<0xFF>``, the BPE
    pieces (``▁`` marks a leading space; the legacy normaliser prepends one to every text segment, so ``"A"`` is the
    single piece ``▁A``), then ``<image>`` and ``<pad>``. ``<s>`` is prepended to every encoded text. Any text encodes
    (unknown characters fall back to bytes). Deterministic.

    Args:
        vocab_size (`int`, *optional*, defaults to `1024`): BPE vocabulary trained on the corpus (bytes and added
            tokens come on top).
        model_max_length (`int`, *optional*, defaults to `32768`): recorded on the tokenizer.
        state_tokens (`bool`, *optional*, defaults to `True`): include the two state tokens (docs/spec.md §2).
    """
    # deferred: keeps torch/transformers out of light import paths

    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors, trainers
    from tokenizers.pre_tokenizers import Metaspace
    from transformers import PreTrainedTokenizerFast

    # Train with word boundaries so pieces stay words; the trained vocabulary is then laid out as Mistral's.
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(MISTRAL_SPECIAL_TOKENS),
        initial_alphabet=[chr(c) for c in range(32, 127)] + ["▁"],
        show_progress=False,
    )
    # The option letters as words, so each is one piece (``▁A``..), as in the real vocabulary.
    bpe.train_from_iterator([*CORPUS, "[INST] [/INST] " + " ".join(chr(65 + k) for k in range(26))], trainer=trainer)
    trained = json.loads(bpe.to_str())["model"]
    pieces = sorted((i, p) for p, i in trained["vocab"].items() if p not in MISTRAL_SPECIAL_TOKENS)
    layout = [*MISTRAL_SPECIAL_TOKENS, *(f"<0x{b:02X}>" for b in range(256)), *(p for _, p in pieces)]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(layout)},
            merges=merges,
            unk_token="<unk>",
            byte_fallback=True,
            fuse_unk=True,
        )
    )
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", layout.index("<s>"))]
    )
    tok.add_special_tokens([*MISTRAL_SPECIAL_TOKENS, *LLAVA_SPECIAL_TOKENS])
    if state_tokens:  # plain added tokens, after the vocabulary (plain_state_tokens)
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in STATE_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        extra_special_tokens=[t for t in LLAVA_SPECIAL_TOKENS if t != "<pad>"],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
