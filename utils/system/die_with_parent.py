"""Run a command that the kernel kills when the process that started it dies (Linux), even by `kill -9`.

`python die_with_parent.py PARENT_PID COMMAND...` (see `die_with_parent_command`) sets PR_SET_PDEATHSIG, checks the
parent is still PARENT_PID (it may have died first), then execs COMMAND (exec keeps the setting). A separate program,
not `preexec_fn`, because that is unsafe in a process with threads (a Jupyter kernel has several).
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def supported() -> bool:
    """True where the kernel offers parent-death signals (Linux)."""
    return sys.platform.startswith("linux")


def die_with_parent_command(command: list[str]) -> list[str]:
    """`command` wrapped so that it dies with this process (unchanged where that is not supported)."""
    if not supported():
        return list(command)
    return [sys.executable, "-I", str(Path(__file__).resolve()), str(os.getpid()), *command]


def _main(argv: list[str]) -> None:
    import ctypes

    if len(argv) < 2 or not argv[0].isdigit():
        sys.stderr.write("usage: python die_with_parent.py PARENT_PID COMMAND [ARGUMENTS...]\n")
        sys.exit(2)
    parent_pid, command = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        sys.exit(f"die_with_parent: prctl failed (errno {ctypes.get_errno()})")
    if os.getppid() != parent_pid:
        sys.exit("die_with_parent: the parent process ended before the command started")
    os.execvp(command[0], command)


if __name__ == "__main__":
    _main(sys.argv[1:])
