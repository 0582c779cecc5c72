"""Decoding with OpenVINO GenAI and measuring it: pipelines, runs, metrics, the speed-up formula, step streaming,
prompts, the transformers baseline and the one measurement loop.
"""
