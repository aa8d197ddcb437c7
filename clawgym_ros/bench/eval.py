"""Evaluation speed: in-process overhead, worker scaling, ROS lockstep control steps/s.

Three measurements on the same episodes (nominal ``pick_place`` / cube specs of the scripted
baseline ``scripted:pick_place:grasp_height=0.015``, ``scene`` world, 120 steps at most):

- ``inprocess``: episodes/s of :class:`~clawgym_ros.evaluation.rollout.Runner` against the
  pure physics + policy time of the *same* episodes. Policy time is measured inside the runner
  (``Runner.timing.policy_s``); physics time by replaying each episode's recorded actions on a
  bare :class:`~clawgym_ros.sim.mujoco_backend.MujocoBackend` (same seed, ``backend.step``
  per action: ``mj_step`` x substeps plus the control write). Ratio = pure / wall (1.0 = no
  overhead; wall = ``Runner.timing.wall_s``, reset to last step). The timed run and the
  recording run are separate runs of each spec (episodes are deterministic), alternating per
  episode, so copying actions does not count against the runner. ``cpu_ratio``: the same
  quotient in process CPU time (the runner's CPU from reset to last step, ``Runner.timing.
  cpu_s``, against the replay's CPU plus the policy's CPU in the recording run), which
  other processes on a shared machine move less than wall time.
- ``scaling``: wall time of :func:`~clawgym_ros.evaluation.workers.run_specs` on the same
  specs with 1 worker (this process) and with 2 workers of a kept
  :class:`~clawgym_ros.evaluation.workers.WorkerPool` (started and warmed before the timing:
  the throughput evaluator_node gets from its second goal on; ``kept_pool_start_s`` is the
  one-off start). ``fresh_pool``: 2 workers of a pool started and stopped inside the timed
  call (a one-shot ``clawgym eval``, which pays process start, scene compile and policy load
  per worker). Measured ``repeats`` times in rotating order; speed-up = the median of the
  repeats' t1 / t2.
- ``ros``: control steps/s of the ROS lockstep path (sim_node + policy_node + the evaluator's
  driver in this process) after a first warm-up episode, as ``clawgym eval --mode ros`` runs
  it: the scripted expert acts open loop once planned, so policy_node sends its actions as
  chunks (``max_chunk`` 50) and sim_node runs them without a round trip per step; also each
  process's CPU ms per step. ``ros_per_step``: the same episodes with ``max_chunk`` 1 (a
  command per control step, the path of a policy that reads every observation).
- ``ros_bound``: what a lockstep control step cannot beat on this machine, measured right
  before each of ``ros`` and ``ros_per_step`` (keys ``ros``, ``ros_per_step``): the physics
  of a control step (one of the episodes' actions replayed on the bare backend) plus, with a
  command per step, a bare topic round trip between two processes (same message types, QoS
  and executor as sim_node and policy_node, nothing else;
  :mod:`clawgym_ros.ros_io.roundtrip`); chunked, the physics alone. ``ros`` /
  ``ros_per_step`` carry ``bound_steps_per_s`` and ``ratio_to_bound`` beside the targets
  (3,000 chunked, 2,000 per step).
- ``torch``: the same three paths for a trained torch checkpoint (``--checkpoint ID
  --run-dir DIR``, else one trained here: :data:`TORCH_DEMOS` pick_place demonstrations
  synthesized and :data:`TORCH_STEPS` steps of behaviour cloning with the default recipe,
  action chunks of 20, seeded by ``seed``) on nominal pick_place / cube episodes in the task
  world (the checkpoint observes ``place_goal``): in-process control steps/s
  (``Runner.timing``), ROS lockstep chunked (policy_node sends the policy's chunk as one
  trajectory) and per step (``max_chunk`` 1, torch called every step, which pops its queue),
  and whether the ROS records equal the in-process ones.

On a small machine shared with other jobs all three depend on the load (``load_avg`` is
recorded); ratios are taken within one run.
"""

from __future__ import annotations

import os
import time
from typing import Any

POLICY = "scripted:pick_place:grasp_height=0.015"
MAX_STEPS = 120
#: The checkpoint trained when none is given: demonstrations (quick: 2) and training steps
#: (quick: 40). Enough for a policy that moves like the expert's data; speed, not success,
#: is measured.
TORCH_DEMOS = 8
TORCH_STEPS = 300
#: Lockstep control steps/s wanted (issue 24): chunked, and with a command per step.
TARGET_CHUNKED = 3000
TARGET_PER_STEP = 2000


