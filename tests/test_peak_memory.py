"""utils.system.peak_memory: the child's own peak (VmHWM), not the parent's, and clear failures."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.paths import REPO_ROOT
from utils.system.peak_memory import current_rss_bytes, measure_in_fresh_process, peak_rss_bytes, run_work

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def tests_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))


def test_the_peak_is_the_childs_own_and_includes_freed_memory(tests_importable) -> None:
    parent_ballast = bytearray(400_000_000)  # a big parent must not inflate the child's figure (ru_maxrss would)
    parent_ballast[::4096] = b"\x01" * len(parent_ballast[::4096])
    assert current_rss_bytes() > 400_000_000
    small = measure_in_fresh_process("peak_memory_work:hold_megabytes", {"megabytes": 10})
    big = measure_in_fresh_process("peak_memory_work:hold_megabytes", {"megabytes": 200})
    assert small["held_mb"] == 10 and big["held_mb"] == 200
    assert small["peak_rss_mb"] < 300  # a bare Python with 10 MB, far below the parent's 400 MB
    assert big["peak_rss_mb"] - small["peak_rss_mb"] == pytest.approx(190, abs=30)
    assert big["rss_end_mb"] < big["peak_rss_mb"] - 150  # freed again, but the peak remembers it
    assert 0 < big["rss_start_mb"] <= big["peak_rss_mb"]
    del parent_ballast


def test_in_process_figures_are_consistent() -> None:
    assert peak_rss_bytes() >= current_rss_bytes() > 0
    with pytest.raises(ValueError, match="package.module:function"):
        run_work("no_colon", {})


def test_a_failing_work_raises_with_its_error(tests_importable) -> None:
    with pytest.raises(RuntimeError, match="fails on purpose"):
        measure_in_fresh_process("peak_memory_work:fail", {})


def test_the_probe_imports_neither_openvino_nor_torch() -> None:
    """It must run in the IPEX-LLM environment (no OpenVINO) as well as in the main one."""
    code = "import sys, utils.system.peak_memory; print(sorted({'openvino', 'torch', 'psutil'} & set(sys.modules)))"
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                               check=True)
    assert completed.stdout.strip() == "[]"
