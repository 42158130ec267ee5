"""The benchmark registry: the library's five benchmarks under one spelling each, and what a command is told when a
name is unknown, old-spelled, or lacks what the command needs (one line, exit status 2)."""

from __future__ import annotations

import pytest

from proactive_eval.benchmarks import BENCHMARKS, Benchmark, benchmark_names, get_benchmark, register_benchmark
from proactive_eval.cli import main
from proactive_eval.errors import InputError


def test_the_library_registers_its_five_benchmarks():
    assert benchmark_names() == ["ovo_bench", "p3i", "proactivebench", "pvqa", "streamingbench_po"]
    assert benchmark_names("runnable") == ["ovo_bench", "p3i", "pvqa", "streamingbench_po"]
    assert benchmark_names("blind_floor") == benchmark_names("summary") == benchmark_names()
    assert {n: get_benchmark(n).evaluators for n in ("p3i", "pvqa", "proactivebench")} == {
        "p3i": ("prs",), "pvqa": ("pauc",), "proactivebench": ("mcqa", "oeg")
    }  # fmt: skip
    po = get_benchmark("streamingbench_po")
    assert po.policy_protocols == ("proactive",) and "proactive" in po.protocols
    assert po.results_file == "streamingbench_po_results.json"
    assert get_benchmark("ovo_bench").results_file == "ovo_bench_results.json"


def test_a_name_is_taken_once():
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark(Benchmark(name="ovo_bench", title="another"))
    with pytest.raises(ValueError, match="one spelling"):
        Benchmark(name="ovo-bench", title="hyphenated")
    assert register_benchmark(BENCHMARKS["p3i"]) is BENCHMARKS["p3i"]  # the same one again: a no-op


def test_an_old_spelling_names_the_new_one():
    with pytest.raises(InputError, match="unknown benchmark 'ovo-bench': it is spelled 'ovo_bench'"):
        get_benchmark("ovo-bench")
    with pytest.raises(
        InputError, match="has no runnable; benchmarks that do: ovo_bench, p3i, pvqa, streamingbench_po"
    ):
        get_benchmark("proactivebench", needs="runnable")


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "--benchmark", "streamingbench-po", "--annotations", "q.json", "--predictions", "p.json"],
        [
            "run",
            "--benchmark",
            "ovo-bench",
            "--annotations",
            "a.json",
            "--policy",
            "openai:m@http://x/v1",
            "--out",
            "o",
        ],
        ["baseline", "--benchmark", "ovo-bench", "--annotations", "a.json"],
    ],
)
def test_commands_refuse_an_old_spelling_in_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    new = argv[2].replace("-", "_")
    assert err.count("\n") == 1 and f"unknown benchmark {argv[2]!r}: it is spelled {new!r}" in err


def test_a_benchmark_without_what_the_command_needs(benchmark_registry, capsys):
    register_benchmark(Benchmark(name="bare", title="Bare"))
    assert main(["score", "--benchmark", "bare", "--annotations", "a.json", "--predictions", "p.json"]) == 2
    assert "benchmark 'bare' has no summary; benchmarks that do: ovo_bench, p3i, proactivebench" in (
        capsys.readouterr().err
    )
    assert main(["baseline", "--benchmark", "bare", "--annotations", "a.json"]) == 2
    assert "benchmark 'bare' has no blind_floor; benchmarks that do: ovo_bench, p3i" in capsys.readouterr().err
    argv = ["run", "--benchmark", "proactivebench", "--annotations", "a.json", "--policy", "silent", "--out", "o"]
    assert main(argv) == 2
    assert "benchmark 'proactivebench' has no runnable; benchmarks that do: ovo_bench, p3i, pvqa" in (
        capsys.readouterr().err
    )
