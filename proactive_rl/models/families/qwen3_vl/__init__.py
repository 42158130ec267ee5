"""Qwen3-VL, all of it in this folder: the adapter (`adapter`, Qwen2.5-VL's plus deepstack), the tiny model
(`tiny`) and the released chat template (`template`); the processor's rules are Qwen2.5-VL's."""

from .adapter import Qwen3VLFamily

__all__ = ["Qwen3VLFamily"]
