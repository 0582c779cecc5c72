"""Shared helpers for the speculative-decoding notebooks.

Modules are small and import their heavy dependencies (openvino, torch,
transformers) lazily, so that `utils` also imports inside the IPEX-LLM kernel,
which has a different set of packages.
"""
