"""Model folders for the notebooks: catalogue, optimum-cli exports, hub downloads, checks, atomic folders and the
Qwen2.5-Coder pair's readiness (built by `maintainers/`). Imports only `utils.system` and top-level `utils` modules."""
