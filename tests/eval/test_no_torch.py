"""`import proactive_eval` stays light: no torch, and no matplotlib / httpx / av until they are needed."""

import subprocess
import sys

HEAVY = ("torch", "matplotlib", "httpx", "av", "PIL", "transformers")


def _imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_proactive_eval_does_not_import_torch_or_extras():
    assert _imported_after("import proactive_eval") == set()


def test_scoring_modules_stay_light():
    code = (
        "import proactive_eval.benchmarks, proactive_eval.predictions, proactive_eval.commands.report, "
        "proactive_eval.commands.benchmark, proactive_eval.cli, proactive_eval.judges, "
        "proactive_eval.benchmarks.proactivebench.command"
    )
    assert _imported_after(code) == set()
