"""Self-speculative decoding (notebook 04): IPEX-LLM's `speculative=True` and its OpenVINO GenAI counterpart.
These modules also import inside the IPEX-LLM kernel. Imports `utils.decoding` and below.
"""
