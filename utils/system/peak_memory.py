"""Peak memory of a function ``"package.module:function"`` measured in a fresh process (`measure_in_fresh_process`).

Peak memory only grows, so one process cannot measure two pipelines; the child reports the kernel's ``VmHWM`` because
a child's ``ru_maxrss`` includes the parent's RSS at fork time (it survives exec), which made a small model look as big
as the notebook. Standard library only, so it also runs in the IPEX-LLM environment.
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from utils.paths import REPO_ROOT

RESULT_MARKER = "PEAK_MEMORY "


def _status_kib(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (VmHWM, VmRSS), or None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM, or ru_maxrss where /proc is missing."""
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes, Linux KiB


def current_rss_bytes() -> int:
    """This process's resident memory now (VmRSS; psutil where /proc is missing)."""
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import psutil

    return psutil.Process().memory_info().rss


def run_work(work: str, arguments: dict) -> dict:
    """Run ``package.module:function`` with `arguments` here and add this process's memory figures (in MB)."""
    module_name, separator, function_name = work.partition(":")
    if not separator or not module_name or not function_name:
        raise ValueError(f"work must be 'package.module:function', got {work!r}.")
    start = current_rss_bytes()
    function = getattr(importlib.import_module(module_name), function_name)
    returned = function(**arguments)
    if not isinstance(returned, dict):
        raise TypeError(f"{work} must return a dict (JSON-able), got {type(returned).__name__}.")
    return {**returned, "rss_start_mb": start / 1e6, "rss_end_mb": current_rss_bytes() / 1e6,
            "peak_rss_mb": peak_rss_bytes() / 1e6}


def measure_in_fresh_process(work: str, arguments: dict, *, python: Path | str | None = None,
                             timeout: float = 900) -> dict:
    """Run `work` in a new ``python -m utils.system.peak_memory`` process; return its dict plus memory figures (MB)."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run([str(python or sys.executable), "-m", "utils.system.peak_memory", work,
                                json.dumps(arguments)], cwd=REPO_ROOT, env=environment, capture_output=True,
                               text=True, timeout=timeout)
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"The memory probe for {work} failed:\n{completed.stderr[-3000:]}")
    return json.loads(lines[-1][len(RESULT_MARKER):])


def _main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 2:
        raise SystemExit("usage: python -m utils.system.peak_memory package.module:function '<JSON keyword arguments>'")
    print(RESULT_MARKER + json.dumps(run_work(arguments[0], json.loads(arguments[1]))), flush=True)


if __name__ == "__main__":
    _main()
