"""Check model folders and pairs before any long work starts, with errors that say what to do."""
from __future__ import annotations

from pathlib import Path

from utils.models.atomic_folder import damaged_files, live_temporaries, read_marker, stale_temporaries
from utils.text_compare import first_divergence

# What OpenVINO GenAI's LLMPipeline reads from a folder.
REQUIRED_OPENVINO_FILES = (
    "openvino_model.xml", "openvino_model.bin",
    "openvino_tokenizer.xml", "openvino_tokenizer.bin",
    "openvino_detokenizer.xml", "openvino_detokenizer.bin",
    "config.json",
)
# Text whose token ids two tokenizers must agree on: digits, whitespace runs, non-ASCII, chat markers.
TOKENIZER_TEST_TEXT = (
    "Hello world\nfoo. Speculative decoding lets a small draft propose tokens.\n"
    "def add(a: int, b: int) -> int:\n    return a + b  # sum\n\n"
    "Digits: 3.14159, 2026-11-29, 1234567890 and 007.\n"
    "Whitespace runs:    four spaces,\t\ttabs,\n\n\nnewlines.\n"
    "Non-ASCII: café, naïve, Straße, 日本語, emoji 🚀, Ελληνικά.\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
)
HOW_TO_GET = ("Prepare it with `python3 tutorial.py lab` (the offline pairs: SmolLM2, and Qwen2.5-Coder unless "
              "SPECDEC_SKIP_CODER_PAIR=1 is set; `python -m maintainers.coder_pair --drafts int4` builds that pair's other "
              "draft) or notebook 01 / `python3 tutorial.py prefetch` (hub pairs).")


class ModelFolderError(ValueError):
    """A model folder is missing, incomplete or of the wrong kind."""


class TokenizerMismatchError(ValueError):
    """Draft and main tokenize text differently, so they cannot form a pair."""


def check_model_folder(folder: Path | str, role: str = "model") -> Path:
    """Return `folder` as a Path if OpenVINO GenAI can load it, else raise `ModelFolderError`; with a `.complete`
    marker, files cut short, missing or edited since the build are caught too."""
    folder = Path(folder).expanduser()
    if folder.suffix.lower() == ".gguf":
        raise ModelFolderError(
            f"The {role} {folder} is a GGUF file. OpenVINO GenAI loads a GGUF as a plain main model only, "
            "not as a draft or in a speculative pair: export it with `optimum-cli export openvino` first.")
    if not folder.exists():
        in_progress = live_temporaries(folder) if folder.parent.exists() else []
        interrupted = stale_temporaries(folder) if folder.parent.exists() else []
        hint = (" It is being built right now by another process: wait for that to finish." if in_progress else
                " An interrupted build was found next to it; run the preparation again." if interrupted else "")
        raise ModelFolderError(f"The {role} folder {folder} does not exist.{hint} {HOW_TO_GET}")
    if not folder.is_dir():
        raise ModelFolderError(f"The {role} {folder} is not a folder. {HOW_TO_GET}")
    missing = [name for name in REQUIRED_OPENVINO_FILES
               if not (folder / name).is_file() or (folder / name).stat().st_size == 0]
    if missing:
        raise ModelFolderError(
            f"The {role} folder {folder} is incomplete (missing or empty: {', '.join(missing)}); "
            f"it may be a half-finished export or download. Delete it and prepare it again. {HOW_TO_GET}")
    damaged = damaged_files(folder)
    if damaged:
        raise ModelFolderError(
            f"The {role} folder {folder} is damaged: {'; '.join(damaged[:3])}"
            f"{f' (and {len(damaged) - 3} more)' if len(damaged) > 3 else ''}. Delete it and prepare it again. "
            f"{HOW_TO_GET}")
    return folder


def is_complete(folder: Path) -> bool:
    """True if the project finished building or downloading `folder` (it holds a readable `.complete` marker)."""
    return read_marker(Path(folder)) is not None


def openvino_token_ids(folder: Path, text: str = TOKENIZER_TEST_TEXT) -> list[int]:
    """Ids the folder's own OpenVINO tokenizer gives `text` (no special tokens added)."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(folder))
    return tokenizer.encode(text, add_special_tokens=False).input_ids.data[0].tolist()


def check_pair(main_folder: Path | str, draft_folder: Path | str, text: str = TOKENIZER_TEST_TEXT) -> None:
    """Raise unless both folders load and tokenize `text` to the same ids."""
    main_folder = check_model_folder(main_folder, "main model")
    draft_folder = check_model_folder(draft_folder, "draft model")
    main_ids, draft_ids = openvino_token_ids(main_folder, text), openvino_token_ids(draft_folder, text)
    position = first_divergence(main_ids, draft_ids)
    if position is not None:
        raise TokenizerMismatchError(
            f"Draft and main tokenizers differ: main {main_folder} and draft {draft_folder} tokenize the test "
            f"text differently from token {position} on ({main_ids[position:position + 4]} vs "
            f"{draft_ids[position:position + 4]}). A draft must share its main model's tokenizer: pick a draft "
            "from the same model family (see utils.models.model_catalogue).")
