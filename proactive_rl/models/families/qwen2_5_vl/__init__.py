"""Qwen2.5-VL, all of it in this folder: the adapter the engine and trainers ask (`adapter`), the processor's rules
(`processor`), the tiny model (`tiny`) and the released chat template (`template`)."""

from .adapter import Qwen2_5_VLFamily

__all__ = ["Qwen2_5_VLFamily"]
