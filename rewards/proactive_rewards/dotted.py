"""Dotted import paths for user code named in recipes: ``"my_pkg.module:attr"`` or ``"my_pkg.module.attr"``."""

from __future__ import annotations

import importlib


def import_object(path: str):
    """The object a dotted path names; a `ValueError` naming the path when it cannot be imported.

    Example:

    >>> import_object("proactive_rewards.parsing:parse_int")("3")
    3
    """
    module, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"cannot import {path!r} ({type(e).__name__}: {e})") from None
