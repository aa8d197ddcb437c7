"""Ray execution of synthesis and evaluation episodes (``--executor ray [--ray-address A]``).

The local process pools (:mod:`clawgym_ros.synthesis.pool`,
:mod:`clawgym_ros.evaluation.workers`) stay the default. Inside :func:`executor_scope` with
``ray``, the same per-episode functions (``synthesis.pool.run_episode``,
``evaluation.workers._run``) run as Ray tasks, one CPU each, and come back in episode order,
so a dataset or report has the same content id as with the local pool. Each Ray worker process
keeps its evaluation runner between episodes, as a pool worker does.

- Without an address, a Ray instance is started in this process for the command's duration
  (``ray.init(num_cpus=workers)``); with one (``host:port`` of a head started with
  ``ray start --head``), the command joins that cluster and leaves it running.
- The workers import this package from the same path as this process (``PYTHONPATH`` in the
  job's runtime environment): every node needs the checkout (or install) at that path, with
  the same dependencies, as ``ray start`` needs the same Python.
- A task whose worker process or node dies is retried (:data:`MAX_RETRIES` times; episodes are
  deterministic in their seed, so a retry gives the same result); once retries are spent the
  command fails with one line naming the episode, and nothing is committed. An error raised by
  the episode itself (a bad checkpoint) is not retried and reaches the caller as itself.

``ray`` is an optional dependency (``pip install clawgym_ros[ray]``, ray==2.52.0); it is imported
only here and only when asked for.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros.errors import ClawgymError, ConfigError, one_line

EXECUTORS = ("local", "ray")
#: Retries of a task whose worker or node died.
MAX_RETRIES = 3
#: Seconds to reach a given Ray address before giving up.
CONNECT_TIMEOUT_S = 5.0
#: Seconds a Ray head has to answer the probe of a given address.
GCS_PROBE_S = 5.0
#: Seconds between the caller's checks for cancellation while it waits.
POLL_S = 0.1
#: Package root that Ray workers put on their path.
PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])

#: Process-wide default for commands without --executor and for nodes (``clawgym loop``
#: passes its --executor / --ray-address to its node processes this way).
ENV_EXECUTOR = "CLAWGYM_EXECUTOR"
ENV_RAY_ADDRESS = "CLAWGYM_RAY_ADDRESS"
_LOCAL = object()
_CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("clawgym_ray_cluster",
                                                               default=None)
_PROCESS: RayCluster | None = None
_PROCESS_LOCK = threading.Lock()


class RayExecutorError(ClawgymError):
    """Work was lost on the Ray cluster (retries spent) or the cluster failed."""


def current() -> RayCluster | None:
    """The Ray cluster to run episodes on (None: the local pool): the enclosing
    :func:`executor_scope`'s, else the process's from ``$CLAWGYM_EXECUTOR=ray`` (and
    ``$CLAWGYM_RAY_ADDRESS``), connected at first use and kept for the process's life (a
    long-lived node keeps its Ray workers warm between goals)."""
    scoped = _CURRENT.get()
    if scoped is _LOCAL:
        return None
    if scoped is not None:
        return scoped
    return _from_environment()


def _from_environment() -> RayCluster | None:
    global _PROCESS
    executor = os.environ.get(ENV_EXECUTOR, "")
    if executor in ("", "local"):
        return None
    if executor != "ray":
        raise ConfigError(ENV_EXECUTOR, executor, "local or ray (or unset)")
    with _PROCESS_LOCK:
        if _PROCESS is None:
            from clawgym_ros.synthesis.pool import default_workers

            _PROCESS = RayCluster(os.environ.get(ENV_RAY_ADDRESS) or None, default_workers())
            atexit.register(_PROCESS.close)
        return _PROCESS


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor", "ray", "local, or ray with the ray package installed "
                          "(pip install 'clawgym_ros[ray]', i.e. ray==2.52.0)") from None
    return ray


def check_address(address: str) -> tuple[str, int]:
    """``host:port`` of a reachable Ray head (a TCP connection within
    :data:`CONNECT_TIMEOUT_S`), or one line saying why not.

    Raises:
        ConfigError: malformed, unresolvable or unreachable address.
    """
    allowed = ("HOST:PORT of a running Ray head (the address `ray start --head` prints, "
               "e.g. 127.0.0.1:6379)")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("--ray-address", address, allowed)
    try:
        with socket.create_connection((host.strip("[]"), int(port)),
                                      timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise ConfigError("--ray-address", address, f"{allowed}; nothing answers there ({why}; "
                          f"waited up to {CONNECT_TIMEOUT_S:g} s)") from None
    # Something listens; whether it is a Ray head is asked in a child process: Ray's client
    # waits for a GCS far longer than this and, when it gives up, terminates the process.
    import subprocess
    import sys

    env = {**os.environ, "RAY_gcs_rpc_server_reconnect_timeout_s": str(int(GCS_PROBE_S))}
    try:
        probe = subprocess.run([sys.executable, "-c", _GCS_PROBE, address], capture_output=True,
                               text=True, timeout=GCS_PROBE_S + 15, env=env)
        ok = probe.returncode == 0 and probe.stdout.strip() == "ok"
    except subprocess.TimeoutExpired:
        ok = False
    if not ok:
        raise ConfigError("--ray-address", address, f"{allowed}; something listens there but "
                          f"no Ray head answered within {GCS_PROBE_S:g} s") from None
    return host, int(port)


_GCS_PROBE = """
import sys
import ray
client = ray._raylet.GcsClient(address=sys.argv[1])
client.internal_kv_get(b"session_name", namespace=None, timeout=5)
print("ok")
"""


class RayCluster:
    """A Ray connection for one command: a local instance, or a cluster joined by address.

    Args:
        address: ``host:port`` of a running head; None starts Ray in this process.
        workers: CPUs of the local instance (ignored with an address).
    """

    def __init__(self, address: str | None = None, workers: int = 1) -> None:
        ray = _import_ray()
        if address is not None:
            check_address(address)
        if ray.is_initialized():
            raise RayExecutorError("Ray is already initialized in this process")
        env = {"PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_PARENT,
                                                           os.environ.get("PYTHONPATH", ""))
                                             if p),
               "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "OMP_NUM_THREADS": "1",
               ENV_EXECUTOR: "local",      # a task's own code never submits more tasks
               "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
        kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": False,
                                  "configure_logging": False}
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        try:
            if address is None:
                ray.init(num_cpus=max(1, int(workers)), include_dashboard=False, **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as err:
            with contextlib.suppress(Exception):
                ray.shutdown()
            where = address or "a local instance"
            raise ConfigError("--ray-address", where, "a running Ray cluster this process can "
                              f"join ({one_line(str(err), 300)})") from None
        self.ray = ray
        self.address = address
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        #: tasks in flight at most (None: twice the cluster's CPUs); benchmarks lower it
        self.max_in_flight: int | None = None
        self._remote: dict[Callable, Any] = {}

    def close(self) -> None:
        """Disconnect (and stop a local instance); a joined cluster keeps running."""
        self.ray.shutdown()

    def _task(self, fn: Callable) -> Any:
        if fn not in self._remote:
            self._remote[fn] = self.ray.remote(num_cpus=1, max_retries=MAX_RETRIES,
                                               retry_exceptions=False)(fn)
        return self._remote[fn]

    def map_ordered(self, fn: Callable, calls: Sequence[tuple], what: Sequence[str],
                    is_cancelled: Callable[[], bool] = lambda: False) -> Iterator[Any]:
        """``fn(*call)`` for every call as Ray tasks, yielded in call order.

        At most :attr:`max_in_flight` (default twice the cluster's CPUs) are in flight.
        Stops (yielding no more) once ``is_cancelled()``: the results are a prefix of the
        calls.

        Args:
            what: a name per call for errors (e.g. ``episode 12 (seed 345)``).

        Raises:
            RayExecutorError: a task was lost after :data:`MAX_RETRIES` retries, or raised
                something that is not a ClawgymError.
            ClawgymError: what a task raised.
        """
        ray = self.ray
        task = self._task(fn)
        window = self.max_in_flight or 2 * self.cpus
        pending: dict[int, Any] = {}
        submitted = 0
        try:
            for k in range(len(calls)):
                while submitted < len(calls) and len(pending) < window:
                    if is_cancelled():
                        return
                    pending[submitted] = task.remote(*calls[submitted])
                    submitted += 1
                ref = pending.pop(k)
                while not ray.wait([ref], timeout=POLL_S)[0]:
                    if is_cancelled():
                        return
                if is_cancelled():
                    return
                yield self._get(ref, what[k])
        finally:
            for ref in pending.values():
                with contextlib.suppress(Exception):
                    ray.cancel(ref)

    def _get(self, ref: Any, what: str) -> Any:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, ClawgymError):
                raise cause from None
            raise RayExecutorError(f"{what} failed on the Ray cluster: "
                                   f"{type(cause).__name__ if cause else 'error'}: "
                                   f"{one_line(str(cause or err), 500)}") from None
        except ray.exceptions.RayError as err:
            raise RayExecutorError(
                f"{what} was lost on the Ray cluster after {MAX_RETRIES} retries "
                f"({type(err).__name__}: {one_line(str(err), 300)}); nothing was "
                "committed") from None


@contextlib.contextmanager
def executor_scope(executor: str, address: str | None = None, workers: int = 1
                   ) -> Iterator[RayCluster | None]:
    """Run the synthesis / evaluation calls inside on ``executor``.

    Args:
        executor: ``local`` (the process pools), ``ray``, or None (``$CLAWGYM_EXECUTOR``,
            else local).
        address: Ray head address (``ray`` only).
        workers: CPUs of a local Ray instance.

    Raises:
        ConfigError: unknown executor, an address without ``ray``, an unusable address.
    """
    if executor is None:      # not given: $CLAWGYM_EXECUTOR decides (see current())
        if address:
            raise ConfigError("--ray-address", address, "only with --executor ray")
        yield None
        return
    if executor not in EXECUTORS:
        raise ConfigError("--executor", executor, " or ".join(EXECUTORS))
    if executor == "local":
        if address:
            raise ConfigError("--ray-address", address, "only with --executor ray")
        token = _CURRENT.set(_LOCAL)
        try:
            yield None
        finally:
            _CURRENT.reset(token)
        return
    cluster = RayCluster(address, workers)
    token = _CURRENT.set(cluster)
    try:
        yield cluster
    finally:
        _CURRENT.reset(token)
        cluster.close()


def loop_executor_env(executor: str | None, address: str | None) -> dict[str, str]:
    """The environment that makes a loop's node processes run their episodes on Ray
    (``clawgym loop --executor ray --ray-address A``); empty without ``ray``.

    Raises:
        ConfigError: ``ray`` without an address (each node would start its own Ray), a bad
            address, an address without ``ray``.
    """
    if executor != "ray":
        if address:
            raise ConfigError("--ray-address", address, "only with --executor ray")
        return {ENV_EXECUTOR: executor} if executor else {}
    if not address:
        raise ConfigError("--ray-address", address, "the HOST:PORT of a running Ray head with "
                          "clawgym loop --executor ray (the loop's nodes join one cluster)")
    _import_ray()
    check_address(address)
    return {ENV_EXECUTOR: "ray", ENV_RAY_ADDRESS: address}


def add_executor_args(parser: Any) -> None:
    """``--executor local|ray`` and ``--ray-address HOST:PORT`` on a subcommand."""
    parser.add_argument("--executor", choices=EXECUTORS, default=None,
                        help=f"where episodes run: local worker processes or Ray tasks "
                             f"(default: ${ENV_EXECUTOR}, else local)")
    parser.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                        help="join this Ray cluster (ray start --head prints the address); "
                             "default with --executor ray: start Ray in this process with "
                             "--workers CPUs")
