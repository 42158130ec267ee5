"""Benchmarks that need a GPU (not run by ``make bench``): ``python -m benchmarks.gpu.qwen2_5_vl_3b``."""
