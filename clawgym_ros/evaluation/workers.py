"""Parallel in-process evaluation: episode specs spread over worker processes.

Each worker (``forkserver`` start method where available, else ``spawn``: no inherited MuJoCo
or torch state) loads its own policy from a :class:`~clawgym_ros.evaluation.rollout.PolicySource`
and keeps one :class:`~clawgym_ros.evaluation.rollout.Runner`. Specs are handed out one at a
time (dynamic balancing: episodes differ in length) and results come back as dicts, rebuilt and
returned in spec order, so the report is identical for any worker count. ``workers=1`` runs in
this process (no start-up cost).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from clawgym_ros.errors import ClawgymError
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
from clawgym_ros.evaluation.suites import EpisodeSpec

#: progress(done, total, successes)
Progress = Callable[[int, int, int], None]

_RUNNER: Runner | None = None
#: Modules the forkserver imports before forking workers (MuJoCo, the envs, the runner).
FORKSERVER_PRELOAD: tuple[str, ...] = ("clawgym_ros.evaluation.rollout", "clawgym_ros.sim",
                                       "clawgym_ros.sim.mujoco_backend",
                                       "clawgym_ros.evaluation.scripted")


class EvaluationCancelledError(ClawgymError):
    """The evaluation was cancelled before every episode ran."""


def default_workers() -> int:
    """One worker per available core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _init(source: PolicySource, options: RolloutOptions) -> None:
    global _RUNNER
    os.environ.setdefault("MUJOCO_GL", "egl")
    _RUNNER = Runner(source.load(), options)


def _run(spec: EpisodeSpec) -> dict[str, Any]:
    assert _RUNNER is not None
    return _RUNNER.run(spec).to_dict()


def start_method() -> str:
    """``forkserver`` when the platform has it, else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def run_specs(source: PolicySource, specs: Sequence[EpisodeSpec], workers: int = 1,
              options: RolloutOptions | None = None, progress: Progress | None = None,
              cancel: threading.Event | None = None) -> list[EpisodeResult]:
    """Run every spec and return the results in spec order.

    Args:
        source: the policy to load in each worker.
        specs: episodes (any order; results are sorted by ``index``).
        workers: worker processes; 1 = this process; 0 = one per core.
        options: rollout options.
        progress: called after each episode with (done, total, successes).
        cancel: set it to stop early (raises :class:`EvaluationCancelledError`).

    Raises:
        EvaluationCancelledError: ``cancel`` was set.
    """
    options = options or RolloutOptions()
    workers = workers or default_workers()
    total = len(specs)
    results: list[EpisodeResult] = []

    def note(result: EpisodeResult) -> None:
        results.append(result)
        if progress is not None:
            progress(len(results), total, sum(r.success for r in results))

    if workers <= 1 or total <= 1:
        runner = Runner(source.load(), options)
        try:
            for spec in specs:
                if cancel is not None and cancel.is_set():
                    raise EvaluationCancelledError(f"cancelled after {len(results)} of {total} "
                                              "episodes")
                note(runner.run(spec))
        finally:
            runner.close()
    else:
        ctx = multiprocessing.get_context(start_method())
        if ctx.get_start_method() == "forkserver":
            # The server imports these once; every worker forked from it starts with them
            # (only effective before the server first starts, i.e. the first pool).
            ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
        pool = ctx.Pool(min(workers, total), initializer=_init, initargs=(source, options))
        try:
            for data in pool.imap_unordered(_run, specs, chunksize=1):
                note(EpisodeResult.from_dict(data))
                if cancel is not None and cancel.is_set():
                    raise EvaluationCancelledError(f"cancelled after {len(results)} of {total} "
                                              "episodes")
            pool.close()
        finally:
            pool.terminate()
            pool.join()
    return sorted(results, key=lambda r: r.index)
