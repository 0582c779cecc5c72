"""Model folders as the notebooks use them: the catalogue, exports with optimum-cli, downloads from ModelScope and
the Hugging Face hub, checks, atomic folders, the Qwen2.5-Coder pair's readiness (its builders are `maintainers/`).
Imports `utils.system` and `utils`' top-level modules.
"""
