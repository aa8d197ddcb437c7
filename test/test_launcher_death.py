"""Launcher death (issue 18): node processes started by the CLI die with it, kill -9 included
(a killed `clawgym loop` left every node running, still writing into the run directory)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def processes() -> dict[int, tuple[str, int, int, int]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := stat(int(entry))) is not None:
            out[int(entry)] = info
    return out


def descendants(launcher: int) -> set[int]:
    """Every process in a session started by ``launcher`` (its children's sessions)."""
    procs = processes()
    sessions = {pid for pid, (_, ppid, _, _) in procs.items() if ppid == launcher}
    return {pid for pid, (_, _, _, sid) in procs.items() if sid in sessions}


def living(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (zombies are dead: PID 1 here may not reap them)."""
    return {pid for pid in pids if (info := stat(pid)) is not None and info[0] != "Z"}


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


LAUNCHER = """
import sys, time
from clawgym_ros.procs import ProcessGroup
group = ProcessGroup()
for i in range(2):
    group.start(f"child{i}", ["sh", "-c", "sleep 300 & sleep 300 & wait"])
print("started", flush=True)
time.sleep(300)
"""


def test_children_and_grandchildren_die_with_a_sigkilled_launcher():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE,
                                text=True, cwd=ROOT)
    tree: set[int] = set()
    try:
        assert launcher.stdout.readline().strip() == "started"
        assert wait_until(lambda: len(descendants(launcher.pid)) >= 6, 10)  # 2 x (sh + 2 sleep)
        tree = descendants(launcher.pid)
        launcher.kill()
        launcher.wait()
        assert wait_until(lambda: not living(tree), 10), f"still running: {living(tree)}"
    finally:
        tree |= descendants(launcher.pid)
        launcher.kill()
        kill_all(living(tree))


def test_a_closed_group_leaves_no_watchdog_behind():
    from clawgym_ros.procs import ProcessGroup

    with ProcessGroup() as group:
        proc = group.start("child", ["sleep", "300"])
        watchdog = group._watchdog
        assert watchdog is not None and watchdog.poll() is None
    assert proc.poll() is not None and watchdog.poll() == 0


def test_a_pinned_group_runs_its_children_and_theirs_on_its_cpus(tmp_path):
    """ProcessGroup(cpus=...): the child is pinned before its command runs (same pid: the
    group still stops it), and a process it starts inherits the mask."""
    from clawgym_ros.procs import ProcessGroup, cpu_slices

    cpus = sorted(os.sched_getaffinity(0))
    first = cpu_slices(len(cpus))[-1]                  # the last CPU alone
    assert first == (cpus[-1],)
    script = ("import os, subprocess, sys; print(sorted(os.sched_getaffinity(0)), flush=True); "
              "subprocess.run([sys.executable, '-c', 'import os; "
              "print(sorted(os.sched_getaffinity(0)))'])")
    with ProcessGroup(log_dir=tmp_path, cpus=first) as group:
        proc = group.start("pinned", [sys.executable, "-c", script])
        assert proc.wait(timeout=30) == 0
    lines = (tmp_path / "pinned.log").read_text().split("\n")
    assert lines[:2] == [str(list(first))] * 2, lines


def test_cpu_slices_split_the_cpus_evenly_and_refuse_more_jobs_than_cpus():
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.procs import cpu_slices

    assert cpu_slices(2, [0, 1, 2, 3, 4]) == [(0, 1, 2), (3, 4)]
    assert cpu_slices(1, [3, 1]) == [(1, 3)]
    for jobs in (0, 6):
        with pytest.raises(ConfigError, match="--jobs") as err:
            cpu_slices(jobs, range(5))
        assert "from 1 to 5" in str(err.value) and "\n" not in str(err.value)


def test_sigkilled_clawgym_loop_takes_its_nodes_along(tmp_path):
    """kill -9 of `clawgym loop` once its nodes run: every node process is gone in seconds."""
    pytest.importorskip("rclpy")
    cli = subprocess.Popen([sys.executable, "-m", "clawgym_ros.cli", "loop", "--config",
                            "pick_place", "--out", str(tmp_path / "out")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    tree: set[int] = set()
    try:
        # the three worker nodes (plus the watchdog), then whatever they have started
        assert wait_until(lambda: len(descendants(cli.pid)) >= 4, 60), descendants(cli.pid)
        time.sleep(2.0)
        tree = descendants(cli.pid)
        commands = b" ".join(cmdline(pid) for pid in tree)
        for node in (b"synthesis_node", b"trainer_node", b"evaluator_node"):
            assert node in commands, commands
        cli.kill()
        cli.wait()
        assert wait_until(lambda: not living(tree), 15), f"still running: {living(tree)}"
    finally:
        tree |= descendants(cli.pid)
        cli.kill()
        kill_all(living(tree))
