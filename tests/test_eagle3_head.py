"""The head's shapes, its training-time unroll and its folder's config."""
import json

import numpy as np
import pytest
import torch
from draft_standins import head_weight_names

from utils.training.eagle3_folder import ARCHITECTURE, head_config, state_dict_for_folder
from utils.training.eagle3_head import Eagle3Head, HeadShape, shape_from_main_config
from utils.training.eagle3_hidden import TappedData, hidden_state_indices, tapped_layers
from utils.training.eagle3_settings import Eagle3Settings
from utils.training.eagle3_train import split_samples, unroll_batch, unroll_loss
from utils.training.scaffold import TrainingError

MAIN_CONFIG = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
               "intermediate_size": 64, "rms_norm_eps": 1e-5, "vocab_size": 50, "num_hidden_layers": 12,
               "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "eos_token_id": 2}


def small_head(draft_vocab: int = 16) -> Eagle3Head:
    torch.manual_seed(0)
    return Eagle3Head(shape_from_main_config(MAIN_CONFIG, draft_vocab, 48))


def test_shape_follows_the_main():
    shape = shape_from_main_config(MAIN_CONFIG, 16, 48)
    assert (shape.hidden_size, shape.target_hidden_size, shape.head_dim) == (32, 32, 8)
    assert shape.intermediate_size == 48 and shape.rope_theta == 10000.0


def test_qkv_read_twice_the_hidden_size_and_fc_three_times():
    head = small_head()
    attn = head.midlayer.self_attn
    assert attn.q_proj.weight.shape == (32, 64)
    assert attn.k_proj.weight.shape == (16, 64) and attn.v_proj.weight.shape == (16, 64)
    assert head.fc.weight.shape == (32, 96)
    assert head.lm_head.weight.shape == (16, 32)


def test_unroll_returns_one_logit_tensor_per_step():
    head = small_head()
    fused = torch.randn(2, 5, 96)
    tokens = torch.randint(0, 50, (2, 5 + 3 - 1))
    logits = head.unrolled_logits(fused, tokens, 3)
    assert len(logits) == 3
    assert all(tuple(x.shape) == (2, 5, 16) for x in logits)


def test_unroll_needs_enough_input_tokens():
    head = small_head()
    with pytest.raises(TrainingError, match="columns"):
        head.unrolled_logits(torch.randn(1, 5, 96), torch.zeros(1, 5, dtype=torch.long), 3)


def test_step_zero_is_causal():
    """Changing the last position's inputs must not change earlier positions' step-0 logits."""
    head = small_head().eval()
    fused = torch.randn(1, 6, 96)
    tokens = torch.randint(0, 50, (1, 8))
    before = head.unrolled_logits(fused, tokens, 1)[0]
    fused2, tokens2 = fused.clone(), tokens.clone()
    fused2[0, -1] += 1.0
    tokens2[0, 5] = (tokens2[0, 5] + 1) % 50
    after = head.unrolled_logits(fused2, tokens2, 1)[0]
    assert torch.allclose(before[0, :5], after[0, :5], atol=1e-5)
    assert not torch.allclose(before[0, 5], after[0, 5])


def test_later_steps_see_only_their_own_chain():
    """Step 1 at position t depends on positions <= t (step 0) and on its own chain, not on position t + 1."""
    head = small_head().eval()
    fused = torch.randn(1, 6, 96)
    tokens = torch.randint(0, 50, (1, 8))
    base = head.unrolled_logits(fused, tokens, 2)[1]
    fused2 = fused.clone()
    fused2[0, 4] += 2.0  # position 4's main state
    changed = head.unrolled_logits(fused2, tokens, 2)[1]
    assert torch.allclose(base[0, :4], changed[0, :4], atol=1e-5)
    assert not torch.allclose(base[0, 4], changed[0, 4])


def test_unroll_matches_a_sequential_chain():
    """Step j of the parallel unroll equals running the chain step by step from one position."""
    head = small_head().eval()
    fused = torch.randn(1, 4, 96)
    tokens = torch.randint(0, 50, (1, 6))
    parallel = head.unrolled_logits(fused, tokens, 3)
    # chain from the last position t = 3: prefix of length 4 at step 0, then two more steps by hand
    t = 3
    with torch.no_grad():
        hidden = head.fc(fused)
        keys, values = [], []
        attn = head.midlayer.self_attn
        out = None
        for step in range(3):
            if step == 0:
                embedded = head.embed_tokens(tokens[:, 0:4])
                q, k, v = head._project(embedded, hidden, torch.arange(4))
                keys, values = [k], [v]
                scores = (q[..., t:t + 1, :] @ k.transpose(-1, -2)) / attn.head_dim ** 0.5
                mixed = scores.softmax(-1) @ v
                state = hidden[:, t:t + 1]
            else:
                embedded = head.embed_tokens(tokens[:, t + step:t + step + 1])
                q, k, v = head._project(embedded, out, torch.tensor([t + step]))
                all_k = torch.cat([keys[0]] + keys[1:] + [k], dim=-2)
                all_v = torch.cat([values[0]] + values[1:] + [v], dim=-2)
                keys.append(k)
                values.append(v)
                mixed = ((q @ all_k.transpose(-1, -2)) / attn.head_dim ** 0.5).softmax(-1) @ all_v
                state = out
            mixed = mixed.transpose(1, 2).reshape(1, 1, -1)
            out = state + attn.o_proj(mixed)
            out = out + head.midlayer.mlp(head.midlayer.post_attention_layernorm(out))
            expected = head.lm_head(head.norm(out))
            assert torch.allclose(parallel[step][0, t], expected[0, 0], atol=1e-4), step


