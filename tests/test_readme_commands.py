"""Every shell command the README and docs/ show parses, and every file it names exists.

The fenced ``bash`` / ``sh`` / ``shell`` / ``console`` blocks of README.md and docs/*.md are split into commands
(``\\`` continuations joined, comments, prompts and ``VAR=value`` prefixes dropped, ``&&`` / ``;`` / ``|`` split).
Then, without running anything that needs a GPU or trains:

- ``make <target>``: the target exists in the Makefile;
- ``proactive-rl <command> ...`` (also as ``python -m proactive_rl.cli`` or under ``accelerate launch``): the
  arguments parse with the real argument parser; ``train`` resolves its recipe's trainer (the recipe is read);
- ``proactive-eval ...``: parses with `proactive_eval.cli`'s parser;
- ``python -m <module> ...`` / ``accelerate launch ... -m <module>``: the module exists;
- any repository path a command names (``recipes/``, ``launch/``, ``benchmarks/``, ``docs/``, ``.ci/``) exists.

The commands themselves run in the demo (``make demo``) and in the tests of each package.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
REPO_DIRS = ("recipes/", "launch/", "benchmarks/", "docs/", ".ci/")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {"&&", "||", ";", "|"}


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """``(first line number, text)`` of each fenced shell block of a markdown file."""
    blocks, inside, lang, start, body, fence = [], False, "", 0, [], ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _FENCE.match(line)
        if not inside and match:
            inside, fence, lang, start, body = True, match.group(2), match.group(3).lower(), number + 1, []
        elif inside and line.strip().startswith(fence[:3]) and not line.strip()[3:].strip():
            if lang in SHELL_LANGS:
                blocks.append((start, "\n".join(body)))
            inside = False
        elif inside:
            body.append(line)
    return blocks


def split_commands(text: str) -> list[list[str]]:
    """Commands (token lists) of a shell block; prompts (``$ ``), comments and env prefixes removed."""
    joined, pending = [], ""
    for line in text.splitlines():
        line = re.sub(r"^\s*\$\s+", "", line)
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    commands = []
    for line in joined:
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # unbalanced quotes: not a command we can check (prose in a console block)
            continue
        current: list[str] = []
        for token in tokens + [";"]:
            if token in _SEPARATORS or token.endswith(";") and len(token) > 1:
                token = token.rstrip(";")
                if token and token not in _SEPARATORS:
                    current.append(token)
                while current and _ENV_ASSIGN.match(current[0]):
                    current.pop(0)
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
    return commands


def all_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in DOCS:
        if not path.is_file():
            continue
        for start, text in shell_blocks(path):
            for tokens in split_commands(text):
                found.append((f"{path.relative_to(ROOT)}:{start}: {' '.join(tokens)[:60]}", tokens))
    return found


def makefile_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if match:
            targets.update(match.group(1).split())
    return targets


def _module_and_args(tokens: list[str]) -> tuple[str | None, list[str]]:
    """``python -m mod args`` / ``accelerate launch [opts] -m mod args`` / ``torchrun ... -m`` -> (mod, args)."""
    if "-m" in tokens:
        i = tokens.index("-m")
        if i + 1 < len(tokens):
            return tokens[i + 1], tokens[i + 2 :]
    return None, []


def _parse_ok(parser_main, argv: list[str], where: str) -> None:
    """Parse `argv`; ``--help`` exits 0 (fine), an argparse error exits 2 (a failure naming the command)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            parser_main(argv)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            pytest.fail(f"{where}: does not parse: {err.getvalue().strip() or exit_.code}")


def check_proactive_rl(argv: list[str], where: str) -> None:
    from proactive_rl import cli
    from proactive_rl.trainers import recipe_trainer

    if argv and argv[0] == "train" and not {"-h", "--help"} & set(argv):
        recipe_trainer(argv[1:])  # reads the recipe (a file or a shipped one) and resolves its trainer, else raises
        return
    _parse_ok(lambda a: cli.build_parser().parse_args(a), argv, where)


def check_proactive_eval(argv: list[str], where: str) -> None:
    from proactive_eval import cli

    _parse_ok(lambda a: cli.build_parser().parse_args(a), argv, where)


def check_paths(tokens: list[str], where: str) -> None:
    for token in tokens:
        value = token.split("=", 1)[1] if token.startswith("--") and "=" in token else token
        if value.startswith(REPO_DIRS) and not re.search(r"[<>{}*$]", value):
            assert (ROOT / value).exists(), f"{where}: names {value}, which is not in the repository"


COMMANDS = all_commands()


def test_the_readme_shows_commands():
    assert any(tokens[:1] == ["make"] for _, tokens in COMMANDS), "README.md shows no `make` command"


@pytest.mark.parametrize("where,tokens", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command(where: str, tokens: list[str]):
    check_paths(tokens, where)
    program = Path(tokens[0]).name
    if program == "make":
        targets = [t for t in tokens[1:] if not t.startswith("-") and "=" not in t]
        missing = sorted(set(targets) - makefile_targets())
        assert not missing, f"{where}: Makefile has no target(s) {missing}"
    elif program == "proactive-rl":
        check_proactive_rl(tokens[1:], where)
    elif program == "proactive-eval":
        check_proactive_eval(tokens[1:], where)
    elif program in ("python", "python3", "accelerate", "torchrun", "deepspeed"):
        module, args = _module_and_args(tokens)
        if module is None:
            scripts = [t for t in tokens[1:] if t.endswith(".py")]
            for script in scripts:
                assert (ROOT / script).is_file() or not script.startswith(REPO_DIRS), f"{where}: no {script}"
            return
        if module == "proactive_rl.cli":
            check_proactive_rl(args, where)
        elif module == "proactive_eval.cli":
            check_proactive_eval(args, where)
        elif module.startswith(("proactive_rl", "proactive_eval", "proactive_rewards", "benchmarks")):
            assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
            if "--config" in args:
                config = args[args.index("--config") + 1]
                assert (ROOT / config).is_file() or Path(config).is_file(), f"{where}: no recipe {config}"


def test_splitting():
    text = (
        "$ make test   # comment\nCUDA_VISIBLE_DEVICES=0 proactive-rl demo \\\n   --quick && make lint; echo hi | cat"
    )
    assert split_commands(text) == [
        ["make", "test"],
        ["proactive-rl", "demo", "--quick"],
        ["make", "lint"],
        ["echo", "hi"],
        ["cat"],
    ]


def test_checkers_catch_typos(tmp_path):
    md = tmp_path / "x.md"
    md.write_text(
        "text\n```bash\nproactive-eval score --episodes a.json --predictionz p.jsonl\n```\n```python\nx = 1\n```\n"
    )
    ((start, text),) = shell_blocks(md)
    (tokens,) = split_commands(text)
    assert start == 3 and tokens[0] == "proactive-eval"
    with pytest.raises(pytest.fail.Exception, match="does not parse"):
        check_proactive_eval(tokens[1:], "x.md:3")
    with pytest.raises(pytest.fail.Exception, match="does not parse"):
        check_proactive_rl(["demo", "--quik"], "x.md")
    with pytest.raises(FileNotFoundError, match="no shipped recipe of that name"):
        check_proactive_rl(["train", "--config", "recipes/tiny/no_such_recipe.yaml"], "x.md")
    with pytest.raises(AssertionError, match="not in the repository"):
        check_paths(["--config_file", "launch/no_such.yaml"], "x.md")
    check_proactive_rl(["demo", "--quick", "--out", "demo_out"], "x.md")
    check_proactive_rl(["train", "--config", "recipes/tiny/sft.yaml"], "x.md")
