"""The one builder of OpenVINO GenAI pipelines (`load_pipeline`) for plain, speculative and prompt-lookup decoding.

Plain and speculative runs thus share a backend (continuous batching, same `SchedulerConfig`), a precision and a
thread count. Model folders are checked first, with errors that say what to do.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.input_checks import as_integer, check_device

MODES = ("plain", "speculative", "prompt_lookup")
PRECISIONS = ("default", "f32")
INFERENCE_PRECISIONS = ("default", "f32", "bf16", "f16")  # what `device_properties` accepts (sweeps compare them)
BACKENDS = ("continuous_batching", "stateful")
DEFAULT_NUM_ASSISTANT_TOKENS = 3  # on this project's CPU, verifying K <= 3 costs about one plain step
DEFAULT_MAX_NGRAM_SIZE = 3
# Scheduler token budget per step. GenAI's default (256) split concurrent requests' prompts, which changed
# speculative output (2026.4, notebook 05); 4096 did not, at no measurable cost for a single request.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 4096


class SpeculationSetupError(ValueError):
    """A setting or a model folder that cannot work; the message says what to do instead."""


# --------------------------------------------------------------------------- model folders


def check_main_folder(main_dir: Path | str) -> Path:
    """The main model's location, checked: an OpenVINO folder, or a .gguf file (plain/prompt lookup only)."""
    from utils.models.model_check import check_model_folder

    path = Path(main_dir).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path
    return check_model_folder(path, "main model")


def _starts_with(path: Path, magic: bytes) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(magic)) == magic


def check_draft_folder(draft_dir: Path | str, main_dir: Path | str | None = None) -> Path:
    """The draft model folder, checked before loading anything.

    Raises `SpeculationSetupError` for a GGUF file (GenAI cannot draft with one), `ModelFolderError` for a missing or
    incomplete folder, `TokenizerMismatchError` if the draft tokenizes differently from `main_dir`'s model.
    """
    from utils.models.model_check import check_model_folder, check_pair

    path = Path(draft_dir).expanduser()
    if path.suffix.lower() == ".gguf" or (path.is_file() and _starts_with(path, b"GGUF")):
        raise SpeculationSetupError(
            f"{path} is a GGUF file. OpenVINO GenAI loads GGUF files as a main model only, not as a draft. Export "
            "the draft to an OpenVINO folder (`optimum-cli export openvino --model <hf folder> --weight-format int4 "
            "<folder>`) and pass that folder.")
    if main_dir is None:
        return check_model_folder(path, "draft model")
    check_pair(main_dir, path)
    return path


# --------------------------------------------------------------------------- pipelines


def device_properties(precision: str | None, threads: int | None = None) -> dict[str, Any]:
    """OpenVINO properties: "f32" (or "bf16", "f16") forces that inference precision, "default"/None keeps the device's.

    threads: INFERENCE_NUM_THREADS (None: all cores); one thread gives steadier timings on a shared small machine.
    """
    properties: dict[str, Any] = {}
    if precision in INFERENCE_PRECISIONS and precision != "default":
        properties["INFERENCE_PRECISION_HINT"] = precision
    elif precision not in (None, "default"):
        raise SpeculationSetupError(f"precision must be one of {INFERENCE_PRECISIONS} or None, got '{precision}'.")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise SpeculationSetupError(f"threads must be an integer >= 1 or None (all cores), got {threads!r}.")
        properties["INFERENCE_NUM_THREADS"] = threads
    return properties


# What INFERENCE_PRECISION_HINT=f32 leaves inexact on a CPU. Both roundings depend on how many tokens a pass carries,
# so a (K+1)-token verification pass can pick another token than a one-token plain step:
# - dynamic quantisation (on VNNI/AMX CPUs, activations quantised to int8 for int4/int8 weights); on a 2-core
#   AVX-512 VNNI machine the Qwen2.5-Coder pair's "ground-dates" prompt at K=4 left plain decoding at token 5;
# - the KV cache (u8/f16 by default): a pass reads its new tokens at full precision, later steps from the cache;
#   there, prompt lookup on "code-fibonacci" left plain at token 45 with dynamic quantisation already off.
# With both off every output equalled plain again. Dynamic quantisation is the main model's fast path
# (`maintainers.benchmark --precision f32 --fast-main` measures it); the f32 KV cache costs little.
NO_DYNAMIC_QUANTIZATION: dict[str, Any] = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}
EXACT_KV_CACHE: dict[str, Any] = {"KV_CACHE_PRECISION": "f32"}
EXACT_MAIN_PROPERTIES: dict[str, Any] = {**NO_DYNAMIC_QUANTIZATION, **EXACT_KV_CACHE}


def main_model_properties(precision: str | None, threads: int | None = None, exact: bool = True) -> dict[str, Any]:
    """`device_properties` for the main model; "f32" also makes it exact (`EXACT_MAIN_PROPERTIES`).

    Only the main model's arithmetic must not depend on the pass width; the draft keeps the fast path. With
    exact=False (dynamic quantisation kept) equality with plain is a measurement: it held on one machine, not another.
    """
    properties = device_properties(precision, threads)
    if precision != "f32":
        return properties
    return {**properties, **(EXACT_MAIN_PROPERTIES if exact else EXACT_KV_CACHE)}


