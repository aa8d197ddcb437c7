"""`clawgym loop`: the closed loop as a ROS graph (synthesis, trainer, evaluator, coordinator).

Starts the nodes as separate processes in an isolated ROS domain, shows progress, prints the
final report path. Running the same command again after a crash or Ctrl-C resumes from the
last completed step (``<out>/loop/state.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Longest wait for an action server that --server-timeout accepts (a day).
MAX_SERVER_TIMEOUT_S = 86400.0
#: Wait for an action server (or its return) unless told otherwise: the CLI's default and
#: coordinator_node's (the value LoopGraph.run_loop and config/params/coordinator.yaml have
#: used since the loop's first version; the node's own default was 60).
DEFAULT_SERVER_TIMEOUT_S = 120.0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("loop", help="run the closed loop (synthesize, train, evaluate, "
                            "decide) as a ROS graph; resumable")
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="loop config YAML, or a name in config/loop/ (pick_place, gps_nav, "
                             "multi_task)")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory")
    parser.add_argument("--iterations", type=int, default=None, metavar="N",
                        help="maximum iterations (default: the config's)")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="loop seed (default: the config's)")
    parser.add_argument("--mode", choices=("closed", "open"), default=None,
                        help="closed (steer from reports, default) or open (uniform, fixed)")
    parser.add_argument("--server-timeout", type=float, default=DEFAULT_SERVER_TIMEOUT_S,
                        metavar="S",
                        help="seconds to wait for an action server, (0, 86400] "
                             f"(default: {DEFAULT_SERVER_TIMEOUT_S:g})")
    from clawgym_ros.ray_executor import add_executor_args

    add_executor_args(parser)
    parser.set_defaults(handler=run)


def _progress_bar(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False)


@contextlib.contextmanager
def shared_progress() -> Iterator[Any]:
    """One progress display for loops that run at the same time (a row each, through
    ``StatusView(label, progress)``); None when stderr is not a terminal (plain lines)."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    progress = _progress_bar(console)
    progress.start()
    try:
        yield progress
    finally:
        progress.stop()


class StatusView:
    """Shows loop status updates: a rich progress bar on a terminal, plain lines otherwise.

    ``progress``: a display shared with other loops (:func:`shared_progress`), where this
    loop gets a row of its own.
    """

    def __init__(self, label: str, progress: Any = None):
        from rich.console import Console

        self.console = progress.console if progress is not None else Console(stderr=True)
        self.label = label
        self.shared = progress is not None
        self.progress = progress
        self.task = None
        self._last_line = ""

    def __enter__(self) -> StatusView:
        if self.progress is None and self.console.is_terminal:
            self.progress = _progress_bar(self.console)
            self.progress.start()
        if self.progress is not None:
            self.task = self.progress.add_task(self.label, total=None)
        return self

    def __call__(self, status: dict[str, Any]) -> None:
        iteration = status.get("iteration", 0)
        total = status.get("max_iterations", 0)
        text = f"{self.label} [{iteration}/{total}] {status.get('message', '')}"
        progress = status.get("progress") or []
        if self.progress is not None:
            done, steps = (progress + [None, None])[:2]
            self.progress.update(self.task, description=text[:100], completed=done or 0,
                                 total=steps or None)
        elif not progress and text != self._last_line:
            self._last_line = text
            self.console.print(text, highlight=False)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None and not self.shared:
            self.progress.stop()


def run_loop_command(config: str, out: str, iterations: int | None = None,
                     seed: int | None = None, mode: str | None = None,
                     server_timeout: float = DEFAULT_SERVER_TIMEOUT_S) -> dict[str, Any]:
    """Validate the config, start the graph, run the loop; returns the final state."""
    from clawgym_ros.config import check_range
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.coordinator.graph import LoopGraph, find_loop_config

    check_range("--server-timeout", server_timeout, 0.0, MAX_SERVER_TIMEOUT_S, low_open=True)
    path = find_loop_config(config)
    cfg = load_loop_config(path, iterations=iterations, seed=seed, mode=mode)  # fail early
    out_dir = Path(out).resolve()
    check_saved_state(out_dir)
    if cfg.calibration:
        from clawgym_ros.calibration.apply import use_calibration

        use_calibration(out_dir, cfg.calibration)   # the nodes started below inherit it
    out_dir.mkdir(parents=True, exist_ok=True)
    with LoopGraph(out_dir / "logs") as graph, StatusView(cfg.name) as view:
        graph.start_workers(out_dir, workers_for(cfg))
        return graph.run_loop(path, out_dir, view, iterations=iterations, seed=seed, mode=mode,
                              server_timeout_s=server_timeout)


def workers_for(cfg: Any) -> tuple[str, ...]:
    """The action-serving nodes a loop needs: calibration_node only with online
    distillation."""
    from clawgym_ros import constants as C
    from clawgym_ros.coordinator.graph import WORKER_NODES

    return WORKER_NODES + ((C.NODE_CALIBRATION,) if cfg.distill.enabled else ())


def check_saved_state(out_dir: Path) -> None:
    """A run to resume has a readable ``loop/state.json`` (checked before any node starts: the
    coordinator node would otherwise die on it after the workers are up).

    Raises:
        ConfigError: the state file is damaged, naming it.
    """
    from clawgym_ros import constants as C
    from clawgym_ros.coordinator.plan import LoopState
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.safe_load import MAX_DATA_BYTES, load_json

    path = out_dir / C.DIR_LOOP / C.FILE_LOOP_STATE
    if not path.exists():
        return
    data = load_json(path, MAX_DATA_BYTES)
    try:
        LoopState.from_dict(data)
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError("state", type(err).__name__, "the loop state this program writes "
                          "(the file is damaged: remove it to start the loop again)",
                          str(path)) from None


def run(args: argparse.Namespace) -> int:
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.ray_executor import loop_executor_env

    # the synthesis and evaluator nodes run their episodes on this Ray cluster
    os.environ.update(loop_executor_env(args.executor, args.ray_address))
    state = run_loop_command(args.config, args.out, args.iterations, args.seed, args.mode,
                             args.server_timeout)
    print(f"loop done after {len(state['history'])} iteration(s): {state['stop_reason']}")
    for entry in state["history"]:
        scores = ", ".join(f"{d} {s['value']:.3f}" if s.get("value") is not None else f"{d} n/a"
                           for d, s in entry["scores"].items())
        print(f"  iteration {entry['iteration']}: {scores}  (report {entry['report_id'][:12]})")
    if state.get("final_report_id"):
        art = ArtifactStore(args.out).get(state["final_report_id"], C.KIND_REPORT)
        print(f"final report {art.id}")
        print(art.file(C.FILE_REPORT_HTML))
    return 0
