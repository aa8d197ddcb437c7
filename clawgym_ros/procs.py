"""Child processes for nodes: isolated ROS environment, same interpreter, reliable cleanup.

Used by `clawgym loop` to start the graph and by tests. Imports no rclpy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

DOMAIN_ID_MIN = 1
DOMAIN_ID_MAX = 232


def isolated_ros_env(domain_id: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for ROS processes that see only each other on this host.

    Args:
        domain_id: ROS_DOMAIN_ID in [1, 232].
        base: environment to start from (default: this process's).

    Returns:
        A new environment mapping.
    """
    if not DOMAIN_ID_MIN <= domain_id <= DOMAIN_ID_MAX:
        raise ValueError(f"ROS_DOMAIN_ID={domain_id} is invalid; allowed: "
                         f"[{DOMAIN_ID_MIN}, {DOMAIN_ID_MAX}]")
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


#: Derived domain ids start here (0-9 are left to hand-configured ROS set-ups).
DOMAIN_ID_FIRST_DERIVED = DOMAIN_ID_MIN + 9
_DERIVED_SPAN = DOMAIN_ID_MAX - DOMAIN_ID_FIRST_DERIVED


def domain_id_for(pid: int | None = None) -> int:
    """A domain id derived from a process id, spread over the allowed range."""
    pid = os.getpid() if pid is None else pid
    return DOMAIN_ID_FIRST_DERIVED + (pid * 7919) % _DERIVED_SPAN


def domain_lock_path(domain_id: int) -> Path:
    """The lock file that reserves ``domain_id`` on this host."""
    return Path(tempfile.gettempdir()) / f"clawgym_ros-domain-{domain_id}.lock"


