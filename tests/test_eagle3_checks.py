"""The input checks, on small fake folders (no model is loaded)."""
import json

import pytest

from utils.training.eagle3_checks import check_head_folder, check_head_matches_main, check_main, tokenizer_fingerprint
from utils.training.scaffold import TrainingError

MAIN = {"hidden_size": 32, "num_hidden_layers": 12, "vocab_size": 50, "num_attention_heads": 4}
HEAD = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 32, "target_hidden_size": 32,
        "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
        "vocab_size": 50, "draft_vocab_size": 16}
TOKENIZER = {"model": {"vocab": {"a": 0, "b": 1}, "merges": []}, "added_tokens": [{"id": 2, "content": "<|im_end|>"}]}


def folder(tmp_path, name, config, tokenizer=TOKENIZER):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (path / "tokenizer.json").write_text(json.dumps(tokenizer))
    return path


def test_a_matching_head_passes(tmp_path):
    check_head_matches_main(folder(tmp_path, "head", HEAD), folder(tmp_path, "main", MAIN))


def test_main_with_fewer_than_ten_layers(tmp_path):
    with pytest.raises(TrainingError, match="at least 10"):
        check_main(folder(tmp_path, "main", MAIN | {"num_hidden_layers": 9}))


def test_folder_without_config(tmp_path):
    with pytest.raises(TrainingError, match="no config.json"):
        check_main(tmp_path)


def test_head_without_tokenizer(tmp_path):
    with pytest.raises(TrainingError, match="no tokenizer files"):
        check_head_folder(folder(tmp_path, "head", HEAD, tokenizer=None))


def test_not_an_eagle3_architecture(tmp_path):
    with pytest.raises(TrainingError, match="not an EAGLE-3 head"):
        check_head_folder(folder(tmp_path, "head", HEAD | {"architectures": ["LlamaForCausalLM"]}))


def test_missing_config_field(tmp_path):
    config = {k: v for k, v in HEAD.items() if k != "draft_vocab_size"}
    with pytest.raises(TrainingError, match="draft_vocab_size"):
        check_head_folder(folder(tmp_path, "head", config))


def test_target_hidden_size_mismatch(tmp_path):
    with pytest.raises(TrainingError, match="target_hidden_size"):
        check_head_matches_main(folder(tmp_path, "head", HEAD | {"target_hidden_size": 64}),
                                folder(tmp_path, "main", MAIN))


def test_vocabulary_mismatch(tmp_path):
    with pytest.raises(TrainingError, match="vocab_size"):
        check_head_matches_main(folder(tmp_path, "head", HEAD | {"vocab_size": 60}), folder(tmp_path, "main", MAIN))


def test_tokenizer_mismatch(tmp_path):
    other = {"model": {"vocab": {"a": 0, "c": 1}, "merges": []}, "added_tokens": []}
    with pytest.raises(TrainingError, match="tokenizer"):
        check_head_matches_main(folder(tmp_path, "head", HEAD, other), folder(tmp_path, "main", MAIN))


def test_fingerprint_ignores_formatting_but_not_tokens(tmp_path):
    a = folder(tmp_path, "a", MAIN)
    b = tmp_path / "b"
    b.mkdir()
    (b / "tokenizer.json").write_text(json.dumps(TOKENIZER, indent=4))
    assert tokenizer_fingerprint(a) == tokenizer_fingerprint(b)
    (b / "tokenizer.json").write_text(json.dumps(TOKENIZER | {"added_tokens": []}))
    assert tokenizer_fingerprint(a) != tokenizer_fingerprint(b)
