"""A model family is one folder (docs/architecture.md, "A new model family").

Every file of `proactive_rl` that names a family lies in `proactive_rl/models/families/<family>/`, except the short
list `ALLOWED` below (each entry says why); so a family is added, changed or removed in its own folder, and the
registry (`families/__init__.py`) is the one place that lists them. `tests/rl/test_model_families.py` adds a toy
family from a test alone.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "proactive_rl"
FAMILIES = PACKAGE / "models" / "families"

# The names of each family in code: its model type / tiny arch and its transformers class prefix. Qwen2-VL's names
# count as Qwen2.5-VL's: its image processor is the one Qwen2.5-VL (and Qwen3-VL, which extends it) uses.
NAMES = {
    "qwen2_5_vl": re.compile(r"qwen2_5_vl|Qwen2_5_VL|qwen2_vl|Qwen2VL"),
    "qwen3_vl": re.compile(r"qwen3_vl|Qwen3VL"),
    "llava_next": re.compile(r"llava_next|LlavaNext"),
}
# Path (relative to proactive_rl/; a folder ends with "/") -> the families it may name outside their own folders.
ALLOWED = {
    # the registry: imports each family's package and registers it
    "models/families/__init__.py": {"qwen2_5_vl", "qwen3_vl", "llava_next"},
    # Qwen3-VL extends Qwen2.5-VL: its adapter subclasses Qwen2.5-VL's, its tiny builder reuses the Qwen-VL recipe
    "models/families/qwen3_vl/": {"qwen2_5_vl"},
    # user-facing defaults, the tiny model a spec without an arch builds: `TINY_DEFAULTS` and the fix message that
    # names it; the spec syntax's doctest
    "models/spec.py": {"qwen2_5_vl", "qwen3_vl"},
    # `build_tiny`'s default arch (the same default)
    "models/tiny.py": {"qwen2_5_vl"},
    # `DemoSettings.arch`'s default (the same default)
    "demo/settings.py": {"qwen2_5_vl"},
    # the fix message of `proactive-rl eval` without a model names the default tiny model
    "evaluation/command.py": {"qwen2_5_vl"},
    # the suggestion trainer's docstrings name the shipped LLaVA recipe's file and the tiny LLaVA arch
    "grpo/suggestion/main.py": {"llava_next"},
}


def named_families() -> dict[str, set[str]]:
    """Every ``.py`` file of the package (the recipe and launch links are not followed) -> the families it names."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        names = {family for family, pattern in NAMES.items() if pattern.search(text)}
        if names:
            found[path.relative_to(PACKAGE).as_posix()] = names
    return found


def allowed(path: str) -> set[str]:
    return set().union(*(names for where, names in ALLOWED.items() if path == where or path.startswith(where)))


def test_a_family_is_named_only_in_its_own_folder():
    outside = {}
    for path, names in named_families().items():
        own = {f for f in names if path.startswith(f"models/families/{f}/")}
        stray = names - own - allowed(path)
        if stray:
            outside[path] = sorted(stray)
    assert not outside, f"family-specific names outside their family's folder (move them there): {outside}"


def test_the_allowed_list_is_still_needed():
    found = named_families()
    stale = {
        where: sorted(names - set().union(*(n for p, n in found.items() if p == where or p.startswith(where))))
        for where, names in ALLOWED.items()
    }
    assert not {w: n for w, n in stale.items() if n}, f"ALLOWED entries that no longer name the family: {stale}"


def test_each_library_family_is_one_folder_with_its_adapter_tiny_model_and_template():
    from proactive_rl.models import ARCHS
    from proactive_rl.models.families import TINY_ARCHS

    folders = sorted(p.name for p in FAMILIES.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(NAMES) == sorted(ARCHS)
    for arch in ARCHS:
        assert {"__init__.py", "adapter.py", "tiny.py", "template.py"} <= {p.name for p in (FAMILIES / arch).iterdir()}
        assert TINY_ARCHS[arch].__module__ == f"proactive_rl.models.families.{arch}.adapter"


def test_nothing_outside_the_families_branches_on_the_arch():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "arch ==" in line
    ]
    assert not offenders, offenders
