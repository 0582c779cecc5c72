"""Shared helpers for the speculative-decoding notebooks.

Heavy dependencies (openvino, torch, transformers) are imported lazily, so `utils` also imports in the IPEX-LLM
kernel, which has other packages.
"""