def test_make_batch_labels_shift_by_step():
    tokens = np.array([10, 11, 12, 13, 14], dtype=np.int32)
    targets = np.array([1, 2, 3, 4, 5], dtype=np.int32)  # main's choice at each position
    data = TappedData(tokens, np.zeros((5, 96), dtype=np.float16), targets, np.array([0, 5]), np.array([2]))
    to_draft = np.arange(60)
    batch = unroll_batch(data, [0], 3, to_draft)
    assert batch.next_tokens[0, :4].tolist() == [11, 12, 13, 14]
    assert batch.labels[0, 0].tolist() == [2, 3, 4, 5, -1]
    assert batch.labels[1, 0].tolist() == [3, 4, 5, -1, -1]
    assert batch.labels[2, 0].tolist() == [4, 5, -1, -1, -1]
    assert batch.counted[2, 0].tolist() == [True, True, False, False, False]


def test_unroll_loss_weights_steps_geometrically():
    logits = [torch.zeros(1, 2, 4) for _ in range(3)]
    labels = torch.zeros(3, 1, 2, dtype=torch.long)
    total, per_step = unroll_loss(logits, labels, 0.8)
    assert per_step == pytest.approx([np.log(4)] * 3, rel=1e-5)
    assert float(total) == pytest.approx(np.log(4) * (1 + 0.8 + 0.64), rel=1e-5)


def test_unroll_loss_ignores_missing_labels():
    logits = [torch.zeros(1, 2, 4)]
    total, _ = unroll_loss(logits, torch.full((1, 1, 2), -1), 0.8)
    assert float(total) == 0.0


def test_config_fields_for_optimum_and_genai():
    shape = shape_from_main_config(MAIN_CONFIG, 16, 48)
    config = head_config(shape, MAIN_CONFIG)
    assert config["architectures"] == [ARCHITECTURE] == ["LlamaForCausalLMEagle3"]
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 1
    assert config["target_hidden_size"] == 32 and config["hidden_size"] == 32
    assert config["vocab_size"] == 50 and config["draft_vocab_size"] == 16
    assert config["tie_word_embeddings"] is False
    json.dumps(config)


def test_folder_tensors_use_specforge_names_and_dtypes():
    tensors = state_dict_for_folder(small_head())
    assert set(tensors) == set(head_weight_names())
    assert tensors["d2t"].dtype == torch.int64 and tensors["t2d"].dtype == torch.bool
    assert tensors["midlayer.self_attn.q_proj.weight"].shape == (32, 64)
    assert "embed_tokens.weight" not in state_dict_for_folder(small_head(), include_embedding=False)


@pytest.mark.parametrize("layers, expected", [(30, (2, 15, 27)), (28, (2, 14, 25)), (10, (2, 5, 7))])
def test_tapped_layers(layers, expected):
    assert tapped_layers(layers) == expected
    assert hidden_state_indices(layers) == tuple(i + 1 for i in expected)


def test_too_shallow_main_is_refused():
    with pytest.raises(TrainingError, match="at least 10"):
        tapped_layers(9)


def test_split_keeps_validation_apart():
    train, val = split_samples(40, 0.1, 0)
    assert len(val) == 4 and not set(train) & set(val) and len(train) + len(val) == 40


def test_presets_are_valid_and_reference_is_bigger():
    quick, reference = Eagle3Settings.preset("quick"), Eagle3Settings.preset("reference")
    assert reference.prompts > quick.prompts and reference.epochs * reference.prompts > quick.epochs * quick.prompts
    with pytest.raises(TrainingError):
        Eagle3Settings.preset("huge")
    assert Eagle3Settings.preset("quick", step_weight=1.0).step_weight == 1.0  # every step weighted alike: the upper end
    for weight in (0.0, 1.5):  # no weight at all for later steps, or more than the first
        with pytest.raises(TrainingError, match="step_weight"):
            Eagle3Settings.preset("quick", step_weight=weight)


def test_head_shape_refuses_inconsistent_sizes():
    with pytest.raises(TrainingError):
        HeadShape(32, 32, 64, 4, 3, 8, 1e-5, 1e4, 50, 16)  # heads not a multiple of KV heads
    with pytest.raises(TrainingError):
        HeadShape(32, 32, 64, 4, 2, 8, 1e-5, 1e4, 50, 60)  # draft vocabulary larger than vocabulary
