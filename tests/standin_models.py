"""Tiny stand-ins of the source articles' models: same architectures and config fields, random weights.

- Dolly v2 3B / 7B: GPT-NeoX checkpoints (Hugging Face format, bf16 safetensors) with a byte-level BPE
  tokenizer trained here with `tokenizers`, shared by the pair, and Dolly's special tokens.
- Phi-3-mini-4k-instruct (phi3) and FastDraft-50M (llama): checkpoints with a SentencePiece-style BPE
  tokenizer with byte fallback (Llama/Phi-3 kind), shared by the pair, and Phi-3's chat tokens.

`export_openvino` turns a checkpoint into an OpenVINO folder with the project's own
`utils.models.optimum_export` (optimum-cli), in the weight format of the real pre-converted model.
Everything is seconds to build; `repository_files` reads a folder as a hub repository's files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from utils.decoding.prompts import PROMPTS

SEED = 1234
DOLLY_SPECIAL_TOKENS = ("### End", "### Instruction:", "### Response:")
PHI3_ADDED_TOKENS = ("<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>")
# The chat format of Phi-3 (system/user/assistant turns closed by <|end|>), written for the stand-in.
PHI3_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
)


@dataclass(frozen=True)
class StandInSize:
    """The tiny dimensions of one stand-in."""

    hidden: int
    layers: int
    heads: int


DOLLY_3B_SIZE = StandInSize(hidden=64, layers=2, heads=4)
DOLLY_7B_SIZE = StandInSize(hidden=128, layers=3, heads=4)
PHI3_MINI_SIZE = StandInSize(hidden=128, layers=2, heads=4)  # 128: int4's default group size divides it
FASTDRAFT_SIZE = StandInSize(hidden=64, layers=2, heads=4)


def training_text() -> list[str]:
    """Lines to train the tokenizers on: the course's own prompts, so they tokenize into few pieces."""
    return [line for prompt in PROMPTS for line in prompt.text.splitlines() if line.strip()]


def padded_vocab_size(tokenizer_size: int, multiple: int = 64) -> int:
    """The embedding rows for a tokenizer, rounded up as the real checkpoints do (50280, 32064)."""
    return -(-tokenizer_size // multiple) * multiple


def gpt_neox_tokenizer(vocab_size: int = 600):
    """A GPT-NeoX-style byte-level BPE tokenizer, trained here, with Dolly's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(training_text(), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                        pad_token="<|padding|>",
                                        additional_special_tokens=list(DOLLY_SPECIAL_TOKENS))
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def sentencepiece_style_tokenizer(vocab_size: int = 700):
    """A Llama/Phi-3-style BPE tokenizer (metaspace, byte fallback, <s> prepended), trained here."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    byte_tokens = [f"<0x{value:02X}>" for value in range(256)]
    backend = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", *byte_tokens],
                                  show_progress=False)
    backend.train_from_iterator(training_text(), trainer)
    # As in Llama's tokenizer.json: byte tokens live in the vocabulary only, not among the added tokens,
    # and the text is not split on spaces before BPE (the metaspace is part of the pieces).
    state = json.loads(backend.to_str())
    state["added_tokens"] = [token for token in state["added_tokens"] if token["content"] not in byte_tokens]
    backend = Tokenizer.from_str(json.dumps(state))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", 1)])
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in PHI3_ADDED_TOKENS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<|endoftext|>",
                                        unk_token="<unk>", pad_token="<|endoftext|>")
    tokenizer.chat_template = PHI3_CHAT_TEMPLATE
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


def _save_checkpoint(model, tokenizer, folder: Path, generation: dict) -> Path:
    """Save like the hub's checkpoints: bf16 safetensors, config, tokenizer, generation config."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2))
    return folder


def write_dolly(folder: Path, size: StandInSize, tokenizer) -> Path:
    """A GPT-NeoX checkpoint with the config fields of databricks/dolly-v2-3b/-7b, tiny and random."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(SEED + size.hidden)
    config = GPTNeoXConfig(
        vocab_size=padded_vocab_size(len(tokenizer)), hidden_size=size.hidden, num_hidden_layers=size.layers,
        num_attention_heads=size.heads, intermediate_size=4 * size.hidden, hidden_act="gelu", rotary_pct=0.25,
        rotary_emb_base=10000, max_position_embeddings=2048, initializer_range=0.02, layer_norm_eps=1e-5,
        use_cache=True, use_parallel_residual=True, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
        architectures=["GPTNeoXForCausalLM"],
        custom_pipelines={"text-generation": {"impl": "instruct_pipeline.InstructionTextGenerationPipeline",
                                              "pt": "AutoModelForCausalLM", "tf": "TFAutoModelForCausalLM"}},
    )
    return _save_checkpoint(GPTNeoXForCausalLM(config), tokenizer, folder, {"bos_token_id": 0, "eos_token_id": 0})


def write_phi3_mini(folder: Path, tokenizer, size: StandInSize = PHI3_MINI_SIZE) -> Path:
    """A phi3 checkpoint with the config fields of microsoft/Phi-3-mini-4k-instruct, tiny and random."""
    import torch
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(SEED + 3)
    end_of_text, assistant, end = (tokenizer.convert_tokens_to_ids(token)
                                   for token in ("<|endoftext|>", "<|assistant|>", "<|end|>"))
    config = Phi3Config(
        vocab_size=padded_vocab_size(len(tokenizer)), hidden_size=size.hidden, intermediate_size=2 * size.hidden,
        num_hidden_layers=size.layers, num_attention_heads=size.heads, num_key_value_heads=size.heads,
        hidden_act="silu", max_position_embeddings=4096, original_max_position_embeddings=4096,
        rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None, sliding_window=2047, use_cache=True,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=end_of_text, pad_token_id=end_of_text,
        attention_dropout=0.0, embd_pdrop=0.0, resid_pdrop=0.0, architectures=["Phi3ForCausalLM"],
    )
    generation = {"bos_token_id": 1, "eos_token_id": [end_of_text, assistant, end], "pad_token_id": end_of_text}
    return _save_checkpoint(Phi3ForCausalLM(config), tokenizer, folder, generation)


def write_fastdraft(folder: Path, tokenizer, size: StandInSize = FASTDRAFT_SIZE) -> Path:
    """A llama checkpoint like FastDraft-50M (Phi-3's tokenizer and vocabulary), tiny and random."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED + 50)
    end_of_text, assistant, end = (tokenizer.convert_tokens_to_ids(token)
                                   for token in ("<|endoftext|>", "<|assistant|>", "<|end|>"))
    config = LlamaConfig(
        vocab_size=padded_vocab_size(len(tokenizer)), hidden_size=size.hidden, intermediate_size=2 * size.hidden,
        num_hidden_layers=size.layers, num_attention_heads=size.heads, num_key_value_heads=size.heads,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=end_of_text, pad_token_id=end_of_text,
        architectures=["LlamaForCausalLM"],
    )
    generation = {"bos_token_id": 1, "eos_token_id": [end_of_text, assistant, end], "pad_token_id": end_of_text}
    return _save_checkpoint(LlamaForCausalLM(config), tokenizer, folder, generation)


def export_openvino(checkpoint: Path, destination: Path, weight_format: str) -> Path:
    """`optimum-cli export openvino` of a local checkpoint, as the project runs it (atomic, logged)."""
    from utils.models.optimum_export import export_with_optimum

    return export_with_optimum(str(checkpoint), destination, weight_format, {"stand_in_of": checkpoint.name},
                               local_folder=True)


def repository_files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by relative POSIX path (hidden markers and logs left out), for a fake hub."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.name.startswith(".") and path.name != "export.log"}
