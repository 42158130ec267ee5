"""Every touch of a private name of the ML libraries is declared, once, in the module that makes it.

A private name (one leading underscore, not a dunder) of torch, transformers, TRL, PEFT, accelerate, DeepSpeed,
datasets or tokenizers can change in any release. The library (``proactive_rl``, ``proactive_eval``,
``proactive_rewards``) may touch one only where the module declares it in a module-level ``PRIVATE_TOUCHES``
mapping (module level), ``{name: "<distribution> <pinned version>: what it relies on"}``; a TRL or transformers upgrade then
audits these mappings (and the pinned versions must be the installed ones).

What counts as a touch, found by reading the source (AST):
- ``obj._name`` (read or write) where ``_name`` is not defined by the project itself (a ``def``/``class``, a
  module- or class-level assignment, or ``self._name = ...`` in a method);
- ``getattr``/``hasattr``/``setattr(obj, "_name", ...)`` with such a name;
- ``from <library> import _name`` and imports of a private module (``transformers.integrations._x``);
- a private method or attribute defined by a project class that overrides one of a library base class (found by
  importing the module and walking the class's MRO).
No private name may be imported from another distribution of the project either.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "proactive_rl": ROOT / "proactive_rl",
    "proactive_eval": ROOT / "eval" / "proactive_eval",
    "proactive_rewards": ROOT / "rewards" / "proactive_rewards",
}
# import name -> distribution whose version a declaration names
LIBRARIES = {
    "torch": "torch",
    "transformers": "transformers",
    "trl": "trl",
    "peft": "peft",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
    "datasets": "datasets",
    "tokenizers": "tokenizers",
}
# Python's own underscore names: public API of namedtuple and enum, and what ``abc`` puts on every ABC subclass.
PYTHON_NAMES = {
    "_replace",
    "_asdict",
    "_fields",
    "_make",
    "_field_defaults",
    "_value_",
    "_name_",
    "_missing_",
    "_abc_impl",
}
DECLARATION = re.compile(r"^(?P<dist>[a-z_]+) (?P<version>\d+\.\d+\.\d+): \S")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in ("_", *PYTHON_NAMES)


def library_files() -> dict[str, Path]:
    """Module name -> file, for every module of the three packages."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def project_attributes(trees: dict[str, ast.Module]) -> set[str]:
    """Private attribute names the project defines: class members (methods, class-level names) and
    ``self._x = ...`` in a method. A module-level ``_helper`` does not count: ``obj._helper`` is then not ours."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(item.name)
                    elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):  # not `+=`: that needs the attribute already
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            names.add(t.attr)
    return {n for n in names if is_private(n)}


def _string_arg(call: ast.Call) -> str | None:
    if (
        isinstance(call.func, ast.Name)
        and call.func.id in ("getattr", "hasattr", "setattr")
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Constant)
        and isinstance(call.args[1].value, str)
    ):
        return call.args[1].value
    return None


def source_touches(module: str, tree: ast.Module, ours: set[str]) -> dict[str, int]:
    """Private library names this module's source touches -> first line."""
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        found.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in ours:
            add(node.attr, node.lineno)
        elif isinstance(node, ast.Call) and (name := _string_arg(node)) and is_private(name) and name not in ours:
            add(name, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in LIBRARIES:
                for part in node.module.split("."):
                    if is_private(part):
                        add(part, node.lineno)
                for alias in node.names:
                    if is_private(alias.name):
                        add(alias.name, node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    for part in alias.name.split("."):
                        if is_private(part):
                            add(part, node.lineno)
    return found


def imports_a_library(tree: ast.Module) -> bool:
    """The module imports one of the libraries at its top (so a class of it may subclass a library class)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in LIBRARIES:
                return True
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in LIBRARIES for a in node.names):
            return True
    return False


def override_touches(modules: list[str]) -> dict[str, dict[str, int]]:
    """Module -> private names that one of its classes defines over a library class's (a method override, a
    class attribute), found in the MRO of every class of `modules` -> line of the defining class."""
    found: dict[str, dict[str, int]] = {}
    for module in modules:
        for cls in vars(importlib.import_module(module)).values():
            if not inspect.isclass(cls) or cls.__module__ != module:
                continue
            mro = cls.__mro__
            library = [b for b in mro if b.__module__.split(".")[0] in LIBRARIES]
            theirs = {n for b in library for n in vars(b) if is_private(n)}
            for own in mro:
                if own.__module__.split(".")[0] not in PACKAGES:
                    continue
                for name in sorted(theirs & {n for n in vars(own) if is_private(n)}):
                    line = inspect.getsourcelines(own)[1]
                    found.setdefault(own.__module__, {}).setdefault(name, line)
    return found


@functools.cache
def scan() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]], list[str]]:
    """``(touches, declarations, cross_distribution_imports)`` over the whole library."""
    files = library_files()
    trees = {m: ast.parse(p.read_text(), filename=str(p)) for m, p in files.items()}
    ours = project_attributes(trees)
    touches = override_touches([m for m, tree in trees.items() if imports_a_library(tree)])
    declared, crossing = {}, []
    for module, tree in trees.items():
        found = source_touches(module, tree, ours)
        if found:
            touches[module] = {**touches.get(module, {}), **found}
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "PRIVATE_TOUCHES" for t in targets):
                    declared[module] = dict(importlib.import_module(module).PRIVATE_TOUCHES)
        package = module.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top = node.module.split(".")[0]
                if top in PACKAGES and top != package:
                    crossing += [
                        f"{files[module].relative_to(ROOT)}:{node.lineno}: from {node.module} import {a.name}"
                        for a in node.names
                        if is_private(a.name) or any(is_private(p) for p in node.module.split("."))
                    ]
    return touches, declared, crossing


def test_every_private_library_touch_is_declared_where_it_is_made():
    touches, declared, _ = scan()
    files = library_files()
    undeclared = [
        f"{files[m].relative_to(ROOT)}:{line}: {name}"
        for m, found in sorted(touches.items())
        for name, line in sorted(found.items(), key=lambda kv: kv[1])
        if name not in declared.get(m, {})
    ]
    assert not undeclared, (
        "private library names touched without a declaration; add each to the module's PRIVATE_TOUCHES "
        "({name: '<distribution> <pinned version>: what it relies on'}):\n  " + "\n  ".join(undeclared)
    )


def test_declarations_are_used_and_name_the_installed_version():
    touches, declared, _ = scan()
    problems = []
    for module, names in sorted(declared.items()):
        for name, text in names.items():
            if name not in touches.get(module, {}):
                problems.append(f"{module}: declares {name!r} but does not touch it")
            match = DECLARATION.match(text)
            if match is None:
                problems.append(f"{module}: {name!r}: expected '<distribution> <x.y.z>: ...', got {text!r}")
                continue
            dist, version = match["dist"], match["version"]
            if dist not in LIBRARIES.values():
                problems.append(f"{module}: {name!r}: {dist!r} is not one of {sorted(set(LIBRARIES.values()))}")
            elif importlib.metadata.version(dist) != version:
                problems.append(
                    f"{module}: {name!r} was written against {dist} {version}, installed is "
                    f"{importlib.metadata.version(dist)}: re-check it against the new release, then update the pin"
                )
    assert not problems, "\n".join(problems)


def test_declared_versions_are_the_ones_make_install_pins():
    """constraints.txt and the Makefile's TORCH_PINS (what ``make install`` and CI install) pin each version a
    declaration names: a new release of a touched library reaches CI only once its declarations are re-checked and
    bumped with the pin."""
    constraints = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    torch_pins = re.search(r"^TORCH_PINS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)[1].split()
    pins = dict(pin.split("==") for pin in constraints + torch_pins)
    _, declared, _ = scan()
    named = {
        (m["dist"], m["version"], module)
        for module, names in declared.items()
        for text in names.values()
        if (m := DECLARATION.match(text))
    }
    assert {dist for dist, _, _ in named} <= set(pins), f"constraints.txt and TORCH_PINS pin {sorted(pins)}"
    wrong = [
        f"{module}: {dist} {version}, make install pins {pins[dist]}"
        for dist, version, module in named
        if dist in pins and pins[dist] != version
    ]
    assert not wrong, "\n".join(sorted(wrong))


def test_no_private_name_is_imported_across_distributions():
    _, _, crossing = scan()
    assert not crossing, "\n".join(crossing)


def test_the_scan_sees_a_touch_of_each_kind():
    """The scanner itself: an attribute, a getattr string, an import and an override are each found."""
    source = inspect.cleandoc(
        """
        from transformers.integrations import _private_thing
        import torch._dynamo

        def f(trainer, tok):
            trainer._metrics["train"]["x"].append(1.0)
            return getattr(tok, "_tokenizer", None), self_made._ours
        """
    )
    tree = ast.parse(source)
    found = source_touches("m", tree, ours={"_ours"})
    assert set(found) == {"_private_thing", "_dynamo", "_metrics", "_tokenizer"}
    overrides = override_touches(["proactive_rl.sft.trainer", "proactive_rl.grpo.streaming.trainer"])
    assert "_load_from_checkpoint" in overrides["proactive_rl.sft.trainer"]  # a method of the class itself
    assert "_calculate_rewards" in overrides["proactive_rl.grpo.streaming.trl_overrides"]  # of a mixin it uses
