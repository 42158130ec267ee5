"""Shared by every benchmark: free-text content scoring, malformed outputs, speed columns, frame counterfactuals,
the OpenAI-compatible policy and the safe reading of the streaming benchmarks' files (docs/architecture.md)."""
