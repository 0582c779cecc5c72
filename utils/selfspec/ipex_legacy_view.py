"""A view of a Hugging Face model folder that transformers 4.37 (pinned by IPEX-LLM) loads correctly.

Newer transformers and tokenizers write files 4.37 misreads (silently, for RoPE) or rejects: `legacy_model_view`
writes fixed copies of the small files into a new folder and links the weights. Standard library only.
"""
from __future__ import annotations

import json
from pathlib import Path


class LegacyViewError(ValueError):
    """A model folder that cannot be viewed for transformers 4.37; the message says what to do."""


def check_hf_folder(folder: Path | str) -> Path:
    """The Hugging Face model folder, checked before anything is loaded."""
    folder = Path(folder).expanduser()
    how = ("Prepare it from the main environment: `python3 tutorial.py lab`, or "
           "`.venv/bin/python -m maintainers.offline_pair` in the repository.")
    if not folder.is_dir():
        problem = "is a file, not a folder" if folder.exists() else "does not exist"
        raise LegacyViewError(f"Model folder {folder} {problem}. {how}")
    missing = [name for name in ("config.json", "tokenizer.json") if not (folder / name).is_file()]
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        missing.append("*.safetensors")
    if missing:
        raise LegacyViewError(f"Model folder {folder} is incomplete (missing {', '.join(missing)}). {how}")
    return folder


def legacy_config(config: dict) -> dict:
    """A config.json 4.37 reads as meant: transformers >= 5 nests ``rope_theta`` under ``rope_parameters`` (4.37
    would silently use 10000: wrong positions) and writes ``dtype`` instead of ``torch_dtype``."""
    fixed = dict(config)
    rope = fixed.get("rope_parameters") or {}
    if "rope_theta" not in fixed and "rope_theta" in rope:
        fixed["rope_theta"] = rope["rope_theta"]
    if rope.get("rope_type", "default") != "default" and "rope_scaling" not in fixed:
        raise LegacyViewError(f"RoPE type {rope['rope_type']!r} cannot be translated for transformers 4.37.")
    if "torch_dtype" not in fixed and "dtype" in fixed:
        fixed["torch_dtype"] = fixed["dtype"]
    return fixed


def legacy_tokenizer_json(tokenizer: dict) -> dict:
    """A tokenizer.json `tokenizers` 0.15 (pinned by transformers 4.37) parses: newer ones write BPE merges as
    ``["a", "b"]`` pairs and add ``ignore_merges``; 0.15 expects ``"a b"`` strings and rejects the new key."""
    fixed = json.loads(json.dumps(tokenizer))
    model = fixed.get("model", {})
    if model.get("type") == "BPE":
        merges = []
        for merge in model.get("merges", []):
            if isinstance(merge, list):
                if any(" " in part for part in merge):
                    raise LegacyViewError("A BPE merge contains a space; it cannot be written in the old format.")
                merge = " ".join(merge)
            merges.append(merge)
        model["merges"] = merges
        model.pop("ignore_merges", None)
    return fixed


def legacy_tokenizer_config(config: dict, chat_template: str | None) -> dict:
    """tokenizer_config.json for transformers 4.37: a class it knows and the chat template inline."""
    fixed = dict(config)
    fixed["tokenizer_class"] = "PreTrainedTokenizerFast"
    fixed.pop("backend", None)
    fixed["model_input_names"] = ["input_ids", "attention_mask"]  # token_type_ids would break generate()
    if chat_template and "chat_template" not in fixed:
        fixed["chat_template"] = chat_template
    return fixed


def legacy_model_view(folder: Path | str, view: Path | str) -> Path:
    """Write and return `view`: fixed small files, weights symlinked (not copied). Safe to call again."""
    source = check_hf_folder(folder).resolve()
    view = Path(view)
    view.mkdir(parents=True, exist_ok=True)
    read = lambda name: json.loads((source / name).read_text(encoding="utf-8"))  # noqa: E731
    write = lambda name, data: (view / name).write_text(json.dumps(data, indent=1, ensure_ascii=False),  # noqa: E731
                                                        encoding="utf-8")
    write("config.json", legacy_config(read("config.json")))
    write("tokenizer.json", legacy_tokenizer_json(read("tokenizer.json")))
    template_file = source / "chat_template.jinja"
    template = template_file.read_text(encoding="utf-8") if template_file.is_file() else None
    tokenizer_config = read("tokenizer_config.json") if (source / "tokenizer_config.json").is_file() else {}
    write("tokenizer_config.json", legacy_tokenizer_config(tokenizer_config, template))
    for link in view.iterdir():  # an earlier call's links: made again below, or gone with their file
        if link.is_symlink():
            link.unlink()
    for item in source.iterdir():
        if item.name in {"config.json", "tokenizer.json", "tokenizer_config.json"} or item.name.startswith("."):
            continue
        (view / item.name).unlink(missing_ok=True)  # a copy where a link belongs
        (view / item.name).symlink_to(item)
    return view
