"""Run in the IPEX-LLM environment: a tiny random Llama loaded with speculative=True, generated from, its counters.

    .venv-ipex/bin/python tests/ipex_tiny_model_work.py <folder> <max_new_tokens>

Prints one JSON object: IPEX-LLM's raw counters (as the model carries them), what
`utils.selfspec.ipex_self_speculation.read_speculation_stats` made of them, and the token ids of a plain and a
speculative greedy run. tests/test_ipex_self_speculation.py checks them.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

RAW_COUNTERS = ("n_drafted", "n_matched", "draft_num", "accept_num", "n_token_generated")


def build_tiny_llama(folder: Path) -> None:
    """A 2-layer Llama with random (seeded) weights, saved as a Hugging Face folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)


def main(folder: Path, max_new_tokens: int) -> dict:
    import torch

    from utils.decoding.decoding_metrics import ipex_llm_steps
    from utils.selfspec import ipex_self_speculation as ss

    if not (folder / "config.json").is_file():
        build_tiny_llama(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ipex_llm.transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(folder), optimize_model=True, torch_dtype=torch.bfloat16,
                                                     load_in_low_bit="bf16", speculative=True, use_cache=True)
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([[1, 17, 42, 99, 7, 250, 31, 8]])
    plain = ss.generate_greedy(model, ids, max_new_tokens=max_new_tokens, speculative=False)
    speculative = ss.generate_greedy(model, ids, max_new_tokens=max_new_tokens, th_stop_draft=0.0)
    raw = {name: getattr(model, name) for name in RAW_COUNTERS}
    stats = speculative.stats
    return {"raw": {name: [int(v) for v in value] if isinstance(value, list) else int(value)
                    for name, value in raw.items()},
            "stats": {"drafted": stats.drafted, "accepted": stats.accepted, "steps": stats.steps,
                      "tokens_per_step": stats.tokens_per_step, "drafted_per_step": stats.drafted_per_step,
                      "acceptance_rate": stats.acceptance_rate,
                      "main_pass_steps": ipex_llm_steps(stats.tokens_per_step, stats.generated_tokens),
                      "mean_tokens_per_step": stats.mean_tokens_per_step, "generated_tokens": stats.generated_tokens},
            "plain_ids": plain.token_ids, "speculative_ids": speculative.token_ids}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]))))
