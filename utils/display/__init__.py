"""What the notebooks show: plots, the playground and formula widgets, the device picker.
Imports any package above it in the table of utils/README.md (never `utils.maintenance`).
"""
