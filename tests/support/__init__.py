"""Helpers shared by the tests and the benchmarks, imported as users import a package: ``from tests.support.stand_in
import proactive_stand_in`` (pytest puts the repository root on ``sys.path``, ``pythonpath`` in pyproject.toml;
subprocesses run from the root or get it in ``PYTHONPATH``, `tests.support.launching.launch`)."""
