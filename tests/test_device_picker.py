"""Tests for utils.display.device_picker: the default device falls back to one this machine has, and the drop-down
lists OpenVINO's devices (a made-up device list stands in for the machine's).

(tests/test_playground.py checks the picker against this machine's real devices.)
"""
from __future__ import annotations

import pytest

from utils.display import device_picker as picker_module
from utils.display.device_picker import default_device, device_picker


@pytest.mark.parametrize("requested, options, expected", [
    ("GPU.1", ["CPU", "GPU.0", "GPU.1"], "GPU.1"),
    (None, ["CPU", "GPU.0"], "CPU"),
    ("NPU", ["CPU", "GPU.0"], "CPU"),
    ("CPU", ["GPU.0", "NPU"], "GPU.0"),  # no CPU listed: the first device OpenVINO lists
    ("gpu", ["CPU", "GPU.0"], "GPU.0"),  # a name as a learner types it
    ("GPU", ["CPU", "GPU.0", "GPU.1"], "GPU.0"),
])
def test_the_default_is_the_requested_device_else_cpu_else_the_first(requested: str | None, options: list[str],
                                                                    expected: str) -> None:
    assert default_device(requested, options) == expected


def test_the_default_asks_openvino_when_no_list_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(picker_module, "available_devices", lambda: ["CPU", "NPU"])
    assert default_device("NPU") == "NPU"
    monkeypatch.setattr(picker_module, "available_devices", lambda: [])
    with pytest.raises(RuntimeError, match="OpenVINO lists no device on this machine"):
        default_device()


def test_the_drop_down_lists_the_devices_and_starts_at_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(picker_module, "available_devices", lambda: ["CPU", "GPU.0", "NPU"])
    picker = device_picker("NPU", description="Run on:")
    assert list(picker.options) == ["CPU", "GPU.0", "NPU"]
    assert picker.value == "NPU" and picker.description == "Run on:"
    assert device_picker("GPU.7").value == "CPU"
    picker.value = "GPU.0"  # what a learner's pick leaves for the next cells
    assert picker.value == "GPU.0"
