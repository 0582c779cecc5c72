"""What this machine offers the notebooks: versions, CPU features, memory, disk, OpenVINO devices."""
from __future__ import annotations

import importlib.metadata
import platform
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from utils.paths import models_dir

PACKAGES = ("openvino", "openvino-genai", "openvino-tokenizers", "optimum-intel", "nncf", "transformers",
            "torch", "huggingface_hub", "modelscope", "jupyterlab", "nbval", "matplotlib", "ipywidgets")

# CPU flags (as /proc/cpuinfo names them) that decide how fast and in which precision OpenVINO runs.
ISA_FEATURES = {
    "AVX2": "avx2",
    "AVX-512 (F)": "avx512f",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX (tile)": "amx_tile",
    "AMX_BF16": "amx_bf16",
    "AMX_INT8": "amx_int8",
}
ISA_MEANING = {
    "AVX2": "baseline for OpenVINO's fast CPU kernels",
    "AVX-512 (F)": "wider vectors: faster fp32/int8 matrix work",
    "AVX512_VNNI": "fast int8 dot products (int8/int4 weights, with activations quantised on the fly: "
                   "speculative output can drift from plain unless that is off, as precision='f32' does)",
    "AVX512_BF16": "OpenVINO defaults to bf16 inference: outputs may differ from f32",
    "AMX (tile)": "matrix tiles (Sapphire Rapids+): large bf16/int8 speed-ups",
    "AMX_BF16": "bf16 matrix tiles",
    "AMX_INT8": "int8 matrix tiles",
}


def package_versions(packages: Sequence[str] = PACKAGES, *, with_python: bool = True) -> dict[str, str]:
    """Installed version of each package or 'not installed' (Python's first unless `with_python=False`)."""
    versions = {"python": sys.version.split()[0]} if with_python else {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def parse_cpuinfo(text: str) -> tuple[str, set[str]]:
    """CPU model name and flag set from the text of /proc/cpuinfo."""
    model, flags = "unknown", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def cpu_features(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> dict:
    """CPU model, logical cores and which of `ISA_FEATURES` it has."""
    import os

    try:
        model, flags = parse_cpuinfo(cpuinfo_path.read_text())
    except OSError:  # not Linux
        model, flags = platform.processor() or "unknown", set()
    return {"model": model, "logical_cores": os.cpu_count(),
            "features": {name: flag in flags for name, flag in ISA_FEATURES.items()}}


def memory_and_disk(folder: Path | None = None) -> dict:
    """Total/available RAM and free disk where the models live, in GB."""
    import psutil

    folder = folder or models_dir()
    existing = folder if folder.exists() else next(p for p in folder.parents if p.exists())
    memory = psutil.virtual_memory()
    disk = shutil.disk_usage(existing)
    return {"ram_total_gb": memory.total / 1e9, "ram_available_gb": memory.available / 1e9,
            "disk_free_gb": disk.free / 1e9, "disk_path": str(existing)}


def openvino_devices() -> list[dict]:
    """Each OpenVINO device with its full name and the inference precision it picks by default."""
    import openvino as ov

    core = ov.Core()
    devices = []
    for device in core.available_devices:
        entry = {"device": device, "full_name": core.get_property(device, "FULL_DEVICE_NAME")}
        try:
            precision = core.get_property(device, "INFERENCE_PRECISION_HINT")
            entry["default_precision"] = precision.get_type_name() if hasattr(precision, "get_type_name") else str(precision)
        except RuntimeError:
            entry["default_precision"] = "n/a"
        devices.append(entry)
    return devices


EXACT_MAIN_SETTINGS = "INFERENCE_PRECISION_HINT='f32', DYNAMIC_QUANTIZATION_GROUP_SIZE=0, KV_CACHE_PRECISION='f32'"


def exact_match_advice(devices: list[dict]) -> str:
    """What the default precision means for the token-for-token checks in later notebooks."""
    cpu = next((d for d in devices if d["device"] == "CPU"), None)
    exact = (f"the notebooks make the main model exact ({EXACT_MAIN_SETTINGS}) whenever they check outputs token for "
             "token: f32 alone is not enough on CPUs with VNNI or AMX, whose int8 fast paths round by pass width.")
    if cpu and "bf16" in cpu["default_precision"]:
        return ("The CPU runs in bf16 by default: speculative and plain outputs can diverge after some tokens, so "
                + exact)
    return "The CPU runs in f32 by default; still, " + exact
