"""Tuning a pair (notebook 05): sweeps, pipeline pools, concurrency, memory, the auto-tuners, the result cache.
Imports `utils.decoding` and below.
"""
