"""Input checks of EAGLE-3 heads and their mains: each fails in a second, saying what to do, before any long work."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from utils.training.scaffold import TrainingError

MIN_MAIN_LAYERS = 10  # OpenVINO GenAI taps layers (2, N/2, N-3) (`utils.training.eagle3_hidden.tapped_layers`)

HEAD_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM")
HEAD_FIELDS = ("hidden_size", "target_hidden_size", "intermediate_size", "num_attention_heads",
               "num_key_value_heads", "rms_norm_eps", "vocab_size", "draft_vocab_size")


def read_config(folder: Path, role: str) -> dict:
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise TrainingError(f"The {role} folder {folder} has no config.json: is it a model folder?")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise TrainingError(f"The {role}'s config.json in {folder} is not valid JSON ({error}).") from None


def check_main(main_dir: Path) -> dict:
    """The main's config; raise unless GenAI can tap it (>= 10 decoder layers)."""
    config = read_config(Path(main_dir), "main model")
    layers = config.get("num_hidden_layers") or (config.get("text_config") or {}).get("num_hidden_layers")
    if not isinstance(layers, int) or layers < MIN_MAIN_LAYERS:
        raise TrainingError(f"The main {main_dir} has {layers} decoder layers; EAGLE-3 in OpenVINO GenAI taps layers "
                            f"(2, N/2, N-3) and needs at least {MIN_MAIN_LAYERS}. Use a deeper main model.")
    return config


def check_head_folder(head_dir: Path) -> dict:
    """The head's config; raise unless the folder is a SpecForge-layout head with tokenizer files."""
    head_dir = Path(head_dir)
    config = read_config(head_dir, "EAGLE-3 head")
    architectures = config.get("architectures") or []
    if not any(name in HEAD_ARCHITECTURES for name in architectures):
        raise TrainingError(f"{head_dir} is not an EAGLE-3 head: architectures {architectures}, expected one of "
                            f"{list(HEAD_ARCHITECTURES)} (optimum-intel exports only those as EAGLE-3).")
    missing = [name for name in HEAD_FIELDS if name not in config]
    if missing:
        raise TrainingError(f"The head's config.json in {head_dir} lacks {', '.join(missing)}.")
    if not (head_dir / "tokenizer.json").is_file() and not (head_dir / "openvino_tokenizer.xml").is_file():
        raise TrainingError(f"The head folder {head_dir} has no tokenizer files. openvino_genai.draft_model builds the "
                            "head's tokenizer from its folder: copy the main's tokenizer files (tokenizer.json, "
                            "tokenizer_config.json, ...) into it.")
    return config


def tokenizer_fingerprint(folder: Path) -> str | None:
    """SHA-256 of the folder's tokenizer.json vocabulary and added tokens (None if there is no tokenizer.json)."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    key = {"vocab": model.get("vocab"), "merges": model.get("merges"),
           "added": [(t.get("id"), t.get("content")) for t in data.get("added_tokens", [])]}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def check_head_matches_main(head_dir: Path, main_dir: Path) -> None:
    """Raise unless the head was built for this main: hidden size, vocabulary and tokenizer."""
    head = check_head_folder(Path(head_dir))
    main = check_main(Path(main_dir))
    text = main.get("text_config") or {}
    main_hidden = main.get("hidden_size") or text.get("hidden_size")
    main_vocab = main.get("vocab_size") or text.get("vocab_size")
    if head["target_hidden_size"] != main_hidden:
        raise TrainingError(f"The head reads hidden states of width {head['target_hidden_size']} (target_hidden_size) "
                            f"but the main {main_dir} has hidden_size {main_hidden}: this head was built for another "
                            "main model.")
    if head["vocab_size"] != main_vocab:
        raise TrainingError(f"The head's vocab_size {head['vocab_size']} differs from the main's {main_vocab}: "
                            "its d2t maps into another vocabulary.")
    if head["draft_vocab_size"] > head["vocab_size"]:
        raise TrainingError(f"draft_vocab_size {head['draft_vocab_size']} exceeds vocab_size {head['vocab_size']}.")
    head_print, main_print = tokenizer_fingerprint(Path(head_dir)), tokenizer_fingerprint(Path(main_dir))
    if head_print is not None and main_print is not None and head_print != main_print:
        raise TrainingError(f"The head's tokenizer ({head_dir}/tokenizer.json) differs from the main's "
                            f"({main_dir}/tokenizer.json): draft and main must share the tokenizer.")


def check_exported_head(exported_dir: Path, main_dir: Path | None = None) -> None:
    """Raise unless `exported_dir` is an OpenVINO export of a head with `eagle3_mode` (and matches `main_dir`)."""
    exported_dir = Path(exported_dir)
    if not (exported_dir / "openvino_model.xml").is_file():
        raise TrainingError(f"{exported_dir} has no openvino_model.xml: export the head first "
                            "(optimum-cli export openvino --task text-generation-with-past --trust-remote-code).")
    if not has_eagle3_mode(exported_dir):
        raise TrainingError(f"{exported_dir} carries no eagle3_mode in its runtime info: it was not exported as an "
                            "EAGLE-3 head (config.json architectures must be LlamaForCausalLMEagle3), and GenAI would "
                            "run it as an ordinary draft model.")
    if not (exported_dir / "openvino_tokenizer.xml").is_file():
        raise TrainingError(f"{exported_dir} has no openvino_tokenizer.xml: the head folder lacked the main's "
                            "tokenizer files when it was exported.")
    if main_dir is not None:
        check_head_matches_main(exported_dir, Path(main_dir))


def check_export_packages() -> None:
    """Raise unless `einops` and `diffusers` import: transformers refuses optimum-intel's head modelling file
    without them (`ImportError: This modeling file requires the following packages ...`)."""
    import importlib.util

    missing = [name for name in ("einops", "diffusers") if importlib.util.find_spec(name) is None]
    if missing:
        raise TrainingError(f"Exporting an EAGLE-3 head needs {' and '.join(missing)} (optimum-intel's head modelling "
                            "file imports them). The project's lock file pins both: run `python3 tutorial.py setup`.")


def has_eagle3_mode(exported_dir: Path) -> bool:
    """True if the exported model's runtime info carries `eagle3_mode` set to true."""
    import openvino as ov

    model = ov.Core().read_model(str(Path(exported_dir) / "openvino_model.xml"))
    if not model.has_rt_info("eagle3_mode"):
        return False
    value = model.get_rt_info("eagle3_mode")
    text = value.astype(str) if hasattr(value, "astype") else str(value)
    return text.strip().lower() in ("true", "1", "yes")


def require_eagle3_mode(exported_dir: Path) -> None:
    """Raise unless the export carries `eagle3_mode` (else GenAI would run it as an ordinary draft and fail)."""
    if not has_eagle3_mode(Path(exported_dir)):
        raise TrainingError(f"The export {exported_dir} carries no eagle3_mode in its runtime info: optimum-intel did "
                            "not recognise the folder as an EAGLE-3 head (its config.json needs architectures "
                            "[\"LlamaForCausalLMEagle3\"]).")