class DomainReservation:
    """A ROS domain id held for this process (an flock on its lock file) until released.

    Two graphs in one domain answer each other's goals (a loop's trainer goal reached an
    ablation's trainer once, with ids derived from process ids alone, which collide 1 time in
    222). The lock file descriptor is not inherited by child processes, and the kernel drops
    the lock when this process ends however it ends (kill -9 included).
    """

    def __init__(self, domain_id: int, fd: int | None):
        self.domain_id = domain_id
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DomainReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(domain_id: int) -> int | None:
    """The locked descriptor of ``domain_id``'s lock file, or None when another process holds
    it (or the file belongs to another user who did not leave it writable)."""
    try:
        fd = os.open(domain_lock_path(domain_id), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    with contextlib.suppress(OSError):   # other users may reserve it after this process
        os.fchmod(fd, 0o666)
    return fd


def reserve_domain_id(domain_id: int | None = None) -> DomainReservation:
    """Reserve a ROS domain id no other clawgym process on this host holds.

    Args:
        domain_id: a fixed id (used as given, reserved when free: the caller chose it), or
            None for the first free id from this process's derived id on.

    Raises:
        RuntimeError: every derived id is held (223 clawgym graphs on one host).
    """
    if domain_id is not None:
        return DomainReservation(domain_id, _try_lock(domain_id))
    start = domain_id_for() - DOMAIN_ID_FIRST_DERIVED
    for k in range(_DERIVED_SPAN):
        candidate = DOMAIN_ID_FIRST_DERIVED + (start + k) % _DERIVED_SPAN
        fd = _try_lock(candidate)
        if fd is not None:
            return DomainReservation(candidate, fd)
    raise RuntimeError(f"every ROS domain id in [{DOMAIN_ID_FIRST_DERIVED}, {DOMAIN_ID_MAX}] "
                       "is reserved by another clawgym process on this host "
                       f"({domain_lock_path(DOMAIN_ID_FIRST_DERIVED).parent})")


#: The watchdog of a :class:`ProcessGroup`: reads one process-group id per line ("-id" when
#: that group was stopped) from its stdin, a pipe only the launcher holds. EOF means the
#: launcher is gone however it ended (kill -9 included): SIGTERM, then SIGKILL, every group
#: still listed. A pipe, not a pid poll: no race with pid reuse of the launcher, no latency.
_WATCHDOG = r"""
import os, signal, sys, time
groups = []
for line in sys.stdin:
    line = line.strip()
    if line.startswith("-") and int(line[1:]) in groups:
        groups.remove(int(line[1:]))
    elif line and not line.startswith("-"):
        groups.append(int(line))
def alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False
for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
    groups = [g for g in groups if alive(g)]
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + wait
    while groups and time.monotonic() < deadline and any(alive(g) for g in groups):
        time.sleep(0.05)
"""


#: Run by a child before its command (``-I -S``: nothing imported but os and sys): pin the
#: process to the CPUs in argv[1], then exec the command, so the mask holds from its first
#: instruction and every process it starts inherits it.
_PIN = ("import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')}); "
        "os.execvp(sys.argv[2], sys.argv[2:])")


def cpu_slices(jobs: int, cpus: Sequence[int] | None = None) -> list[tuple[int, ...]]:
    """``cpus`` (default: the CPUs this process may run on) split into ``jobs`` disjoint,
    contiguous slices whose sizes differ by one at most.

    Raises:
        ConfigError: ``jobs`` is not between 1 and the number of CPUs.
    """
    from clawgym_ros.errors import ConfigError

    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if not isinstance(jobs, int) or not 1 <= jobs <= len(cpus):
        raise ConfigError("--jobs", jobs, f"an integer from 1 to {len(cpus)} (a CPU per job at "
                          f"least; this process may run on {len(cpus)})")
    size, extra = divmod(len(cpus), jobs)
    slices, start = [], 0
    for job in range(jobs):
        end = start + size + (job < extra)
        slices.append(tuple(cpus[start:end]))
        start = end
    return slices


class ProcessGroup:
    """Start child processes with this interpreter; stop them all on :meth:`close`.

    Each child gets its own process group so that grandchildren are stopped too. Children
    are started with ``sys.executable`` so that the venv (and its ROS wheel bootstrap) applies.
    The children die with the launcher even when it cannot clean up (kill -9, OOM killer): a
    watchdog process (:data:`_WATCHDOG`, in its own session) stops every group still running
    when the launcher's end of its pipe closes. (PR_SET_PDEATHSIG would reach only the direct
    child, not a node's worker processes, and fires when the spawning *thread* ends.)
    """

    def __init__(self, env: Mapping[str, str] | None = None, log_dir: str | Path | None = None,
                 cpus: Sequence[int] | None = None):
        self.env = dict(env) if env is not None else dict(os.environ)
        self.log_dir = Path(log_dir) if log_dir else None
        #: CPUs every child (and whatever it starts) is pinned to; None: not pinned.
        self.cpus = tuple(sorted(cpus)) if cpus else None
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self._watchdog: subprocess.Popen | None = None

    def _watch(self, line: str) -> None:
        """Tell the watchdog (started on first use) about a group; never raises."""
        if self._watchdog is None:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                text=True,
            )
        try:
            self._watchdog.stdin.write(line + "\n")
            self._watchdog.stdin.flush()
        except (OSError, ValueError):
            pass    # the watchdog died: children are still stopped by close()

    def start_module(self, name: str, module: str, args: Sequence[str] = ()) -> subprocess.Popen:
        """Run ``python -m module args...`` as a named child."""
        return self.start(name, [sys.executable, "-m", module, *args])

    def start(self, name: str, cmd: Sequence[str]) -> subprocess.Popen:
        """Run ``cmd`` as a named child; its output goes to ``<log_dir>/<name>.log`` if set."""
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (closed in close())
        else:
            out = subprocess.DEVNULL
        argv = list(cmd)
        if self.cpus:
            argv = [sys.executable, "-I", "-S", "-c", _PIN, ",".join(map(str, self.cpus)), *argv]
        proc = subprocess.Popen(
            argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        if out is not subprocess.DEVNULL:
            out.close()
        self.procs.append((name, proc))
        self._watch(str(proc.pid))
        return proc

    def get(self, name: str) -> subprocess.Popen:
        for child, proc in self.procs:
            if child == name:
                return proc
        raise KeyError(name)

    def stop(self, name: str, timeout: float = 5.0) -> None:
        proc = self.get(name)
        _terminate(proc, timeout)
        self._watch(f"-{proc.pid}")

    def close(self, timeout: float = 5.0) -> None:
        """SIGINT, then SIGTERM, then SIGKILL every child's process group."""
        for _, proc in reversed(self.procs):
            _terminate(proc, timeout)
            self._watch(f"-{proc.pid}")
        self.procs.clear()
        if self._watchdog is not None:
            with contextlib.suppress(OSError, ValueError):
                self._watchdog.stdin.close()
            try:
                self._watchdog.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
                self._watchdog.wait()
            self._watchdog = None

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _terminate(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is not None:
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + (timeout if sig != signal.SIGKILL else 10.0)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return
            time.sleep(0.02)
