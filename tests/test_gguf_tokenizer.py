"""Tests for maintainers.gguf_tokenizer against OpenVINO GenAI's own reading of the GGUF file."""
from __future__ import annotations

import pytest

from maintainers.gguf_tokenizer import build_tokenizer, read_gguf_tokenizer_fields
from maintainers.offline_pair import gguf_path, openvino_gguf_token_ids
from utils.models.model_check import TOKENIZER_TEST_TEXT, openvino_token_ids

pytestmark = pytest.mark.models  # reads the offline model's GGUF and runs OpenVINO GenAI on it

TEXTS = [
    TOKENIZER_TEST_TEXT,
    "Hello world\nfoo",
    "  leading spaces and trailing   ",
    "x = [1, 22, 333]; print(x[0]**2)",
    "Ünïcödé — “quotes” ‘and’ dashes… 你好，世界！",
]


@pytest.fixture(scope="module")
def gguf_fields() -> dict:
    return read_gguf_tokenizer_fields(gguf_path())


@pytest.fixture(scope="module")
def rebuilt(gguf_fields: dict):
    return build_tokenizer(gguf_fields)


@pytest.fixture(scope="module")
def reference_ids() -> list[int]:
    """Ids OpenVINO GenAI's GGUF tokenizer gives all TEXTS joined (one pipeline load, about 4 s)."""
    return openvino_gguf_token_ids(gguf_path(), "\n".join(TEXTS))


def test_fields_describe_smollm2(gguf_fields: dict) -> None:
    assert gguf_fields["model"] == "gpt2" and gguf_fields["pre"] == "smollm"
    assert len(gguf_fields["tokens"]) == 49152 == len(gguf_fields["token_types"])
    assert len(gguf_fields["merges"]) > 40000 and all(" " in merge for merge in gguf_fields["merges"][:100])
    assert gguf_fields["tokens"][gguf_fields["eos_token_id"]] == "<|im_end|>"
    assert "<|im_start|>" in gguf_fields["chat_template"]


def test_known_ids(rebuilt) -> None:
    assert rebuilt("Hello world\nfoo", add_special_tokens=False)["input_ids"] == [19556, 905, 198, 15236]
    assert rebuilt.convert_ids_to_tokens([2]) == ["<|im_end|>"]


def test_matches_openvino_genai_gguf_tokenizer(rebuilt, reference_ids: list[int]) -> None:
    ids = rebuilt("\n".join(TEXTS), add_special_tokens=False)["input_ids"]
    assert len(ids) > 150
    assert ids == reference_ids


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_round_trip(rebuilt, text: str) -> None:
    assert rebuilt.decode(rebuilt(text, add_special_tokens=False)["input_ids"]) == text


def test_digits_are_split_one_by_one(rebuilt) -> None:
    assert rebuilt.tokenize("1234567890") == list("1234567890")
    # the `smollm` pre-tokenizer isolates each digit before GPT-2's byte-level split (which keeps " 2026" whole)
    pieces = [piece for piece, _span in rebuilt.backend_tokenizer.pre_tokenizer.pre_tokenize_str("x 2026 ab12")]
    assert pieces == ["x", "Ġ", "2", "0", "2", "6", "Ġab", "1", "2"]


def test_every_control_token_is_one_special_token(rebuilt, gguf_fields: dict) -> None:
    control = [(index, token) for index, (token, kind) in
               enumerate(zip(gguf_fields["tokens"], gguf_fields["token_types"], strict=True)) if kind == 3]
    assert len(control) == 17
    for index, token in control:
        assert rebuilt(f"a{token}b", add_special_tokens=False)["input_ids"] == [
            rebuilt.convert_tokens_to_ids("a"), index, rebuilt.convert_tokens_to_ids("b")], token
    text = "".join(token for _index, token in control) + "plain"
    assert rebuilt.decode(rebuilt(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True) == "plain"


def test_eos_no_bos_and_no_token_type_ids(rebuilt) -> None:
    assert rebuilt.eos_token == "<|im_end|>" and rebuilt.eos_token_id == 2
    encoded = rebuilt("Hello")
    assert "token_type_ids" not in encoded and "token_type_ids" not in rebuilt.model_input_names
    assert encoded["input_ids"] == rebuilt("Hello", add_special_tokens=False)["input_ids"]  # no BOS added


def test_chat_template_is_kept(rebuilt) -> None:
    prompt = rebuilt.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True)
    assert "<|im_start|>user\nHi<|im_end|>" in prompt and prompt.endswith("<|im_start|>assistant\n")


def test_exported_folder_tokenizer_gives_the_same_ids(rebuilt, offline_pair) -> None:
    for text in TEXTS:
        assert openvino_token_ids(offline_pair.main, text) == rebuilt(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("field, value, message", [
    ("pre", "llama-bpe", "Unsupported GGUF pre-tokenizer 'llama-bpe'"),
    ("model", "llama", "Only byte-level BPE"),
])
def test_unsupported_tokenizers_are_refused(gguf_fields: dict, field: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_tokenizer(gguf_fields | {field: value})
