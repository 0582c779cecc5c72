"""Drafts you make yourself (notebook 06): the distilled draft's data, model, training, export, evaluation,
and the trimmed Qwen2.5-Coder draft. Imports `utils.decoding` and below.
"""