def make_scheduler_config(cache_size_gb: int = 0, max_num_batched_tokens: int | None = None) -> Any:
    """A `SchedulerConfig` for the continuous-batching backend; cache_size_gb=0 lets the KV cache grow with demand.

    max_num_batched_tokens=256 (GenAI's default) shows prompt splitting change speculative output (notebook 05).
    """
    import openvino_genai

    cache_size_gb = as_integer(cache_size_gb, "cache_size_gb", minimum=0, advice="0 lets the cache grow with demand.",
                               error=SpeculationSetupError)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS
    config = openvino_genai.SchedulerConfig()
    config.cache_size = cache_size_gb
    config.max_num_batched_tokens = as_integer(max_num_batched_tokens, "max_num_batched_tokens", minimum=1,
                                               advice="Or None for the default.", error=SpeculationSetupError)
    return config


def check_single_thread_precision(device: str, draft_device: str | None, precision: str | None,
                               threads: int | None) -> None:
    """OpenVINO 2026.4's CPU plugin dies with SIGFPE compiling these models in bf16 on one thread: refuse first."""
    if threads != 1 or precision == "f32" or not any(name.startswith("CPU") for name in (device, draft_device or "")):
        return
    import openvino as ov

    if "bf16" in str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")).replace("bfloat16", "bf16"):
        raise SpeculationSetupError(
            "threads=1 with the CPU's default bf16 precision crashes OpenVINO 2026.4 (the process dies with a "
            "floating point exception while compiling). Use precision='f32' with threads=1, or threads=None / >= 2.")


@dataclass
class LoadedPipeline:
    """An `openvino_genai.LLMPipeline` and how it was built."""

    mode: str
    pipeline: Any
    main_dir: Path
    draft_dir: Path | None
    device: str
    precision: str
    backend: str
    load_seconds: float

    @property
    def tokenizer(self) -> Any:
        return self.pipeline.get_tokenizer()

    @property
    def description(self) -> str:
        draft = f", draft={self.draft_dir.name}" if self.draft_dir else ""
        return f"{self.mode} on {self.device} ({self.backend}, precision={self.precision}), main={self.main_dir.name}{draft}"


def load_pipeline(
    mode: str,
    main_dir: Path | str,
    device: str = "CPU",
    *,
    draft_dir: Path | str | None = None,
    draft_device: str | None = None,
    precision: str | None = "default",
    cache_size_gb: int = 0,
    backend: str = "continuous_batching",
    threads: int | None = None,
    max_num_batched_tokens: int | None = None,
    draft_precision: str | None = None,
    exact_main: bool = True,
) -> LoadedPipeline:
    """Build the pipeline for one decoding mode; inputs are checked before any model is loaded.

    The main model gets `main_model_properties(precision, threads, exact_main)`, the draft `device_properties` with
    `draft_precision` (None: the main model's). ``backend="stateful"`` (plain only) omits the scheduler config.
    """
    if mode not in MODES:
        raise SpeculationSetupError(f"Unknown mode '{mode}'. Use one of: {', '.join(MODES)}.")
    if backend not in BACKENDS:
        raise SpeculationSetupError(f"backend must be one of {BACKENDS}, got '{backend}'.")
    if backend == "stateful" and mode != "plain":
        raise SpeculationSetupError(
            f"{mode} decoding always runs on OpenVINO GenAI's continuous-batching backend; backend='stateful' "
            "is for plain decoding only.")
    device = check_device(device, error=SpeculationSetupError)
    if draft_device is not None:
        draft_device = check_device(draft_device, name="draft_device", error=SpeculationSetupError)
    if threads is not None:
        threads = as_integer(threads, "threads", minimum=1, advice="Use None for all cores.",
                             error=SpeculationSetupError)
    properties = main_model_properties(precision, threads, exact=exact_main)
    draft_properties = device_properties(precision if draft_precision is None else draft_precision, threads)
    check_single_thread_precision(device, draft_device, precision, threads)
    main_path = check_main_folder(main_dir)
    draft_path: Path | None = None
    if mode == "speculative":
        if draft_dir is None:
            raise SpeculationSetupError("Speculative decoding needs draft_dir, the draft model's OpenVINO folder.")
        if main_path.suffix.lower() == ".gguf":
            raise SpeculationSetupError(
                "A GGUF main model cannot be combined with a draft here; use the OpenVINO export of the main model.")
        draft_path = check_draft_folder(draft_dir, main_path)
    elif draft_dir is not None:
        raise SpeculationSetupError(f"draft_dir is only used by mode='speculative', not '{mode}'. Remove it.")

    import openvino_genai

    arguments: dict[str, Any] = dict(properties)
    if backend == "continuous_batching":
        arguments["scheduler_config"] = make_scheduler_config(cache_size_gb, max_num_batched_tokens)
    if mode == "speculative":
        arguments["draft_model"] = openvino_genai.draft_model(str(draft_path), draft_device or device,
                                                              **draft_properties)
    if mode == "prompt_lookup":
        arguments["prompt_lookup"] = True
    started = time.perf_counter()
    pipeline = openvino_genai.LLMPipeline(str(main_path), device, **arguments)
    return LoadedPipeline(
        mode=mode, pipeline=pipeline, main_dir=main_path, draft_dir=draft_path, device=device,
        precision=precision or "default", backend=backend, load_seconds=time.perf_counter() - started)
