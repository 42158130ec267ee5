"""Performance scripts, run from the repository root as modules (``python -m benchmarks.run_all``; ``make bench``).

Each script appends one JSON record per result to `results.jsonl` (`common.record`); `results` writes RESULTS.md, the
latest record of each benchmark, from it.
"""
