"""Small reproducible experiments that run on a CPU (e.g. `suggestion_sweep`: ProactiveBench's r_p sweep)."""
