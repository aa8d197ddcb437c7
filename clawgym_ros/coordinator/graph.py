"""Start the loop's ROS graph as separate processes and supervise it (no rclpy here).

:class:`LoopGraph` starts ``synthesis_node``, ``trainer_node`` and ``evaluator_node`` (each a
child process with the venv's interpreter, in an isolated ROS domain, logs under
``<out>/logs``), then one ``coordinator_node`` per loop. It follows the coordinator through
``<run>/loop/status.json`` and watches every child: if a node dies, everything is stopped and
a :class:`~clawgym_ros.coordinator.runner.LoopError` says which one and that running the same
command again resumes. :meth:`LoopGraph.close` (also on Ctrl-C) stops every child's process
group: SIGINT, then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.coordinator.runner import FILE_STATUS, LoopError
from clawgym_ros.errors import shorten
from clawgym_ros.procs import ProcessGroup, isolated_ros_env, reserve_domain_id

WORKER_NODES = (C.NODE_SYNTHESIS, C.NODE_TRAINER, C.NODE_EVALUATOR)


def config_dir() -> Path:
    """The package's config/ folder: the source tree's, else the installed share folder."""
    from clawgym_ros.config import data_root

    return data_root() / "config"


def find_loop_config(name_or_path: str) -> Path:
    """A loop config by path, or by name in config/loop/ (``pick_place``).

    Raises:
        LoopError: neither a file nor a known name (listing the known ones).
    """
    from clawgym_ros.safe_load import is_file

    path = Path(name_or_path)
    if is_file(path):
        return path
    candidate = config_dir() / "loop" / f"{name_or_path}.yaml"
    if is_file(candidate):
        return candidate
    known = sorted(p.stem for p in (config_dir() / "loop").glob("*.yaml"))
    raise LoopError(f"loop config {shorten(name_or_path)} is neither a file nor one of: "
                    + ", ".join(known))


def params_file(node: str) -> Path | None:
    """config/params/<node>.yaml if present (``<node>: ros__parameters:`` layout)."""
    path = config_dir() / "params" / f"{node.removesuffix('_node')}.yaml"
    return path if path.is_file() else None


def node_command(node: str, params: dict[str, Any]) -> list[str]:
    """``python -m clawgym_ros.nodes.<node> --ros-args [--params-file F] -p k:=v ...``."""
    import sys

    cmd = [sys.executable, "-m", f"{C.PACKAGE}.nodes.{node}", "--ros-args"]
    pfile = params_file(node)
    if pfile is not None:
        cmd += ["--params-file", str(pfile)]
    for key, value in params.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        cmd += ["-p", f"{key}:={value}"]
    return cmd


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file written atomically by another process (None while absent)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class LoopGraph:
    """The worker nodes plus one coordinator per loop, in their own ROS domain.

    Args:
        log_dir: folder of the node logs.
        domain_id: ROS_DOMAIN_ID (default: the first id from this process's derived one that
            no other clawgym process on this host holds; held until :meth:`close`).
        worker_params: extra ROS parameters per worker node name.
        cpus: CPUs every node (and its worker processes) is pinned to (default: not pinned);
            a node's default worker count follows them (one per CPU it may run on).
    """

    def __init__(self, log_dir: str | Path, domain_id: int | None = None,
                 worker_params: dict[str, dict[str, Any]] | None = None,
                 cpus: Sequence[int] | None = None):
        self.log_dir = Path(log_dir)
        self._domain = reserve_domain_id(domain_id or None)
        self.domain_id = self._domain.domain_id
        self.group = ProcessGroup(env=isolated_ros_env(self.domain_id), log_dir=self.log_dir,
                                  cpus=cpus)
        self.worker_params = worker_params or {}
        self._loops = 0

    def start_workers(self, run_dir: str | Path, nodes: Sequence[str] = WORKER_NODES) -> None:
        """Start the action-serving nodes (configured and activated at start-up)."""
        for node in nodes:
            params = {"autostart": True, "run_dir": str(Path(run_dir).resolve()),
                      **self.worker_params.get(node, {})}
            self.group.start(node, node_command(node, params))

    def _check_workers(self) -> None:
        for name, proc in self.group.procs:
            if name.startswith(C.NODE_COORDINATOR):
                continue
            code = proc.poll()
            if code is not None:
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                raise LoopError(f"{name} stopped ({how}); see {self.log_dir / (name + '.log')}. "
                                "Everything completed is saved: run the same command again to "
                                "resume")

    def run_loop(self, config: str | Path, run_dir: str | Path,
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 iterations: int | None = None, seed: int | None = None,
                 mode: str | None = None, server_timeout_s: float = 120.0,
                 poll_s: float = 0.25) -> dict[str, Any]:
        """Run one loop to its end with a coordinator_node process.

        Returns:
            The final ``loop/state.json`` content.

        Raises:
            LoopError: a node stopped, or the coordinator failed (its last message).
        """
        run_dir = Path(run_dir).resolve()
        status_path = run_dir / C.DIR_LOOP / FILE_STATUS
        status_path.unlink(missing_ok=True)
        params: dict[str, Any] = {"config": str(Path(config).resolve()), "run_dir": str(run_dir),
                                  "server_timeout_s": float(server_timeout_s)}
        if iterations:
            params["iterations"] = int(iterations)
        if seed is not None:
            params["seed"] = int(seed)
        if mode:
            params["mode"] = mode
        name = f"{C.NODE_COORDINATOR}-{self._loops}" if self._loops else C.NODE_COORDINATOR
        self._loops += 1
        proc = self.group.start(name, node_command(C.NODE_COORDINATOR, params))
        last: dict[str, Any] | None = None
        while True:
            code = proc.poll()
            status = read_json(status_path)
            if status is not None and status != last:
                last = status
                if on_status is not None:
                    on_status(status)
            if code is not None:
                break
            self._check_workers()
            time.sleep(poll_s)
        state = read_json(run_dir / C.DIR_LOOP / "state.json")
        if code != 0 or not state or not state.get("done"):
            message = (last or {}).get("message") or "no status"
            raise LoopError(f"the coordinator stopped (exit code {code}): {message}; see "
                            f"{self.log_dir / (name + '.log')}. Run the same command again to "
                            "resume")
        return state

    def close(self) -> None:
        """Stop every node (process groups: SIGINT, SIGTERM, SIGKILL), then free the domain."""
        try:
            self.group.close()
        finally:
            self._domain.release()

    def __enter__(self) -> LoopGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
