"""Self-speculative decoding (notebook 04): IPEX-LLM's `speculative=True` and its OpenVINO GenAI counterpart.
Importable in the IPEX-LLM kernel too; imports only `utils.decoding` and below."""
