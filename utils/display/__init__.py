"""What the notebooks show: plots, the playground and formula widgets, the device picker.
Imports any package above it in the table of utils/README.md (the maintainers' tools live in `maintainers/`).
"""
