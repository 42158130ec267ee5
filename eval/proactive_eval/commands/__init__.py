"""The `proactive-eval` verbs over episode files: score (PRS / PAUC), the report, the blind floor, baseline rows, and
rebasing moved media (docs/evaluation.md); and over a registered benchmark's official files (`benchmark`: ``score``,
``baseline`` and ``run --benchmark``)."""
