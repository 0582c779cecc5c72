"""Tests for utils.input_checks: each bad input gets one line that says what to do, good input passes through."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from utils.input_checks import (
    InputError,
    as_integer,
    as_probability,
    available_devices,
    check_device,
    check_prompt_fits,
    check_text,
    context_length,
)


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_python_and_numpy_integers_are_integers(value) -> None:
    result = as_integer(value, "K", minimum=1)
    assert result == 3 and type(result) is int


@pytest.mark.parametrize("value, shown", [(0, "got 0"), (-2, "got -2"), (3.0, "got 3.0"), (True, "got True"),
                                          ("3", "got the string '3'"), (None, "got None"), (np.float64(2), "got")])
def test_non_integers_and_small_integers_are_refused(value, shown: str) -> None:
    with pytest.raises(InputError) as error:
        as_integer(value, "threads", minimum=1, advice="Leave it out to use all cores.")
    message = one_line(error)
    assert message.startswith("threads must be an integer >= 1") and shown in message
    assert message.endswith("Leave it out to use all cores.")


def test_the_caller_chooses_the_error_class() -> None:
    class SettingsError(ValueError):
        pass

    with pytest.raises(SettingsError):
        as_integer(0, "K", minimum=1, error=SettingsError)


def test_thresholds() -> None:
    assert as_probability(0.4, "threshold") == pytest.approx(0.4)
    assert as_probability(np.float32(0.25), "threshold") == pytest.approx(0.25)
    with pytest.raises(InputError) as error:
        as_probability("0.4", "assistant_confidence_threshold")
    assert "not the string '0.4'" in one_line(error) and "without quotes" in str(error.value)
    for bad in (0, 1, 1.5, -0.1, None, True, float("nan")):
        with pytest.raises(InputError, match="strictly between 0 and 1"):
            as_probability(bad, "threshold")


def test_a_surrogate_in_a_prompt_is_named_with_its_position() -> None:
    assert check_text("café 😀") == "café 😀"
    broken = "caf\udce9 au lait"  # what a Latin-1 byte read as UTF-8 with surrogateescape becomes
    with pytest.raises(InputError) as error:
        check_text(broken)
    message = one_line(error)
    assert "U+DCE9" in message and "position 3" in message and "encoding='utf-8'" in message
    with pytest.raises(InputError, match="must be text"):
        check_text(b"bytes")


def test_context_length_comes_from_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192, "hidden_size": 576}))
    assert context_length(tmp_path) == 8192
    (tmp_path / "config.json").write_text(json.dumps({"n_positions": 2048}))
    assert context_length(tmp_path) == 2048
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 4096}}))
    assert context_length(tmp_path) == 4096
    (tmp_path / "config.json").write_text("{}")
    assert context_length(tmp_path) is None
    assert context_length(tmp_path / "no-such-folder") is None
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(InputError, match="config.json cannot be read"):
        context_length(tmp_path)


def test_the_offline_main_model_has_an_8192_token_context(offline_pair) -> None:
    assert context_length(offline_pair.main) == 8192


def test_prompt_and_new_tokens_must_fit_the_context() -> None:
    check_prompt_fits(8000, 192, 8192, "SmolLM2")  # exactly fills the context
    check_prompt_fits(10**6, 64, None)  # unknown context: nothing to check
    with pytest.raises(InputError) as error:
        check_prompt_fits(8100, 100, 8192, "SmolLM2")
    message = one_line(error)
    assert "8100 tokens" in message and "8192-token context of SmolLM2" in message and "at most 8092" in message
    with pytest.raises(InputError, match="leaves no room"):
        check_prompt_fits(0, 8192, 8192, "SmolLM2")


def test_devices_are_matched_case_insensitively_and_missing_ones_listed() -> None:
    machine = ["CPU", "GPU.0", "GPU.1"]
    assert check_device("cpu", machine) == "CPU"
    assert check_device(" Gpu ", machine) == "GPU"  # GPU = the first GPU.N
    assert check_device("gpu.1", machine) == "GPU.1"
    assert check_device("AUTO:GPU,CPU", machine) == "AUTO:GPU,CPU"
    with pytest.raises(InputError) as error:
        check_device("NPU", machine)
    assert "no NPU device" in one_line(error) and "Use one of: CPU, GPU.0, GPU.1" in str(error.value)
    with pytest.raises(InputError, match="no NPU device"):
        check_device("HETERO:NPU,CPU", machine)
    with pytest.raises(InputError, match="device name"):
        check_device("", machine)


def test_this_machine_has_a_cpu_and_refuses_a_gpu_it_does_not_have() -> None:
    devices = available_devices()
    assert check_device("cpu") == "CPU"
    if not any(device.startswith("GPU") for device in devices):
        with pytest.raises(InputError, match="no GPU device.*Use one of: .*CPU"):
            check_device("GPU")


def test_as_integer_upper_bound() -> None:
    from utils.input_checks import as_integer

    assert as_integer(9, "--seed", minimum=0, maximum=9) == 9
    with pytest.raises(InputError, match=r"^--seed must be an integer from 0 to 9, got 10\.$"):
        as_integer(10, "--seed", minimum=0, maximum=9)
    with pytest.raises(InputError, match=r"from 0 to 9, got -1\. Pick another\.$"):
        as_integer(-1, "--seed", minimum=0, maximum=9, advice="Pick another.")
    with pytest.raises(InputError, match=r"^n must be an integer <= 3, got 4\.$"):
        as_integer(4, "n", maximum=3)


def test_free_disk_bytes_measures_the_nearest_existing_folder(tmp_path: Path) -> None:
    import shutil

    from utils.input_checks import free_disk_bytes, nearest_existing

    assert nearest_existing(tmp_path / "not" / "yet") == tmp_path
    assert free_disk_bytes(tmp_path / "not" / "yet") == pytest.approx(shutil.disk_usage(tmp_path).free, rel=0.01)


def test_require_free_disk_says_what_is_needed_and_free_and_what_to_do(tmp_path: Path, monkeypatch) -> None:
    from utils import input_checks
    from utils.input_checks import InsufficientDiskError, require_free_disk

    monkeypatch.setattr(input_checks, "free_disk_bytes", lambda folder: 2_000_000_000)
    require_free_disk(tmp_path / "models", 1.8e9)  # 1.98 GB with the 10% margin: fits
    with pytest.raises(InsufficientDiskError) as error:
        require_free_disk(tmp_path / "models", 1.9e9, what="to download X")  # 2.09 GB with the margin
    message = str(error.value)
    assert message == (f"Not enough free disk space in {tmp_path} to download X: need about 2.1 GB, 2.0 GB free. "
                       "Free some space or move the models folder with SPECDEC_MODELS_DIR.")
    assert isinstance(error.value, OSError)

    class OwnError(RuntimeError):
        pass

    with pytest.raises(OwnError, match=r"need about 3\.0 GB, 2\.0 GB free\. Or set SKIP=1\.$"):
        require_free_disk(tmp_path, 3e9, margin=1.0, advice="Or set SKIP=1.", error=OwnError)
    require_free_disk(tmp_path, 2e9, margin=1.0, error=OwnError)


def test_run_size_defaults_to_full_and_refuses_anything_else() -> None:
    from utils.input_checks import InputError, run_size

    assert run_size({}) == "full" and run_size({"SPECDEC_RUN_SIZE": " Quick "}) == "quick"
    with pytest.raises(InputError, match="SPECDEC_RUN_SIZE='fast' is not a run size"):
        run_size({"SPECDEC_RUN_SIZE": "fast"})
