"""Experiments on the embedded default: scripts that train and measure, outside the library (nothing in
`proactive_rl` imports them). Run from the repository root: ``python -m experiments.<name> --help``."""
