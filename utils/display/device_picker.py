"""A device drop-down for the notebooks; later cells pass its `.value` (default: `default_device()`) to pipelines."""
from __future__ import annotations

from typing import Any

from utils.input_checks import available_devices


def default_device(requested: str | None = None, options: list[str] | None = None) -> str:
    """`requested` when this machine has it, else CPU (or the first device OpenVINO lists)."""
    options = available_devices() if options is None else options
    if not options:
        raise RuntimeError("OpenVINO lists no device on this machine: check the openvino installation.")
    if requested in options:
        return requested
    matches = [option for option in options if requested and option.split(".")[0].upper() == requested.upper()]
    if matches:  # "gpu", or "GPU" where OpenVINO lists "GPU.0"
        return matches[0]
    return "CPU" if "CPU" in options else options[0]


def device_picker(default: str | None = "CPU", description: str = "Device:") -> Any:
    """An ipywidgets Dropdown of OpenVINO devices, set to `default_device(default)`; read `.value` in later cells."""
    import ipywidgets as widgets

    options = available_devices()
    return widgets.Dropdown(options=options, value=default_device(default, options), description=description)
