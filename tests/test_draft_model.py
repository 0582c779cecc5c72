"""Tests for utils.training.draft_model on tiny tensors and configs: the draft's config taken from the main's, the
projection's directions, the data's vocabulary, and the tied output layer.

(tests/test_draft_train.py covers the subset round trip, building and expanding a draft, and training.)
"""
from __future__ import annotations

import pytest
import torch
from draft_standins import VOCAB, tiny_main_config, tiny_settings

from utils.training import draft_model as dm
from utils.training.draft_data import TrainingData
from utils.training.scaffold import Sample, TrainingError


def test_the_draft_config_keeps_the_mains_tokens_and_rope_at_the_drafts_own_size() -> None:
    main = tiny_main_config()
    main.rope_parameters = {"rope_type": "default", "rope_theta": 12345.0}
    settings = tiny_settings(hidden_size=12, attention_heads=3, key_value_heads=1, layers=2, intermediate_size=20)
    config = dm.draft_config(main, settings)
    assert (config.vocab_size, config.bos_token_id, config.eos_token_id, config.pad_token_id) == (VOCAB, 1, 2, 2)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.intermediate_size) == (12, 2, 3, 1, 20)
    assert config.head_dim == 12 // 3
    assert config.rope_parameters["rope_theta"] == 12345.0 and config.tie_word_embeddings
    assert config.rms_norm_eps == main.rms_norm_eps
    assert dm.draft_config(main, settings, vocab_size=7).vocab_size == 7  # a compact draft


def test_the_drafts_context_is_capped_at_2048_positions() -> None:
    long_context = tiny_main_config()
    long_context.max_position_embeddings = 32768
    assert dm.draft_config(long_context, tiny_settings()).max_position_embeddings == 2048
    assert dm.draft_config(tiny_main_config(), tiny_settings()).max_position_embeddings == 128


def test_a_projection_keeps_the_strongest_directions_first() -> None:
    torch.manual_seed(1)
    basis, _ = torch.linalg.qr(torch.randn(6, 6))
    strengths = torch.tensor([5.0, 3.0, 2.0, 1.0, 0.5, 0.1])
    embeddings = torch.randn(200, 6) @ torch.diag(strengths) @ basis.T
    projected = dm.projected_embeddings(embeddings, 3)
    energy = (projected ** 2).sum(dim=0)
    assert projected.shape == (200, 3) and energy[0] > energy[1] > energy[2]
    columns = projected.T @ projected  # the directions are orthogonal: no energy is counted twice
    assert torch.allclose(columns - torch.diag(torch.diag(columns)), torch.zeros(3, 3), atol=1e-2 * energy[0].item())
    full = dm.projected_embeddings(embeddings, 6)
    assert torch.equal(full, embeddings) and full.data_ptr() != embeddings.data_ptr()  # a copy


def test_the_projection_is_detached_from_the_mains_graph() -> None:
    embeddings = torch.randn(10, 4, requires_grad=True)
    assert not dm.projected_embeddings(embeddings, 2).requires_grad


def sample(token_ids: list[int]) -> Sample:
    return Sample(sample_id=0, task="chat", opener="", kind="greedy", user_text="", token_ids=token_ids, loss_start=0,
                  answer_start=0)


def test_the_data_vocabulary_is_every_token_the_samples_use() -> None:
    data = TrainingData([sample([5, 3, 5]), sample([39, 0])])
    assert dm.data_vocabulary(data, VOCAB).tolist() == [0, 3, 5, 39]
    assert dm.data_vocabulary(data, VOCAB, restrict=False).tolist() == list(range(VOCAB))


def test_a_draft_must_be_as_wide_as_its_initial_embeddings() -> None:
    settings = tiny_settings()
    with pytest.raises(TrainingError, match="Initial embeddings are 5 wide, the draft 8"):
        dm.build_draft(tiny_main_config(), torch.zeros(VOCAB, 5), settings)


def test_a_new_draft_starts_from_its_norm_setting_and_its_seed() -> None:
    settings = tiny_settings(final_norm_init=0.5)
    initial = torch.randn(VOCAB, settings.hidden_size)
    first, second = (dm.build_draft(tiny_main_config(), initial, settings) for _ in range(2))
    assert torch.all(first.model.norm.weight == 0.5)
    assert torch.equal(first.model.layers[0].mlp.up_proj.weight, second.model.layers[0].mlp.up_proj.weight)
    other_seed = dm.build_draft(tiny_main_config(), initial, tiny_settings(final_norm_init=0.5, seed=1))
    assert not torch.equal(first.model.layers[0].mlp.up_proj.weight, other_seed.model.layers[0].mlp.up_proj.weight)


def test_the_drafts_output_layer_is_its_embedding_matrix() -> None:
    draft = dm.build_draft(tiny_main_config(), torch.randn(VOCAB, 8), tiny_settings())
    assert draft.get_output_embeddings().weight.data_ptr() == draft.get_input_embeddings().weight.data_ptr()
    every_tensor = sum(tensor.numel() for tensor in draft.state_dict().values())  # lists lm_head.weight as well
    assert sum(p.numel() for p in draft.parameters()) == every_tensor - VOCAB * 8  # counted once
