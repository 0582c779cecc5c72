"""Drafts you make yourself: notebook 06's distilled draft (data, model, training, export, evaluation) and the
trimmed Qwen2.5-Coder draft (`draft_*`, `coder_draft_trim`), and notebook 08's EAGLE-3 head (`eagle3_*`).
Imports `utils.decoding` and below.
"""