def _specs(n: int, seed: int) -> list[Any]:
    from clawgym_ros.evaluation.suites import expand, parse_suite

    suite = parse_suite({"name": "bench_eval", "seed": seed, "episodes_per_cell": n,
                         "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                         "cells": {"nominal": True}}, "bench")
    return expand(suite)


class _CpuTimed:
    """A policy adding up the process CPU time of its ``act`` calls (the recording run's
    policy; the timed run's policy is left bare, timed by the runner's clock only)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.cpu_s = 0.0

    def reset(self) -> None:
        self.policy.reset()

    def act(self, obs: Any) -> Any:
        start = time.process_time()
        action = self.policy.act(obs)
        self.cpu_s += time.process_time() - start
        return action

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


def _inprocess(specs: list[Any]) -> dict[str, Any]:
    import numpy as np

    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
    from clawgym_ros.sim.mujoco_backend import MujocoBackend

    options = RolloutOptions(world="scene", max_steps=MAX_STEPS)
    source = PolicySource.parse(POLICY)
    runner = Runner(source.load(), options)
    runner.run(specs[0])                                   # env + policy warm-up
    recorded = _CpuTimed(source.load())
    recorder = Runner(recorded, options, record_actions=True)
    backend = MujocoBackend()
    wall = policy = physics = cpu = physics_cpu = 0.0
    steps = replayed = 0
    load_before = os.getloadavg()[0]
    for spec in specs:
        # Timed run, then the same episode recorded and replayed on the bare backend: the
        # two alternate, so load from other processes hits both alike.
        runner.run(spec)
        wall += runner.timing.wall_s
        cpu += runner.timing.cpu_s
        policy += runner.timing.policy_s
        steps += runner.timing.steps
        recorder.run(spec)
        backend.reset(spec.seed, rng=np.random.default_rng(spec.seed))
        t0, c0 = time.perf_counter(), time.process_time()
        for action in recorder.actions:
            backend.step(action)
        physics += time.perf_counter() - t0
        physics_cpu += time.process_time() - c0
        replayed += len(recorder.actions)
    runner.close()
    recorder.close()
    backend.close()
    pure = physics + policy
    # The same quotient in process CPU time (less sensitive to other processes on a shared
    # machine): the runner's CPU from reset to last step against the replay's CPU plus the
    # policy's CPU in the recording run (the same episodes, the same actions).
    pure_cpu = physics_cpu + recorded.cpu_s
    return {
        "episodes": len(specs), "control_steps": steps, "replayed_steps": replayed,
        "wall_s": round(wall, 3), "episodes_per_s": round(len(specs) / wall, 2),
        "control_steps_per_s": round(steps / wall, 1),
        "physics_s": round(physics, 3), "policy_s": round(policy, 3),
        "pure_physics_policy_s": round(pure, 3),
        "pure_episodes_per_s": round(len(specs) / pure, 2),
        "ratio": round(pure / wall, 3), "target_ratio": 0.92,
        "cpu_ratio": round(pure_cpu / cpu, 3),
        "cpu_us_per_step": {"runner": round(cpu / steps * 1e6, 1),
                            "physics": round(physics_cpu / steps * 1e6, 1),
                            "policy": round(recorded.cpu_s / steps * 1e6, 1)},
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def _scaling(specs: list[Any], repeats: int = 1) -> dict[str, Any]:
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.workers import WorkerPool, run_specs

    options = RolloutOptions(world="scene", max_steps=MAX_STEPS)
    source = PolicySource.parse(POLICY)
    kept = WorkerPool(2)
    start = time.perf_counter()
    run_specs(source, specs[:4], 2, options, pool=kept)    # forkserver, workers, runners up
    kept_start = time.perf_counter() - start
    # Per repeat: 1 worker; 2 workers of the kept pool (evaluator_node from its second goal
    # on); 2 workers of a pool started for the call (a one-shot ``clawgym eval``). Order
    # rotates so load from other processes hits all three alike.
    runs: dict[str, Any] = {"one": (1, None), "kept": (2, kept), "fresh": (2, None)}
    rows = []
    identical = True
    try:
        for r in range(repeats):
            times, outcomes = {}, {}
            names = list(runs)
            for name in names[r % 3:] + names[:r % 3]:
                workers, pool = runs[name]
                start = time.perf_counter()
                results = run_specs(source, specs, workers, options, pool=pool)
                times[name] = time.perf_counter() - start
                outcomes[name] = [res.to_dict() for res in results]
            identical = identical and outcomes["one"] == outcomes["kept"] == outcomes["fresh"]
            rows.append(times)
    finally:
        kept.close()

    def median(key: str) -> tuple[float, float, list[float]]:
        ratios = [row["one"] / row[key] for row in rows]
        mid = sorted(range(len(rows)), key=lambda i: ratios[i])[len(rows) // 2]
        return rows[mid]["one"], rows[mid][key], [round(x, 3) for x in ratios]

    t1, t2, speedups = median("kept")
    f1, f2, fresh = median("fresh")
    return {
        "episodes": len(specs), "repeats": repeats, "wall_1_worker_s": round(t1, 3),
        "wall_2_workers_s": round(t2, 3), "speedup": round(t1 / t2, 3),
        "speedups": speedups, "target_speedup": 1.7,
        "kept_pool_start_s": round(kept_start, 3),
        "fresh_pool": {"wall_1_worker_s": round(f1, 3), "wall_2_workers_s": round(f2, 3),
                       "speedup": round(f1 / f2, 3), "speedups": fresh},
        "identical_results": identical,
    }


def _physics_probe(spec: Any) -> Any:
    """A function timing the physics of ``spec``'s episode (its actions recorded once, replayed
    on a bare backend from the same seed): microseconds per control step."""
    import numpy as np

    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
    from clawgym_ros.sim.mujoco_backend import MujocoBackend

    recorder = Runner(PolicySource.parse(POLICY).load(),
                      RolloutOptions(world="scene", max_steps=MAX_STEPS), record_actions=True)
    recorder.run(spec)
    actions = list(recorder.actions)
    recorder.close()

    def probe(repeats: int) -> float:
        backend = MujocoBackend()
        total = 0.0
        for _ in range(repeats):
            backend.reset(spec.seed, rng=np.random.default_rng(spec.seed))
            start = time.perf_counter()
            for action in actions:
                backend.step(action)
            total += time.perf_counter() - start
        backend.close()
        return total / (repeats * len(actions)) * 1e6

    return probe


def _ros_bound(probe: Any, quick: bool) -> dict[str, Any]:
    """The bound of a lockstep control step, measured right before the lockstep run it bounds
    (load moves both alike): the physics of a control step (``probe``: an episode's actions
    replayed on the bare backend) plus, per step, a bare topic round trip to another process
    (sim_node's observation out, policy_node's command back: the two hops of ``max_chunk``
    1); chunked, the physics alone (sim_node runs a chunk's steps without a hop). Also the
    bare ``sim/step``-type service round trip (the evaluator's, once per run)."""
    try:
        from clawgym_ros.ros_io.roundtrip import measure_round_trips
    except ImportError as err:
        return {"skipped": f"rclpy not importable: {err}"}
    trips = measure_round_trips(300 if quick else 2000, warmup=50 if quick else 200)
    physics_us = probe(1 if quick else 5)
    return {**trips, "physics_us_per_step": round(physics_us, 1),
            "per_step_steps_per_s": round(1e6 / (physics_us + trips["topic"]["median_us"]), 1),
            "chunked_steps_per_s": round(1e6 / physics_us, 1)}


def _against(ros: dict[str, Any], bound: dict[str, Any], key: str, target: int
             ) -> dict[str, Any]:
    """``ros`` with the issue's target and its ratio to ``bound[key]`` (same run)."""
    out = {**ros, "target_steps_per_s": target}
    if "control_steps_per_s" in ros and key in bound:
        out["bound_steps_per_s"] = bound[key]
        out["ratio_to_bound"] = round(ros["control_steps_per_s"] / bound[key], 3)
    return out


def _ros(specs: list[Any], max_chunk: int | None = None, policy: str = POLICY,
         run_dir: str = "", world: str = "scene", results: list | None = None
         ) -> dict[str, Any]:
    try:
        from clawgym_ros.ros_io.eval_graph import measure_lockstep
    except ImportError as err:
        return {"skipped": f"rclpy not importable: {err}"}
    return measure_lockstep(specs, policy, MAX_STEPS, max_chunk=max_chunk, run_dir=run_dir,
                            world=world, results=results)


def _train_checkpoint(out: str, quick: bool, seed: int) -> tuple[str, dict[str, Any]]:
    """Synthesize pick_place demonstrations and train a checkpoint on them in ``out``:
    (checkpoint id, what was done)."""
    demos, steps = (2, 40) if quick else (TORCH_DEMOS, TORCH_STEPS)
    return train_pick_place_checkpoint(out, demos, steps, seed)


def train_pick_place_checkpoint(out: str, demos: int, steps: int, seed: int,
                                tensorboard: bool = True) -> tuple[str, dict[str, Any]]:
    """Synthesize ``demos`` pick_place demonstrations in ``out`` and train the default BC
    recipe on them for ``steps`` steps: (checkpoint id, what was done)."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize
    from clawgym_ros.training.bc import train
    from clawgym_ros.training.config import TrainConfig
    from clawgym_ros.training.data import open_training_table

    start = time.perf_counter()
    dataset, summary = synthesize(SynthRequest.from_args(out, demos, seed, task="pick_place",
                                                         workers=1))
    store = ArtifactStore(out)
    trained = train(open_training_table(store, [dataset.id]),
                    TrainConfig(steps=steps, seed=seed), store, dataset_ids=[dataset.id],
                    tensorboard=tensorboard)
    return trained.checkpoint_id, {"demonstrations": summary.accepted, "train_steps": steps,
                                   "dataset": dataset.id, "prepare_s":
                                   round(time.perf_counter() - start, 1)}


def _torch(specs: list[Any], quick: bool, seed: int, checkpoint: str,
           run_dir: str) -> dict[str, Any]:
    """In-process and ROS lockstep (chunked, per step) control steps/s of a torch checkpoint
    on ``specs`` (task world), and whether the records agree."""
    import tempfile

    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner

    with tempfile.TemporaryDirectory(prefix="clawgym_bench_torch_") as tmp:
        made: dict[str, Any] = {}
        if checkpoint:
            from clawgym_ros.artifacts import ArtifactStore

            checkpoint = ArtifactStore(run_dir).resolve(checkpoint).id
        else:
            run_dir = tmp
            checkpoint, made = _train_checkpoint(tmp, quick, seed)
        source = PolicySource.parse(checkpoint, run_dir)
        options = RolloutOptions(world="task", max_steps=MAX_STEPS, failure_states=False)
        runner = Runner(source.load(), options)
        local = [runner.run(specs[0]).to_dict()]           # warm-up: env, torch's first call
        wall = 0.0
        steps = 0
        for spec in specs[1:]:
            local.append(runner.run(spec).to_dict())
            wall += runner.timing.wall_s
            steps += runner.timing.steps
        runner.close()
        result: dict[str, Any] = {
            "checkpoint": checkpoint, "trained_here": made or None, "world": "task",
            "inprocess": {"episodes": len(specs) - 1, "control_steps": steps,
                          "wall_s": round(wall, 3),
                          "control_steps_per_s": round(steps / wall, 1)}}
        identical = True
        for key, chunk in (("ros", None), ("ros_per_step", 1)):
            records: list[Any] = []
            result[key] = _ros(specs, max_chunk=chunk, policy=checkpoint, run_dir=run_dir,
                               world="task", results=records)
            identical = identical and [r.to_dict() for r in records] == local
        result["identical_records"] = identical
    return result


def bench_eval(quick: bool = False, seed: int = 0, checkpoint: str = "",
               run_dir: str = "") -> dict[str, Any]:
    """In-process ratio to pure physics + policy, 1 -> 2 worker speed-up, ROS steps/s (the
    scripted plan, and a trained torch checkpoint: ``checkpoint`` in ``run_dir``, else one
    trained here)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    load_before = os.getloadavg()[0]
    result: dict[str, Any] = {
        "policy": POLICY, "world": "scene", "max_steps": MAX_STEPS,
        "inprocess": _inprocess(_specs(4 if quick else 30, seed)),
        "scaling": _scaling(_specs(4 if quick else 48, seed), 1 if quick else 7),
    }
    ros_specs = _specs(3 if quick else 12, seed)
    probe = _physics_probe(ros_specs[1])
    bounds: dict[str, Any] = {}
    for key, chunk, which, target in (("ros", None, "chunked_steps_per_s", TARGET_CHUNKED),
                                      ("ros_per_step", 1, "per_step_steps_per_s",
                                       TARGET_PER_STEP)):
        bounds[key] = _ros_bound(probe, quick)
        result[key] = _against(_ros(ros_specs, max_chunk=chunk), bounds[key], which, target)
    result["ros_bound"] = bounds
    result["torch"] = _torch(_specs(3 if quick else 12, seed), quick, seed, checkpoint, run_dir)
    result["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result
