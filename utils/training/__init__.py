"""Drafts you train yourself: notebook 06's distilled draft (`draft_*`) and notebook 08's EAGLE-3 head
(`eagle3_*`), both built by `scaffold` (settings, cached folders whose recipes hash their code, atomic stages).
Imports `utils.decoding` and below.
"""
