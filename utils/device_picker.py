"""A device drop-down for the notebooks (the same widget in every notebook)."""
from __future__ import annotations


def available_devices() -> list[str]:
    """OpenVINO devices on this machine, CPU first."""
    import openvino as ov

    devices = ov.Core().available_devices
    return sorted(devices, key=lambda name: (name != "CPU", name))


def device_picker(default: str = "CPU"):
    """An ipywidgets Dropdown of OpenVINO devices; read `.value` in the next cell."""
    import ipywidgets as widgets

    options = available_devices()
    return widgets.Dropdown(options=options, value=default if default in options else options[0],
                            description="Device:")
