"""Decoding with OpenVINO GenAI and measuring it: pipelines, runs, the measured quantities, the formula,
step-by-step streaming, prompts, the transformers baseline, the one measurement loop.
Imports `utils.models`, `utils.system` and `utils`' top-level modules.
"""
