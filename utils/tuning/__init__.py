"""Tuning a pair (notebook 05): sweeps, pipeline pools, concurrency, memory, auto-tuners."""
