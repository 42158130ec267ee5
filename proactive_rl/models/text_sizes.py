"""The text-model sizes every tiny architecture shares (Qwen-VL and LLaVA-NeXT alike)."""


def text_sizes(d: dict, tokenizer) -> dict:
    """The language model's size fields of a tiny config (`d`: one entry of the size table), shared by every
    family; the vocabulary is rounded up to a multiple of 64 as in the released checkpoints (resizing for new
    tokens is then rare)."""
    return dict(
        vocab_size=-(-len(tokenizer) // 64) * 64,
        hidden_size=d["hidden"],
        intermediate_size=d["ffn"],
        num_hidden_layers=d["layers"],
        num_attention_heads=d["heads"],
        num_key_value_heads=d["kv_heads"],
        max_position_embeddings=4096,
    )
