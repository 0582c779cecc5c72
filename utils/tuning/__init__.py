"""Tuning a pair (notebook 05): sweeps, pipeline pools, the memory probe, auto-tuners."""
