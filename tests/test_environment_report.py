"""Tests for utils.system.environment_report."""
from __future__ import annotations

from pathlib import Path

from utils.system.environment_report import (
    ISA_FEATURES,
    cpu_features,
    exact_match_advice,
    memory_and_disk,
    openvino_devices,
    package_versions,
    parse_cpuinfo,
)

CPUINFO_SAMPLE = """\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512_bf16 avx512_vnni
bugs\t\t: sysret_ss_attrs

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: Some Other Name
flags\t\t: fpu sse
"""


def test_parse_cpuinfo_takes_the_first_processor() -> None:
    model, flags = parse_cpuinfo(CPUINFO_SAMPLE)
    assert model == "AMD EPYC 9R14 96-Core Processor"
    assert flags == {"fpu", "vme", "sse", "sse2", "avx", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"}


def test_parse_cpuinfo_of_nothing() -> None:
    assert parse_cpuinfo("") == ("unknown", set())


def test_cpu_features_from_a_file(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO_SAMPLE)
    report = cpu_features(cpuinfo)
    assert report["model"] == "AMD EPYC 9R14 96-Core Processor" and report["logical_cores"] >= 1
    assert set(report["features"]) == set(ISA_FEATURES)
    assert report["features"]["AVX512_BF16"] and report["features"]["AVX2"]
    assert not report["features"]["AMX_BF16"]


def test_cpu_features_without_cpuinfo(tmp_path: Path) -> None:
    report = cpu_features(tmp_path / "missing")
    assert not any(report["features"].values())


def test_package_versions() -> None:
    versions = package_versions(("openvino", "surely-not-a-package-xyz"))
    assert versions["surely-not-a-package-xyz"] == "not installed"
    assert versions["openvino"][0].isdigit()
    assert versions["python"].count(".") == 2


def test_memory_and_disk_for_a_folder_not_yet_created(tmp_path: Path) -> None:
    report = memory_and_disk(tmp_path / "models" / "later")
    assert report["disk_path"] == str(tmp_path)
    assert report["ram_total_gb"] >= report["ram_available_gb"] > 0 and report["disk_free_gb"] > 0


def test_openvino_lists_the_cpu_with_its_precision() -> None:
    devices = openvino_devices()
    cpu = next(device for device in devices if device["device"] == "CPU")
    assert cpu["full_name"] and cpu["full_name"] != "CPU"
    assert cpu["default_precision"] in ("bf16", "f32", "f16")


def test_exact_match_advice_branches() -> None:
    bf16 = exact_match_advice([{"device": "GPU", "default_precision": "f16"},
                               {"device": "CPU", "default_precision": "bf16"}])
    assert "bf16 by default" in bf16
    f32 = exact_match_advice([{"device": "CPU", "default_precision": "f32"}])
    assert "f32 by default" in f32 and "bf16" not in f32
    for advice in (bf16, f32):  # an exact main model needs all three settings, whatever the default precision
        assert all(setting in advice for setting in ("INFERENCE_PRECISION_HINT='f32'",
                                                     "DYNAMIC_QUANTIZATION_GROUP_SIZE=0", "KV_CACHE_PRECISION='f32'"))
    # only the CPU entry counts: a bf16 GPU does not change the CPU advice
    assert exact_match_advice([{"device": "GPU", "default_precision": "bf16"},
                               {"device": "CPU", "default_precision": "f32"}]) == f32


def test_exact_match_advice_for_this_machine() -> None:
    devices = openvino_devices()
    advice = exact_match_advice(devices)
    cpu_precision = next(d["default_precision"] for d in devices if d["device"] == "CPU")
    assert ("bf16 by default" in advice) == (cpu_precision == "bf16") and "KV_CACHE_PRECISION" in advice
