"""Free-running ROS evaluation beside lockstep: success rates and the sensor -> command latency.

The same nominal episodes (the scripted baseline ``scripted:pick_place:grasp_height=0.015`` on
pick_place / cube in the bare scene, up to :data:`MAX_STEPS` steps: mixed outcomes, successes
after ~1.9 s, failures are missed grasps, not the time limit) run twice through the ROS graph:

- ``lockstep``: sim_node advanced by the evaluator, each step waiting for its command
  (:func:`~clawgym_ros.ros_io.eval_graph.run_ros_graph`; identical to in-process);
- ``free``: sim_node in real time, policy_node on its 50 Hz timer, the evaluator only watching
  (:func:`~clawgym_ros.ros_io.eval_free.run_free_graph`), as against Gazebo or a robot.

Reported: successes, rates with Wilson 95% intervals, whether the intervals overlap, the
episodes whose outcome differs, and the free graph's sensor -> command latency (median, p95,
max; the first command of each episode apart: the scripted expert plans there) and lost
samples. A small shared machine's load moves the free run (its timers), not lockstep: the
load average is recorded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

POLICY = "scripted:pick_place:grasp_height=0.015"
MAX_STEPS = 250
EPISODES = 40


def bench_eval_free(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Lockstep vs free-running success on the same episodes, and the free latency."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from clawgym_ros.evaluation.stats import wilson
    from clawgym_ros.evaluation.suites import expand, parse_suite
    from clawgym_ros.ros_io.eval_free import run_free_graph
    from clawgym_ros.ros_io.eval_graph import run_ros_graph

    n = 4 if quick else EPISODES
    suite = parse_suite({"name": "bench_eval_free", "seed": seed, "episodes_per_cell": n,
                         "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                         "cells": {"nominal": True}}, "bench")
    specs = expand(suite, seed)
    load_before = os.getloadavg()[0]
    logs = tempfile.mkdtemp(prefix="clawgym_bench_eval_free_")
    start = time.perf_counter()
    lockstep = run_ros_graph(specs, POLICY, "", MAX_STEPS, log_dir=f"{logs}/lockstep")
    lockstep_s = time.perf_counter() - start
    start = time.perf_counter()
    free, info = run_free_graph(specs, POLICY, "", MAX_STEPS, log_dir=f"{logs}/free")
    free_s = time.perf_counter() - start
    shutil.rmtree(logs, ignore_errors=True)     # the node logs are kept only when a run failed
    result: dict[str, Any] = {"policy": POLICY, "world": "scene", "max_steps": MAX_STEPS,
                              "episodes": len(specs)}
    for name, results, wall in (("lockstep", lockstep, lockstep_s), ("free", free, free_s)):
        k = sum(r.success for r in results)
        est = wilson(k, len(results))
        result[name] = {"successes": k, "rate": round(est.value, 3),
                        "ci95": [round(est.low, 3), round(est.high, 3)],
                        "wall_s": round(wall, 1), "simulated_s": round(sum(
                            r.duration_s for r in results), 1)}
    lo = max(result["lockstep"]["ci95"][0], result["free"]["ci95"][0])
    hi = min(result["lockstep"]["ci95"][1], result["free"]["ci95"][1])
    result["intervals_overlap"] = bool(lo <= hi)
    result["outcome_differs"] = [a.index for a, b in zip(lockstep, free, strict=True)
                                 if a.success != b.success]
    result["free"].update(info)
    result["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result
