"""Make a draft that cannot pair with its main model: same weights, a tokenizer with only part of the BPE merges.

Shows what `model_check.check_pair` (and OpenVINO GenAI) does with it; it still encodes any text, into more tokens.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
from pathlib import Path

from utils.models.atomic_folder import COMPLETE_MARKER, atomic_folder, is_up_to_date, read_marker
from utils.models.model_check import check_model_folder

TOKENIZER_FILES = ("tokenizer.json", "openvino_tokenizer.xml", "openvino_tokenizer.bin",
                   "openvino_detokenizer.xml", "openvino_detokenizer.bin")
NOT_COPIED = (*TOKENIZER_FILES, COMPLETE_MARKER, "export.log")


def _link_or_copy(source: str, destination: str) -> str:
    """Hard-link (no extra disk; the files are never written to again), else copy."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
    return destination


def truncated_merges_tokenizer_json(tokenizer_json: dict, kept_merges_fraction: float) -> dict:
    """A copy of a BPE `tokenizer.json` document that keeps only the first part of its merges."""
    model = tokenizer_json.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"Only BPE tokenizers can be truncated, this one is '{model.get('type')}'.")
    if not 0.0 <= kept_merges_fraction <= 1.0:
        raise ValueError(f"kept_merges_fraction must be between 0 and 1, got {kept_merges_fraction}.")
    merges = model["merges"]
    changed = json.loads(json.dumps(tokenizer_json))
    changed["model"]["merges"] = merges[:int(len(merges) * kept_merges_fraction)]
    return changed


def make_mismatched_draft(source_folder: Path | str, destination: Path | str,
                          kept_merges_fraction: float = 0.5) -> Path:
    """Copy OpenVINO folder `source_folder` to `destination`, tokenizers rebuilt from `kept_merges_fraction` of merges
    (1.0: the same tokenizer, a control). Written atomically; skipped when up to date."""
    source = check_model_folder(source_folder, "source model")
    destination = Path(destination).expanduser()
    if destination.resolve() == source.resolve():
        raise ValueError(f"The mismatched copy needs its own folder, not the source {source}.")
    if not (source / "tokenizer.json").is_file():
        raise ValueError(f"{source} has no tokenizer.json to derive a different tokenizer from.")
    tokenizer_json = truncated_merges_tokenizer_json(
        json.loads((source / "tokenizer.json").read_text(encoding="utf-8")), kept_merges_fraction)
    recipe = {"mismatched_draft_of": str(source.resolve()), "source_build": read_marker(source),
              "kept_merges": len(tokenizer_json["model"]["merges"]),
              "openvino_tokenizers": importlib.metadata.version("openvino-tokenizers")}
    if is_up_to_date(destination, recipe):
        return destination
    import openvino as ov  # the heavy imports only once the input is checked and the work is needed
    from openvino_tokenizers import convert_tokenizer
    from transformers import AutoTokenizer

    with atomic_folder(destination, recipe) as work:
        shutil.copytree(source, work, dirs_exist_ok=True, copy_function=_link_or_copy,
                        ignore=lambda _folder, names: [name for name in names if name in NOT_COPIED])
        (work / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
        hf_tokenizer = AutoTokenizer.from_pretrained(work)
        openvino_tokenizer, openvino_detokenizer = convert_tokenizer(hf_tokenizer, with_detokenizer=True)
        ov.save_model(openvino_tokenizer, work / "openvino_tokenizer.xml")
        ov.save_model(openvino_detokenizer, work / "openvino_detokenizer.xml")
    return destination
