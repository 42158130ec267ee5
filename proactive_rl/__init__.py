"""proactive_rl: RL post-training for proactive multimodal assistants (docs/spec.md §2, §3, §8, §9)."""

__version__ = "0.1.0"
