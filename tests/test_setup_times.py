"""tutorial.py records how long each setup step took here (build/setup-times.json): the figures of the last setup
that did work, and apart the last one that found everything up to date, which never overwrites them."""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from maintainers import run_times
from tests.test_notebooks_are_tested import load_tutorial_module


@pytest.fixture
def tutorial():
    return load_tutorial_module()


@pytest.fixture
def fake_setup(tutorial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """setup() with every step replaced: `work["installs"]` says whether the installs do work, `work["builds"]` whether
    the model builders write a folder; a clock that moves 10 s at each reading."""
    work = {"installs": True, "builds": True, "commands": []}
    models = tmp_path / "models"
    monkeypatch.delenv("SPECDEC_SKIP_CODER_PAIR", raising=False)
    monkeypatch.setattr(tutorial, "check_python", lambda: None)
    monkeypatch.setattr(tutorial, "check_platform", lambda: None)
    monkeypatch.setattr(tutorial, "setup_lock_paths", lambda: [tmp_path / "setup.lock"])
    monkeypatch.setattr(tutorial, "total_memory_bytes", lambda: 24 * 1024 ** 3)
    monkeypatch.setattr(tutorial, "disk_problem", lambda needs, free_bytes=None: None)
    monkeypatch.setattr(tutorial, "models_folder", lambda environ=None: models)
    monkeypatch.setattr(tutorial, "ensure_env", lambda env, locks, after_install: work["installs"])
    monkeypatch.setattr(tutorial, "ensure_extra_lock", lambda *args: work["installs"])
    monkeypatch.setattr(tutorial, "ensure_ipex_kernel", lambda: None)
    monkeypatch.setattr(tutorial, "write_lab_settings", lambda env: env)

    def run(command, **kwargs) -> None:
        module = str(command[-1])
        work["commands"].append(module)
        if work["builds"]:
            (models / module).mkdir(parents=True, exist_ok=True)
            (models / module / f"built-{len(work['commands'])}").touch()  # the folder changes, as a rebuild does

    monkeypatch.setattr(tutorial, "run", run)
    clock = iter(range(0, 10_000, 10))
    monkeypatch.setattr(tutorial, "time", SimpleNamespace(perf_counter=lambda: next(clock), strftime=time.strftime,
                                                          gmtime=time.gmtime))
    monkeypatch.setattr(tutorial, "SETUP_TIMES", tmp_path / "build" / "setup-times.json")
    return work


def test_a_setup_that_did_work_records_each_step_and_says_it_in_one_line(tutorial, fake_setup, capsys) -> None:
    tutorial.main(["setup"])
    record = json.loads(tutorial.SETUP_TIMES.read_text())
    assert fake_setup["commands"] == ["maintainers.offline_pair", "maintainers.coder_pair"]
    # each step 10 s; the Coder pair's wheels and build add up; the whole setup from its first reading to its last
    assert {name: step["seconds"] for name, step in record["steps"].items()} == {
        "main_environment": 10, "ipex_environment": 10, "offline_pair": 10, "coder_pair": 20, "setup": 110}
    assert list(record["steps"]) == list(tutorial.SETUP_STEPS)
    assert all(step["did_work"] for step in record["steps"].values())
    assert set(record["machine"]) == {"cpu", "cores", "platform"} and record["date"].endswith(" UTC")
    said = [line for line in capsys.readouterr().out.splitlines() if "setup times" in line]
    assert len(said) == 1 and "Qwen2.5-Coder pair 20 s" in said[0] and "whole setup 110 s" in said[0]


def test_an_up_to_date_setup_never_overwrites_the_figures_of_one_that_did_work(tutorial, fake_setup, capsys) -> None:
    tutorial.main(["setup"])
    did_work = json.loads(tutorial.SETUP_TIMES.read_text())
    capsys.readouterr()
    fake_setup["installs"] = fake_setup["builds"] = False
    tutorial.main(["setup"])
    record = json.loads(tutorial.SETUP_TIMES.read_text())
    assert {key: record[key] for key in ("date", "machine", "steps")} == {
        key: did_work[key] for key in ("date", "machine", "steps")}
    assert record["up_to_date"]["seconds"] == 110 and "up_to_date" not in did_work
    assert "setup times" not in capsys.readouterr().out  # nothing new is printed when nothing was done


def test_a_step_up_to_date_in_a_setup_that_did_work_says_so(tutorial, fake_setup) -> None:
    fake_setup["builds"] = False  # the environments were recreated, the models folder was left as it was
    tutorial.main(["setup"])
    steps = json.loads(tutorial.SETUP_TIMES.read_text())["steps"]
    assert steps["main_environment"]["did_work"] and steps["coder_pair"]["did_work"]  # its wheels were installed
    assert not steps["offline_pair"]["did_work"] and steps["setup"]["did_work"]


def test_a_skipped_coder_pair_is_not_timed(tutorial, fake_setup, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_SKIP_CODER_PAIR", "1")
    steps = tutorial.setup()
    assert "coder_pair" not in steps and fake_setup["commands"][-1] == "maintainers.coder_pair"  # it says how to opt in


def test_nothing_is_kept_without_step_times_and_a_broken_file_is_replaced(tutorial, tmp_path: Path) -> None:
    path = tmp_path / "setup-times.json"
    tutorial.save_setup_times(None, path)  # a setup replaced by a test returns nothing
    assert not path.exists()
    path.write_text("{not json")
    tutorial.save_setup_times({"setup": {"seconds": 0.8, "did_work": False}}, path)
    assert json.loads(path.read_text())["up_to_date"]["seconds"] == 0.8


def test_the_machine_is_named_as_proc_cpuinfo_names_it(tutorial, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: avx2\n")
    machine = tutorial.this_machine(cpuinfo)
    assert machine["cpu"] == "AMD EPYC" and machine["cores"] >= 1 and machine["platform"]
    assert tutorial.this_machine(tmp_path / "no-cpuinfo")["cpu"]  # elsewhere: what the platform module says


def test_the_guide_names_the_steps_the_setup_times(tutorial) -> None:
    assert list(run_times.SETUP_STEPS) == list(tutorial.SETUP_STEPS)
