"""What OVO-Bench and StreamingBench Proactive Output share (docs/ovo_bench.md, docs/streamingbench.md): the
prompters, speed and protocols (`run`), the matched-results record (`match`) and the printed table (`report`). Not a
benchmark: nothing is registered here."""
