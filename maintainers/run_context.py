"""What the maintainers' command lines record beside their timings, and where they may write.

    measurement_context()                          # when, on which machine and load, with which OpenVINO GenAI
    check_writable_file(Path("out/bench.json"))    # the path, once its folder is known to be writable
"""
from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path

from utils.input_checks import InputError
from utils.system.environment_report import cpu_features, package_versions


def measurement_context() -> dict:
    """Where and when timings were taken (they only hold for that machine and load), for a results file."""
    import datetime as dt

    return {"when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.machine(), "processor": platform.processor() or platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "openvino_genai": package_versions(("openvino-genai",), with_python=False)["openvino-genai"],
            "cpu": cpu_features()}  # VNNI/AMX decide int4 speed, and (f32 aside) whether outputs stay exact


def check_writable_file(path: Path | str, option: str = "the output file", *,
                        error: type[ValueError] = InputError) -> Path:
    """`path`, after checking that a file can be written there (its folder is creatable and writable).

    Nothing is left behind: the probe file is removed, and no folder is created.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise error(f"{option} {path} is a folder; give a file name inside it, e.g. {path / 'results.json'}.")
    folder = path.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise error(f"{option} {path} cannot be written: {existing} is a file, not a folder. Choose another path.")
    if path.exists() and not os.access(path, os.W_OK):
        raise error(f"{option} {path} exists and is read-only. Choose another path or make it writable.")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as problem:
        raise error(f"{option} {path} cannot be written ({problem.strerror or problem} in {existing}). "
                    "Choose a folder you can write to.") from None
    return path
