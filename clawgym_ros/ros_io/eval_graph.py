"""ROS evaluation from a plain process (``clawgym eval --mode ros``): start the graph, run the
lockstep episodes, stop everything.

sim_node (lockstep), the interposers the suite needs and policy_node run as child processes of
a :class:`~clawgym_ros.procs.ProcessGroup` in an isolated ROS domain (localhost only); this
process joins the same domain with a private rclpy context and drives the episodes with
:class:`~clawgym_ros.ros_io.eval_lockstep.LockstepEvaluator`, which spins the helper node's
executor itself in this thread (no second thread). Every child is stopped on return,
on error and on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.ros_mode import graph_processes, needed_families
from clawgym_ros.evaluation.suites import EpisodeSpec
from clawgym_ros.procs import ProcessGroup, isolated_ros_env, reserve_domain_id


def run_ros_graph(specs: Sequence[EpisodeSpec], policy: str, run_dir: str, max_steps: int,
                  timeout: float = C.ROS_ANSWER_TIMEOUT_S, log_dir: str | Path | None = None,
                  progress: Callable[[int, int, int], None] | None = None,
                  cancel: threading.Event | None = None,
                  domain_id: int | None = None,
                  max_chunk: int | None = None,
                  world: str = "scene") -> list[EpisodeResult]:
    """Start the graph, evaluate ``specs`` in lockstep, stop the graph.

    Args:
        specs: episodes (the tasks of one scene: the arm tasks, or gps_nav).
        policy: policy text for policy_node (checkpoint id or ``scripted:<task>``).
        run_dir: run directory of the checkpoint.
        max_steps: control steps per episode; 0 = each episode's env limit.
        timeout: seconds to wait for any single answer.
        log_dir: where the children's logs go.
        domain_id: ROS domain (default: derived from this process id).
        max_chunk: policy_node's ``max_chunk`` (None = its default; 1 = a command per step).
        world: ``auto``, ``task`` or ``scene`` (as in-process; sim_node loads each episode's
            task world, or simulates the bare scene).

    Raises:
        LockstepError: the graph did not come up or stopped answering.
        ConfigError: a world the specs' tasks cannot run in.
    """
    from clawgym_ros.ros_io.eval_lockstep import wait_ready

    with _lockstep_graph(specs, policy, str(Path(run_dir).resolve()) if run_dir else "",
                         log_dir, "cli", needed_families(specs), timeout, max_steps,
                         domain_id, max_chunk, world) as (group, evaluator):
        wait_ready(evaluator, timeout=max(60.0, timeout), check=lambda: check_children(group))
        return evaluator.run(specs, progress, cancel)


def check_children(group: ProcessGroup) -> None:
    """Raise when a node of the graph has exited, with the line it ended on (a node refusing
    its parameters, e.g. policy_node given a checkpoint whose observation the world's topics
    cannot give, exits 2 with one line naming why).

    Raises:
        LockstepError: a child is no longer running.
    """
    from clawgym_ros.ros_io.eval_lockstep import LockstepError

    for name, proc in group.procs:
        code = proc.poll()
        if code is None:
            continue
        why = ""
        if group.log_dir is not None and (group.log_dir / f"{name}.log").exists():
            lines = [line.strip() for line in (group.log_dir / f"{name}.log").read_text(
                encoding="utf-8", errors="replace").splitlines()]
            # The node's own last line (rclpy's log lines start with '[').
            why = next((line for line in reversed(lines) if line and line[0] != "["), "")
        raise LockstepError(f"ros evaluation: {name} exited with status {code}"
                            + (f": {why}" if why else ""))


def _image_size(policy: str, run_dir: str) -> int:
    """Camera image side a checkpoint policy was trained on (0: it reads no image; the
    scripted baselines never do). The built-in types are answered from the checkpoint's
    config.json (no torch in this process); another type is loaded and asked. A checkpoint
    that cannot be read gives 0: policy_node then reports what is wrong with it."""
    import json

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.errors import ClawgymError
    from clawgym_ros.evaluation.rollout import (
        POLICY_CHECKPOINT,
        PolicySource,
        RolloutOptions,
        image_options,
        policy_image_shape,
    )

    source = PolicySource.parse(policy, run_dir)
    if source.kind != POLICY_CHECKPOINT:
        return 0
    try:
        artifact = ArtifactStore(run_dir).resolve(source.ref, C.KIND_CHECKPOINT)
        step = (artifact.path / C.FILE_LAST).read_text().strip()
        spec = json.loads((artifact.path / step / C.FILE_CHECKPOINT_CONFIG).read_text(
            encoding="utf-8"))["policy_spec"]
    except (ClawgymError, OSError, ValueError, KeyError, TypeError):
        return 0
    if spec.get("type") in (C.POLICY_MLP, C.POLICY_CNN):
        shape = spec.get("image_shape")
        return int(shape[0]) if spec["type"] == C.POLICY_CNN and shape else 0
    try:
        loaded = source.load()
    except ClawgymError:
        return 0
    if policy_image_shape(loaded) is None:
        return 0
    return image_options(loaded, RolloutOptions()).image_size


@contextlib.contextmanager
def graph_with_helper(processes: Sequence[Any], node_name: str, log_dir: Any,
                      make_executor: Callable[[Any, Any], Any], domain_id: int | None = None
                      ) -> Iterator[tuple[ProcessGroup, Any, Any]]:
    """Start ``processes`` (graph_processes rows) as children in an isolated domain and join it
    with a private helper node (no parameter services or rosout: fewer entities to poll per
    step); yields (process group, node, ``make_executor(node, context)``). The helper is shut
    down, then every child stopped, on exit."""
    import rclpy

    with contextlib.ExitStack() as stack:
        domain = stack.enter_context(reserve_domain_id(domain_id)).domain_id
        env = isolated_ros_env(domain)
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = env["ROS_AUTOMATIC_DISCOVERY_RANGE"]
        group = stack.enter_context(ProcessGroup(env=env, log_dir=log_dir))
        for proc in processes:
            group.start_module(proc.name, proc.module, proc.args)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain)
        node = rclpy.create_node(node_name, context=context, start_parameter_services=False,
                                 enable_rosout=False)
        executor = make_executor(node, context)
        try:
            yield group, node, executor
        finally:
            executor.shutdown(timeout_sec=1.0)
            node.destroy_node()
            if context.ok():
                rclpy.shutdown(context=context)


@contextlib.contextmanager
def _lockstep_graph(specs: Sequence[EpisodeSpec], policy: str, run_dir: str, log_dir: Any,
                    suffix: str, families: Sequence[str], timeout: float, max_steps: int,
                    domain_id: int | None = None, max_chunk: int | None = None,
                    world: str = "scene") -> Iterator[tuple[ProcessGroup, Any]]:
    """Start the lockstep graph in an isolated domain and a private helper node driving it;
    yields (process group, LockstepEvaluator); everything is stopped on exit."""
    from clawgym_ros.evaluation.rollout import WORLD_SCENE, resolve_world, scene_of
    from clawgym_ros.evaluation.ros_mode import check_ros_families
    from clawgym_ros.ros_io.eval_lockstep import LockstepEvaluator
    from clawgym_ros.ros_io.lean_executor import executor_for

    check_ros_families(specs)

    # Checked before anything starts: a world a task cannot run in fails here, as in-process
    # (the bare scene world scores arm tasks only; graph_processes refuses mixed scenes).
    start_world = resolve_world(specs[0].task, world) if specs else "scene"
    scene = scene_of(specs[0].task) if specs else C.SCENE_TABLETOP
    for spec in specs:
        if resolve_world(spec.task, world) == WORLD_SCENE and \
                scene_of(spec.task) != C.SCENE_TABLETOP:
            from clawgym_ros.errors import ConfigError

            raise ConfigError("world", world, f"'task' for {spec.task} (the scene world "
                              "scores arm tasks only)")
        if resolve_world(spec.task, world) == WORLD_SCENE and \
                C.FAMILY_DISTURBANCE in spec.families:
            from clawgym_ros.errors import ConfigError

            # As the in-process wrapper refuses it (sim_node's bare scene has no stages).
            raise ConfigError("disturbance", spec.event or "object_drop",
                              "a task world (the disturbance needs the task's stages)")
    image_size = _image_size(policy, run_dir)
    processes = graph_processes(specs, policy, run_dir, scene=scene, max_chunk=max_chunk,
                                world=start_world, image=bool(image_size),
                                image_size=image_size)
    with graph_with_helper(processes, f"{C.NODE_EVALUATOR}_{suffix}", log_dir,
                           lambda node, context: executor_for(node, context=context),
                           domain_id) as (group, node, executor):
        evaluator = LockstepEvaluator(node, tuple(families), timeout, max_steps, scene=scene,
                                      executor=executor, world=world, start_world=start_world)
        try:
            yield group, evaluator
        finally:
            evaluator.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_lockstep(specs: Sequence[EpisodeSpec], policy: str, max_steps: int,
                     timeout: float = C.ROS_ANSWER_TIMEOUT_S, max_chunk: int | None = None,
                     run_dir: str = "", world: str = "scene",
                     results: list[EpisodeResult] | None = None) -> dict[str, Any]:
    """Control steps/s of the lockstep graph (``clawgym bench eval``).

    Starts the graph like :func:`run_ros_graph` (``policy`` from ``run_dir``, episodes in
    ``world``), runs ``specs[0]`` as a warm-up (discovery, first IK, torch's first call), then
    times ``specs[1:]`` and each process's CPU time. ``results``, when given, receives every
    episode's result (the warm-up's first), to compare with in-process.

    Returns:
        ``episodes``, ``control_steps``, ``wall_s``, ``control_steps_per_s`` and
        ``cpu_ms_per_step`` per process (``sim_node``, ``policy_node``, ``evaluator``).

    Raises:
        LockstepError: the graph did not come up or stopped answering.
    """
    import shutil
    import tempfile
    import time

    from clawgym_ros.ros_io.eval_lockstep import wait_ready

    logs = tempfile.mkdtemp(prefix="clawgym_bench_eval_")
    families = needed_families(specs)
    with _lockstep_graph(specs, policy, str(Path(run_dir).resolve()) if run_dir else "", logs,
                         "bench", families, timeout, max_steps, max_chunk=max_chunk,
                         world=world) as (group, evaluator):
        wait_ready(evaluator, timeout=max(60.0, timeout), check=lambda: check_children(group))
        done = evaluator.run(specs[:1])
        cpu0 = {name: _cpu_seconds(p.pid) for name, p in group.procs}
        own0 = time.process_time()
        steps0 = evaluator.steps_done
        start = time.perf_counter()
        done += evaluator.run(specs[1:])
        wall = time.perf_counter() - start
        steps = evaluator.steps_done - steps0
        cpu = {name: _cpu_seconds(p.pid) - cpu0[name] for name, p in group.procs}
        cpu["evaluator"] = time.process_time() - own0
    shutil.rmtree(logs, ignore_errors=True)     # kept only when the graph failed
    if results is not None:
        results.extend(done)
    return {
        "episodes": len(specs) - 1, "control_steps": steps, "wall_s": round(wall, 3),
        "control_steps_per_s": round(steps / wall, 1), "target_steps_per_s": 500,
        "cpu_ms_per_step": {k: round(v / max(steps, 1) * 1e3, 3) for k, v in cpu.items()},
    }
