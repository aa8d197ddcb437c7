"""Benchmarks: each area is a function ``(quick: bool, seed: int) -> dict`` printed as JSON.

Speed and memory targets live here, not in timed unit tests. Ratios are measured within one
run (same machine, same moment) so that noise on small shared machines cancels out.
"""

from __future__ import annotations

import importlib
import platform
import time
from typing import Any

#: area name -> "module:function"
AREAS: dict[str, str] = {
    "artifacts": "clawgym_ros.bench.artifacts:bench_artifacts",
    "calibrate": "clawgym_ros.bench.calibrate:bench_calibrate",
    "dataset": "clawgym_ros.bench.dataset:bench_dataset",
    "eval": "clawgym_ros.bench.eval:bench_eval",
    "eval_free": "clawgym_ros.bench.eval_free:bench_eval_free",
    "peers": "clawgym_ros.bench.peers:bench_peers",
    "planning": "clawgym_ros.bench.planning:bench_planning",
    "rl": "clawgym_ros.bench.rl:bench_rl",
    "sim": "clawgym_ros.bench.sim:bench_sim",
    "synth": "clawgym_ros.bench.synth:bench_synth",
    "train": "clawgym_ros.bench.train:bench_train",
}


def run_area(area: str, quick: bool = False, seed: int = 0, **options: Any) -> dict[str, Any]:
    """Run one benchmark area (``options``: the area's own keywords) and add the context
    (machine, time) to its result."""
    module, func = AREAS[area].split(":")
    start = time.perf_counter()
    result = getattr(importlib.import_module(module), func)(quick=quick, seed=seed, **options)
    result.setdefault("area", area)
    result["wall_s"] = round(time.perf_counter() - start, 3)
    result["machine"] = {"cpu_count": _cpu_count(), "python": platform.python_version()}
    return result


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
