"""Rebuild a correct Hugging Face tokenizer from the metadata inside a GGUF file.

transformers 5.5 reads SmolLM2's GGUF weights correctly but produces a broken
tokenizer (spaces become id 0). The GGUF holds everything needed to build the
right one: the token list, the BPE merges, the special tokens and the name of
the pre-tokenizer (`smollm`: split digits one by one, then GPT-2 byte-level).
"""
from __future__ import annotations

from pathlib import Path

SUPPORTED_PRE_TOKENIZERS = {"smollm"}
CONTROL_TOKEN_TYPE = 3  # llama.cpp's token type for special/control tokens


def read_gguf_tokenizer_fields(gguf_path: Path) -> dict:
    """The tokenizer metadata of a GGUF file as plain Python values."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))

    def field(name: str, default=None):
        entry = reader.fields.get(name)
        return default if entry is None else entry.contents()

    return {
        "model": field("tokenizer.ggml.model"),
        "pre": field("tokenizer.ggml.pre"),
        "tokens": field("tokenizer.ggml.tokens"),
        "token_types": field("tokenizer.ggml.token_type"),
        "merges": field("tokenizer.ggml.merges"),
        "bos_token_id": field("tokenizer.ggml.bos_token_id"),
        "eos_token_id": field("tokenizer.ggml.eos_token_id"),
        "unknown_token_id": field("tokenizer.ggml.unknown_token_id"),
        "padding_token_id": field("tokenizer.ggml.padding_token_id"),
        "add_bos_token": bool(field("tokenizer.ggml.add_bos_token", False)),
        "chat_template": field("tokenizer.chat_template"),
    }


def build_tokenizer(fields: dict, end_of_turn_token: str = "<|im_end|>"):
    """A `PreTrainedTokenizerFast` equivalent to the GGUF's tokenizer.

    `end_of_turn_token` becomes the eos token: chat generation must stop at the
    end of the assistant's turn, whatever id the GGUF calls eos.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if fields["model"] != "gpt2":
        raise ValueError(f"Only byte-level BPE ('gpt2') GGUF tokenizers are supported, got '{fields['model']}'.")
    if fields["pre"] not in SUPPORTED_PRE_TOKENIZERS:
        raise ValueError(
            f"Unsupported GGUF pre-tokenizer '{fields['pre']}' (supported: {sorted(SUPPORTED_PRE_TOKENIZERS)})."
        )
    tokens: list[str] = list(fields["tokens"])
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = [tuple(merge.split(" ", 1)) for merge in fields["merges"]]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    backend.decoder = decoders.ByteLevel()
    special = [
        AddedToken(token, special=True, normalized=False)
        for token, token_type in zip(tokens, fields["token_types"], strict=True)
        if token_type == CONTROL_TOKEN_TYPE
    ]
    backend.add_special_tokens(special)

    def token_at(index):
        return tokens[index] if index is not None else None

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=token_at(fields["bos_token_id"]),
        eos_token=end_of_turn_token,
        unk_token=token_at(fields["unknown_token_id"]),
        pad_token=token_at(fields["padding_token_id"]),
        clean_up_tokenization_spaces=False,
        model_input_names=["input_ids", "attention_mask"],
    )
    tokenizer.chat_template = fields["chat_template"]
    return tokenizer
