"""The command line the page writers share (`readme_images`, `run_times`): rewrite the pages, then check them.

    python -m maintainers.<writer>            # write what is out of date, then report what still is
    python -m maintainers.<writer> --check    # only report; exit 1 if anything is out of date
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from utils.paths import REPO_ROOT


def write_then_check(argv: list[str] | None, prog: str, description: str, write: Callable[[], list[Path]],
                     problems: Callable[[], list[str]], root: Path = REPO_ROOT) -> int:
    """Unless `--check` is given, call `write` and name the files it changed; then print `problems()`.

    Returns the exit code: 1 if any problem is left, else 0.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if anything is out of date")
    arguments = parser.parse_args(argv)
    if not arguments.check:
        for path in write():
            print(f"wrote {path.relative_to(root)}")
    left = problems()
    for problem in left:
        print(problem)
    return 1 if left else 0
