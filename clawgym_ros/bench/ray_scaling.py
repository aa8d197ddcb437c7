"""`clawgym bench synth|eval --executor ray [--ray-address A]`: what each added Ray worker buys.

The same episodes run on Ray with one task in flight and with one per CPU of the cluster (a
local instance of :data:`LOCAL_CPUS` CPUs started here, or the cluster at ``--ray-address``),
after a warm-up pass that starts the worker processes (imports, world build; evaluation
runners). Beside them, the local process pool with 1 (this process, warmed) and with that
many workers on the same episodes; the pool starts its worker processes inside the timed call,
as a one-shot ``clawgym synth`` / ``eval`` does, while the Ray workers are warm, as a
long-lived cluster's are: ``ray_over_pool_wall`` is that wall-time ratio.

- ``synth``: pick_place demonstrations (expert + dual sign-off + MCAP encoding), as
  ``clawgym synth`` runs them (:func:`~clawgym_ros.synthesis.pool.iter_generation`).
- ``eval``: the scripted baseline on nominal pick_place / cube episodes (bare scene, 120 steps
  at most: the ``clawgym bench eval`` episodes) through
  :func:`~clawgym_ros.evaluation.workers.run_specs`.

Per configuration: wall seconds, speed-up over one worker, parallel efficiency (speed-up /
workers) and the efficiency of the added workers ((speed-up - 1) / (workers - 1)); and whether
every configuration produced the same results.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

#: CPUs of the local Ray instance (without --ray-address).
LOCAL_CPUS = 2


def _synth_runner(quick: bool, seed: int) -> tuple[Callable[[Any], list], int]:
    from clawgym_ros import constants as C
    from clawgym_ros.dataset.writer import encode_for_dataset
    from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
    from clawgym_ros.synthesis.pool import iter_generation
    from clawgym_ros.tasks.registry import generate_any, get_task

    task = get_task(C.TASK_PICK_PLACE)
    signoff = task.signoff()
    n = 6 if quick else 24

    def run(workers: Any, warm: bool = False) -> list:
        specs = plan_episodes(MixtureSpec.single(task.name), n, seed + (1000 if warm else 0))
        results = iter_generation(specs, generate_any, signoff, workers=workers,
                                  encode=encode_for_dataset, keep_records=False)
        return [(r.spec.index, r.accepted, r.summary.get("steps")) for r in results]

    return run, n


def _eval_runner(quick: bool, seed: int) -> tuple[Callable[[Any], list], int]:
    from clawgym_ros.bench.eval import MAX_STEPS, POLICY, _specs
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.workers import run_specs

    n = 8 if quick else 32
    options = RolloutOptions(world="scene", max_steps=MAX_STEPS)
    source = PolicySource.parse(POLICY)

    def run(workers: Any, warm: bool = False) -> list:
        specs = _specs(n, seed + (1000 if warm else 0))
        return [r.to_dict() for r in run_specs(source, specs, workers, options)]

    return run, n


def _row(t1: float, tk: float, k: int) -> dict[str, Any]:
    speedup = t1 / tk
    return {"wall_1_worker_s": round(t1, 3), f"wall_{k}_workers_s": round(tk, 3),
            "speedup": round(speedup, 3), "parallel_efficiency": round(speedup / k, 3),
            "added_worker_efficiency": round((speedup - 1) / (k - 1), 3) if k > 1 else None}


def bench_ray(area: str, quick: bool = False, seed: int = 0, address: str | None = None
              ) -> dict[str, Any]:
    """Ray against the local pool on ``area``'s episodes (module docstring).

    Raises:
        ConfigError: ``area`` is not synth or eval; a bad address or no ray package.
    """
    from clawgym_ros.bench import _cpu_count
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.ray_executor import executor_scope

    begin = time.perf_counter()
    if area not in ("synth", "eval"):
        raise ConfigError("--executor", "ray", "local for every area but synth and eval")
    run, n = (_synth_runner if area == "synth" else _eval_runner)(quick, seed)
    out: dict[str, Any] = {"area": area, "executor": "ray", "episodes": n,
                           "address": address or f"local instance, {LOCAL_CPUS} CPUs"}
    results = {}
    with executor_scope("ray", address, LOCAL_CPUS) as cluster:
        k = cluster.cpus
        start = time.perf_counter()
        run(None, warm=True)                 # worker processes, imports, worlds
        out["ray_warm_up_s"] = round(time.perf_counter() - start, 3)
        times = {}
        for label, in_flight in (("1", 1), (str(k), None)):
            cluster.max_in_flight = in_flight
            start = time.perf_counter()
            results[f"ray_{label}"] = run(None)
            times[label] = time.perf_counter() - start
        cluster.max_in_flight = None
    out["ray"] = {"workers": k, **_row(times["1"], times[str(k)], k)}
    local = {}
    with executor_scope("local"):
        run(1, warm=True)                    # this process's worlds (the 1-worker pool)
        for workers in (1, k):
            start = time.perf_counter()
            results[f"pool_{workers}"] = run(workers)
            local[workers] = time.perf_counter() - start
    out["local_pool"] = {"workers": k, **_row(local[1], local[k], k)}
    out["ray_over_pool_wall"] = {"1": round(times["1"] / local[1], 3),
                                 str(k): round(times[str(k)] / local[k], 3)}
    first = next(iter(results.values()))
    out["identical_results"] = all(r == first for r in results.values())
    out["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    out["wall_s"] = round(time.perf_counter() - begin, 3)
    out["machine"] = {"cpu_count": _cpu_count(), "python": platform.python_version()}
    return out
