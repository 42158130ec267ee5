"""LLaVA-NeXT, all of it in this folder: the adapter the engine and trainers ask (`adapter`), the tiny
LLaVA-NeXT-Mistral (`tiny`) and the released chat template (`template`)."""

from .adapter import LlavaNextFamily

__all__ = ["LlavaNextFamily"]
