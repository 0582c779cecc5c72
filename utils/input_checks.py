"""Checks of user input and resources made before any long work, each failing with one line that says what to do.

Input checks raise a ValueError subclass (`InputError` unless the caller passes its own), so a command line can print
a usage error instead of a traceback. `require_free_disk` raises `InsufficientDiskError`, an OSError.
"""
from __future__ import annotations

import json
import operator
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# config.json keys that hold a model's context length, in the order transformers' model families use them.
CONTEXT_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
# OpenVINO devices that stand for a list of others, e.g. "AUTO:GPU,CPU" or "HETERO:GPU,CPU".
VIRTUAL_DEVICES = ("AUTO", "MULTI", "HETERO", "BATCH")
DISK_ADVICE = "Free some space or move the models folder with SPECDEC_MODELS_DIR."


class InputError(ValueError):
    """An input that cannot work; the message is one line that says what to do instead."""


class InsufficientDiskError(OSError):
    """Not enough free disk space for what is about to be written."""


def as_integer(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None, advice: str = "",
               error: type[ValueError] = InputError) -> int:
    """`value` as a plain int within [`minimum`, `maximum`]; NumPy integers pass, bools, floats and strings do not."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        integer = None
    else:
        try:
            integer = operator.index(value)  # int, np.int64, ... but not 3.0
        except TypeError:
            integer = None
    too_small = integer is not None and minimum is not None and integer < minimum
    too_large = integer is not None and maximum is not None and integer > maximum
    if integer is None or too_small or too_large:
        if minimum is not None and maximum is not None:
            bound = f" from {minimum} to {maximum}"
        else:
            bound = f" >= {minimum}" if minimum is not None else f" <= {maximum}" if maximum is not None else ""
        kind = "the string " if isinstance(value, str) else ""
        raise error(f"{name} must be an integer{bound}, got {kind}{value!r}." + (f" {advice}" if advice else ""))
    return integer


RUN_SIZE_ENV = "SPECDEC_RUN_SIZE"
RUN_SIZES = ("full", "quick")


def run_size(environ: dict[str, str] | None = None) -> str:
    """The notebooks' run size from SPECDEC_RUN_SIZE: "full" (default) or "quick" (test command); else InputError."""
    value = (os.environ if environ is None else environ).get(RUN_SIZE_ENV, "full").strip().lower() or "full"
    if value not in RUN_SIZES:
        raise InputError(f"{RUN_SIZE_ENV}={value!r} is not a run size: use one of {', '.join(RUN_SIZES)} "
                         "(or leave it unset for full).")
    return value


def as_probability(value: Any, name: str, *, error: type[ValueError] = InputError) -> float:
    """`value` as a float strictly between 0 and 1 (a confidence threshold); strings are refused."""
    if isinstance(value, (str, bytes)):
        raise error(f"{name} must be a number strictly between 0 and 1, not the string {value!r}: "
                    f"write {name}={value.strip() if isinstance(value, str) else value!s} without quotes.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if isinstance(value, bool) or number is None or not 0.0 < number < 1.0:
        raise error(f"{name} must lie strictly between 0 and 1, got {value!r} "
                    "(e.g. 0.4: the draft keeps proposing while it is at least 40% sure).")
    return number


def check_text(text: Any, name: str = "prompt", *, error: type[ValueError] = InputError) -> str:
    """`text` if it is a str that can be encoded as UTF-8 (no unpaired surrogate characters)."""
    if not isinstance(text, str):
        raise error(f"The {name} must be text (str), got {type(text).__name__}.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as problem:
        character = text[problem.start]
        raise error(
            f"The {name} contains an unpaired surrogate character U+{ord(character):04X} at position {problem.start} "
            "(usually half of an emoji lost in copy-paste or a file read with the wrong encoding): remove it, or "
            "read the text with encoding='utf-8'.") from None
    return text


def context_length(model_dir: Path | str) -> int | None:
    """The model's context length in tokens, read from its folder's config.json (None if it does not say)."""
    config_path = Path(model_dir) / "config.json"
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as problem:
        raise InputError(f"{config_path} cannot be read ({problem}); prepare the model folder again.") from None
    sections = [config, config.get("text_config") or {}]
    for section in sections:
        for key in CONTEXT_LENGTH_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def check_prompt_fits(prompt_tokens: int, max_new_tokens: int, context_tokens: int | None, model: str = "the model",
                      *, error: type[ValueError] = InputError) -> None:
    """Refuse a prompt whose tokens plus max_new_tokens exceed the model's context (None = unknown, not checked)."""
    if context_tokens is None:
        return
    if max_new_tokens >= context_tokens:
        raise error(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the {context_tokens}-token "
                    f"context of {model}: use max_new_tokens below {context_tokens}.")
    if prompt_tokens + max_new_tokens > context_tokens:
        raise error(
            f"The prompt has {prompt_tokens} tokens and max_new_tokens is {max_new_tokens}: {prompt_tokens} + "
            f"{max_new_tokens} exceeds the {context_tokens}-token context of {model}. Shorten the prompt to at most "
            f"{context_tokens - max_new_tokens} tokens, or lower max_new_tokens.")


def available_devices() -> list[str]:
    """OpenVINO's device names on this machine, CPU first, e.g. ['CPU'] or ['CPU', 'GPU.0', 'GPU.1']."""
    import openvino as ov

    return sorted(ov.Core().available_devices, key=lambda name: (name != "CPU", name))


def check_device(device: Any, available: Sequence[str] | None = None, *, name: str = "device",
                 error: type[ValueError] = InputError) -> str:
    """The device name upper-cased if this machine has it, else `error` listing those it has.

    "GPU" passes when a "GPU.0" exists; a virtual device ("AUTO:GPU,CPU") when every device it lists exists.
    """
    if not isinstance(device, str) or not device.strip():
        raise error(f"{name} must be an OpenVINO device name such as 'CPU', got {device!r}.")
    canonical = device.strip().upper()
    known = list(available) if available is not None else available_devices()
    known_upper = [item.upper() for item in known]

    def exists(single: str) -> bool:
        return single in known_upper or any(item.split(".")[0] == single for item in known_upper)

    virtual, _, listed = canonical.partition(":")
    if virtual in VIRTUAL_DEVICES:
        missing = [item for item in listed.split(",") if item and not exists(item)]
    else:
        missing = [] if exists(canonical) else [canonical]
    if missing:
        raise error(f"{name} {device!r}: this machine has no {', '.join(missing)} device. "
                    f"Use one of: {', '.join(known) or 'none found'}.")
    return canonical


def nearest_existing(path: Path | str) -> Path:
    """`path` itself if it exists, else its nearest existing parent (where it would be created)."""
    path = Path(path).expanduser().absolute()
    return next(folder for folder in (path, *path.parents) if folder.exists())


def free_disk_bytes(folder: Path | str) -> int:
    """Free bytes on the file system that holds `folder` (or would hold it, if it does not exist yet)."""
    return shutil.disk_usage(nearest_existing(folder)).free


def require_free_disk(folder: Path | str, needed_bytes: float, *, what: str = "", margin: float = 1.1,
                      advice: str = DISK_ADVICE, error: type[Exception] = InsufficientDiskError) -> None:
    """Raise `error` unless `folder`'s file system has `needed_bytes` times `margin` free."""
    existing = nearest_existing(folder)
    free = free_disk_bytes(existing)
    if free < needed_bytes * margin:
        purpose = f" {what}" if what else ""
        raise error(f"Not enough free disk space in {existing}{purpose}: need about {needed_bytes * margin / 1e9:.1f} "
                    f"GB, {free / 1e9:.1f} GB free. {advice}")
