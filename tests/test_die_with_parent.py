"""Tests for utils.system.die_with_parent: the wrapped command runs as given, a launcher whose parent already changed
refuses to start it, and the command is killed when the process that started it is killed with SIGKILL (Linux).

The death test uses a pipe instead of waiting: the command holds the pipe's write end, so reading the pipe returns
end-of-file exactly when the command is gone (a generous timeout only guards against a hang if it never dies).
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from utils.paths import REPO_ROOT
from utils.system import die_with_parent
from utils.system.die_with_parent import die_with_parent_command

linux_only = pytest.mark.skipif(not die_with_parent.supported(), reason="parent-death signals are a Linux feature")


def test_the_command_is_wrapped_in_the_launcher_with_this_process_as_parent() -> None:
    command = ["echo", "hello world"]
    wrapped = die_with_parent_command(command)
    if not die_with_parent.supported():
        assert wrapped == command
        return
    assert wrapped[-2:] == command and wrapped[0] == sys.executable
    assert Path(wrapped[2]) == Path(die_with_parent.__file__).resolve()
    assert int(wrapped[3]) == os.getpid()


def test_where_unsupported_the_command_is_a_copy_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    command = ["python", "-c", "pass"]
    wrapped = die_with_parent_command(command)
    assert wrapped == command and wrapped is not command


@linux_only
def test_the_wrapped_command_runs_with_its_arguments_and_exit_code() -> None:
    script = "import sys; print('|'.join(sys.argv[1:])); sys.exit(3)"
    result = subprocess.run(die_with_parent_command([sys.executable, "-c", script, "a b", "c"]), capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stdout) == (3, "a b|c\n")


@linux_only
def test_a_launcher_whose_parent_is_not_the_one_named_does_not_start_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    launcher = die_with_parent_command([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    launcher[3] = str(os.getpid() + 1)  # as if the named parent had died and another process had adopted the launcher
    result = subprocess.run(launcher, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "the parent process ended before the command started" in result.stderr
    assert not marker.exists()


# The middle process: starts the wrapped command (which keeps the pipe's write end open and waits for a signal),
# reports its pid once it runs, then waits to be killed.
MIDDLE = textwrap.dedent("""
    import signal, subprocess, sys
    from utils.system.die_with_parent import die_with_parent_command
    write_end = int(sys.argv[1])
    child_code = "import signal; print('ready', flush=True); signal.pause()"
    child = subprocess.Popen(die_with_parent_command([sys.executable, "-c", child_code]), pass_fds=(write_end,),
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\\n"
    print(child.pid, flush=True)
    signal.pause()
""")


@linux_only
def test_the_command_dies_when_its_parent_is_killed() -> None:
    read_end, write_end = os.pipe()
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, str(write_end)], pass_fds=(write_end,),
                              stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    os.close(write_end)
    child_pid, child_gone = None, False
    try:
        assert middle.stdout is not None
        child_pid = int(middle.stdout.readline())
        middle.kill()  # SIGKILL: the middle process gets no chance to clean up after itself
        middle.wait(timeout=60)
        readable, _, _ = select.select([read_end], [], [], 60)
        assert readable, "the command outlived the process that started it"
        assert os.read(read_end, 1) == b""  # every write end closed: the command is gone
        child_gone = True
    finally:
        os.close(read_end)
        if middle.poll() is None:
            middle.kill()
            middle.wait()
        if middle.stdout is not None:
            middle.stdout.close()
        if child_pid is not None and not child_gone:
            os.kill(child_pid, signal.SIGKILL)  # the test failed and the command still runs: end it


@pytest.mark.parametrize("arguments", [[], ["12x", "true"], [str(os.getpid())]])
def test_a_launcher_called_without_a_parent_id_and_a_command_prints_its_usage(arguments: list[str]) -> None:
    done = subprocess.run([sys.executable, "-I", die_with_parent.__file__, *arguments], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("usage:")
