"""One evaluation end to end: suite -> specs -> rollouts (in-process or ROS) -> report artifact.

Shared by ``clawgym eval`` and ``evaluator_node``. The ROS mode is imported lazily (it needs
rclpy); everything else is pure.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.config import EvalConfig
from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
from clawgym_ros.evaluation.suites import expand, load_suite

if TYPE_CHECKING:
    from clawgym_ros.evaluation.workers import WorkerPool

@dataclasses.dataclass(frozen=True)
class EvalOutcome:
    """What an evaluation produced: the report artifact and its files."""

    report_id: str
    json_path: Path
    html_path: Path
    report: dict[str, Any]
    episodes: int
    successes: int


def run_evaluation(cfg: EvalConfig, source: PolicySource, run_dir: str | Path,
                   options: RolloutOptions | None = None,
                   progress: Callable[[int, int, int], None] | None = None,
                   cancel: threading.Event | None = None,
                   ros_timeout: float = C.ROS_ANSWER_TIMEOUT_S,
                   pool: WorkerPool | None = None) -> EvalOutcome:
    """Run ``cfg``'s suite with the policy and commit the report into ``run_dir``'s store.

    ``pool``: worker processes to run in_process episodes on (kept open; default: a pool of
    ``cfg.workers`` for this evaluation).

    Raises:
        ConfigError: bad suite/options; EvaluationCancelledError; LockstepError (ros mode).
    """
    import json

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.evaluation.preference import read_store
    from clawgym_ros.report.build import write_report

    options = options or RolloutOptions()
    from clawgym_ros.sim.active_calibration import active

    calibration = active()
    if calibration is not None and not cfg.calibration:
        # workers (and a ros-mode sim_node) run at the active calibration: the report says so
        cfg = dataclasses.replace(cfg, calibration=calibration.id)
    suite = load_suite(cfg.suite)
    if suite.max_steps and not options.max_steps:
        options = dataclasses.replace(options, max_steps=suite.max_steps)
    specs = expand(suite, cfg.seed)
    # A task-conditioned checkpoint (train --sequence) knows its tasks, any checkpoint the keys
    # it observes: a task it cannot run is refused here, before a worker starts or anything
    # is written (not after the episodes of the tasks before it ran).
    source.check_tasks([s.task for s in specs], f"suite {suite.name}", options.world)
    if cfg.mode == C.EVAL_MODES[0]:
        from clawgym_ros.evaluation.workers import run_specs

        results = run_specs(source, specs, cfg.workers, options, progress, cancel, pool)
    else:
        from clawgym_ros.evaluation.ros_mode import ros_families

        # A family the ROS graph cannot apply (no interposer node, not applied by sim_node)
        # would run its cells unperturbed under the family's name.
        for spec in specs:
            missing = [f for f in spec.families if f not in ros_families()]
            if missing:
                raise ConfigError("suite", cfg.suite, f"cells with families that run over ROS "
                                  f"({', '.join(ros_families())}) for --mode ros; {missing[0]} "
                                  "runs in_process only")
        if source.tasks() is not None:
            _check_ros_task_policy(specs, cfg.suite, options.world)
        from clawgym_ros.ros_io.eval_graph import run_ros_graph

        # sim_node loads each episode's task world (or the bare scene), as in-process.
        results = run_ros_graph(specs, source.label, source.run_dir, options.max_steps,
                                ros_timeout, Path(run_dir) / C.DIR_LOGS / "eval", progress,
                                cancel, world=options.world)
    frames = {}
    if any(r.failure_states for r in results):
        from clawgym_ros.evaluation.failure_states import collect
        from clawgym_ros.tasks.recovery import render_frames

        frames = render_frames(collect(results))
    store = ArtifactStore(run_dir)
    parents = [store.resolve(cfg.checkpoint_id).id] if cfg.checkpoint_id else []
    # judgments name checkpoints by their full id (clawgym judge resolves prefixes)
    policy = parents[0] if parents else source.label
    judgments = read_store(run_dir)
    artifact = write_report(store, results, suite, cfg, parents=parents, judgments=judgments,
                            frames=frames, policy=policy)
    json_path = artifact.file(C.FILE_REPORT_JSON)
    report = json.loads(json_path.read_text(encoding="utf-8"))
    return EvalOutcome(artifact.id, json_path, artifact.file(C.FILE_REPORT_HTML), report,
                       len(results), sum(r.success for r in results))


def _check_ros_task_policy(specs: list[Any], suite: str, world: str) -> None:
    """A task-conditioned checkpoint over ROS: policy_node is told its task by the task world
    it runs with, one per evaluation.

    Raises:
        ConfigError: a suite of several tasks, or the bare scene world.
    """
    from clawgym_ros.evaluation.rollout import WORLD_TASK, resolve_world

    tasks = list(dict.fromkeys(s.task for s in specs))
    if len(tasks) > 1:
        raise ConfigError("suite", suite, "one task per --mode ros evaluation of a "
                          f"task-conditioned checkpoint (this one has {', '.join(tasks)}); "
                          "--mode in_process runs several")
    if tasks and resolve_world(tasks[0], world) != WORLD_TASK:
        raise ConfigError("world", world, "'task' or 'auto' for a task-conditioned checkpoint "
                          "(policy_node is told its task by the task world)")
