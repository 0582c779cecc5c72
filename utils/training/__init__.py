"""Drafts you make yourself: notebook 06's distilled draft (data, model, training, export, evaluation:
`draft_*`) and notebook 08's EAGLE-3 head (`eagle3_*`), both built by one scaffold (`scaffold`: settings,
folders, recipes with their code's hash, atomic stages).
Imports `utils.decoding` and below.
"""
