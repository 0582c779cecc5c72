"""Tiny stand-ins for the training tests: settings, a main-model config, easy-to-learn data, a head's weight names."""
from __future__ import annotations

import numpy as np

from utils.training.draft_data import TrainingData
from utils.training.draft_settings import DraftTrainingSettings
from utils.training.scaffold import Sample

VOCAB = 40


def tiny_settings(**changes) -> DraftTrainingSettings:
    base = dict(name="tiny", prompts=2, hidden_size=8, layers=1, attention_heads=2, key_value_heads=1,
                intermediate_size=16, epochs=30.0, batch_size=4, learning_rate=1e-2,
                warmup_steps=0, teacher_top_k=0, distill_weight=0.0, seed=0)
    base.update(changes)
    return DraftTrainingSettings(**base)


def tiny_main_config():
    import transformers

    return transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                    num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                    bos_token_id=1, eos_token_id=2, pad_token_id=2, max_position_embeddings=128)


def pattern_data(samples: int = 12, with_teacher: bool = False) -> TrainingData:
    """Sequences that count upwards from 10 (mod 30, +10): easy to learn, uses only some of the vocabulary."""
    rows = []
    for index in range(samples):
        start = index % 7
        prefix = [1, 3, 4]  # "template": not scored
        body = [10 + (start + step) % 20 for step in range(12)]
        rows.append(Sample(sample_id=index, task="chat", opener="", kind="greedy" if index % 2 == 0 else "sampled",
                              user_text=f"prompt {index // 2}", token_ids=prefix + body + [2], loss_start=3,
                              answer_start=6))
    data = TrainingData(rows, stats={"tokens_generated": 0})
    if with_teacher:  # the teacher's first choice is the next token at every position, its second token 10
        data.teacher_ids = [np.array([[following, 10] for following in sample.token_ids[1:] + [2]], dtype=np.int32)
                            for sample in rows]
        data.teacher_logprobs = [np.log(np.tile(np.array([[0.9, 0.1]]), (len(sample.token_ids), 1))).astype(np.float16)
                                 for sample in rows]
    return data


def head_weight_names(include_embedding: bool = True) -> list[str]:
    """The tensor names of a head in the SpecForge layout (what `save_head_folder` writes)."""
    names = ["midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
             "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight",
             "midlayer.mlp.gate_proj.weight", "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight",
             "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
             "midlayer.post_attention_layernorm.weight", "fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"]
    return names + (["embed_tokens.weight"] if include_embedding else [])
