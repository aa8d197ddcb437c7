"""Parallel in-process evaluation: episode specs spread over worker processes.

Each worker (``forkserver`` start method where available, else ``spawn``: no inherited MuJoCo
or torch state) keeps one :class:`~clawgym_ros.evaluation.rollout.Runner` for the policy and
rollout options of the episodes it is handed, loaded from a
:class:`~clawgym_ros.evaluation.rollout.PolicySource` (artifacts are immutable, so a source names
one policy for good). Specs are submitted one at a time (dynamic balancing: episodes differ in
length) and results come back as dicts, rebuilt and returned in spec order, so the report is
identical for any worker count. ``workers=1`` runs in this process (no start-up cost).

:class:`WorkerPool` keeps its processes, and each worker its runner, between evaluations: a
long-lived caller (``evaluator_node``, evaluated iteration after iteration by the loop) pays the
process start, imports, scene compile and policy load once, not per evaluation. A worker that
dies (killed, out of memory) fails the evaluation with :class:`WorkerPoolError` and the pool
starts fresh processes for the next one.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from clawgym_ros.errors import ClawgymError
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
from clawgym_ros.evaluation.suites import EpisodeSpec

#: progress(done, total, successes)
Progress = Callable[[int, int, int], None]

#: This worker's runner and the (source, options) it was built for.
_RUNNER: tuple[tuple[PolicySource, RolloutOptions], Runner] | None = None
#: Seconds between a worker's checks that its caller is alive.
CALLER_POLL_S = 0.5
#: Seconds between the caller's checks for cancel / close while episodes run.
POLL_S = 0.1
#: Modules the forkserver imports before forking workers (MuJoCo, the envs, the runner).
FORKSERVER_PRELOAD: tuple[str, ...] = ("clawgym_ros.evaluation.rollout", "clawgym_ros.sim",
                                       "clawgym_ros.sim.mujoco_backend",
                                       "clawgym_ros.evaluation.scripted", "xacro")


class EvaluationCancelledError(ClawgymError):
    """The evaluation was cancelled before every episode ran."""


class WorkerPoolError(ClawgymError):
    """A worker process died during an evaluation."""


def default_workers() -> int:
    """One worker per available core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _init(caller: int) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    threading.Thread(target=_exit_with_caller, args=(caller,), name="caller-watch",
                     daemon=True).start()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def _exit_with_caller(caller: int) -> None:
    """Exit this worker once the process that started the pool is gone. A forkserver worker
    is the server's child, and the server lives as long as its children hold its alive pipe,
    so without this a killed caller (kill -9 of evaluator_node) would leave both behind."""
    while _alive(caller):
        time.sleep(CALLER_POLL_S)
    os._exit(1)


def _runner(source: PolicySource, options: RolloutOptions) -> Runner:
    """This worker's runner for (source, options), rebuilt when they change."""
    global _RUNNER
    key = (source, options)
    if _RUNNER is None or _RUNNER[0] != key:
        if _RUNNER is not None:
            _RUNNER[1].close()
            _RUNNER = None
        _RUNNER = (key, Runner(source.load(), options))
    return _RUNNER[1]


def _calibration() -> dict[str, Any] | None:
    """The caller's active calibration (workers run at it), as a picklable mapping."""
    from clawgym_ros.sim.active_calibration import active

    cal = active()
    return None if cal is None else cal.to_dict()


def _run(source: PolicySource, options: RolloutOptions, spec: EpisodeSpec,
         calibration: dict[str, Any] | None = None) -> tuple[dict[str, Any], tuple[Any, ...]]:
    from clawgym_ros.sim.active_calibration import activate

    activate(calibration)
    # The record travels as its JSON form; its failure states (numpy snapshots, not part of
    # that form) beside it.
    result = _runner(source, options).run(spec)
    return result.to_dict(), result.failure_states


def _result(payload: tuple[dict[str, Any], tuple[Any, ...]]) -> EpisodeResult:
    data, failure_states = payload
    return dataclasses.replace(EpisodeResult.from_dict(data), failure_states=failure_states)


def start_method() -> str:
    """``forkserver`` when the platform has it, else ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


class WorkerPool:
    """Worker processes kept between evaluations (module docstring).

    Not thread-safe: one evaluation at a time. Processes start lazily, at the first
    :meth:`run`; :meth:`close` stops them (also a context manager).
    """

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._executor: cf.ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        """Whether the worker processes are running."""
        return self._executor is not None

    def _start(self) -> cf.ProcessPoolExecutor:
        if self._executor is None:
            ctx = multiprocessing.get_context(start_method())
            if ctx.get_start_method() == "forkserver":
                # The server imports these once; every worker forked from it starts with them
                # (only effective before the server first starts).
                ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
            self._executor = cf.ProcessPoolExecutor(self.workers, mp_context=ctx,
                                                    initializer=_init,
                                                    initargs=(os.getpid(),))
        return self._executor

    def run(self, source: PolicySource, specs: Sequence[EpisodeSpec],
            options: RolloutOptions | None = None, progress: Progress | None = None,
            cancel: threading.Event | None = None) -> list[EpisodeResult]:
        """Run every spec on the workers; results in spec order.

        Raises:
            EvaluationCancelledError: ``cancel`` was set (episodes not yet started are
                dropped; the ones running finish, the pool stays up), or :meth:`close` was
                called from another thread.
            WorkerPoolError: a worker died (the pool restarts for the next evaluation).
            ClawgymError: an episode raised it (e.g. a bad checkpoint).
        """
        options = options or RolloutOptions()
        executor = self._start()
        tracker = _Tracker(len(specs), progress)
        futures: list[cf.Future] = []
        try:
            cal = _calibration()
            futures += [executor.submit(_run, source, options, spec, cal) for spec in specs]
            pending = set(futures)
            while pending:
                done, pending = cf.wait(pending, timeout=POLL_S,
                                        return_when=cf.FIRST_COMPLETED)
                for future in done:
                    tracker.note(_result(future.result()))
                if self._executor is not executor:
                    # close() from another thread (evaluator_node cleaned up mid-goal): the
                    # executor's shutdown may leave queued futures pending for good.
                    raise EvaluationCancelledError(
                        f"cancelled after {len(tracker.results)} of {len(specs)} episodes: "
                        "the worker pool was closed")
                if cancel is not None and cancel.is_set():
                    raise EvaluationCancelledError(
                        f"cancelled after {len(tracker.results)} of {len(specs)} episodes")
        except cf.CancelledError:
            raise EvaluationCancelledError(
                f"cancelled after {len(tracker.results)} of {len(specs)} episodes: the worker "
                "pool was closed") from None
        except BrokenProcessPool as err:
            self.close()
            raise WorkerPoolError(f"an evaluation worker process died after "
                                  f"{len(tracker.results)} of {len(specs)} episodes ({err}); "
                                  "the next evaluation starts fresh workers") from None
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C or SIGTERM (the CLI's Terminated): a signal to the process group stops
            # the workers too, and waiting for their running episodes could then last
            # forever (Python 3.11's pool fails to fail a cancelled future whose worker died:
            # its manager thread dies on InvalidStateError). Stop the workers, do not wait.
            self._abandon()
            raise
        finally:
            if self._executor is executor:
                for future in futures:
                    future.cancel()
                cf.wait(futures)     # the running episodes finish; the pool stays usable
        return tracker.ordered()

    def _abandon(self) -> None:
        """Stop the worker processes without waiting for their episodes or cancelling
        their futures (the pool's manager thread fails the futures as the workers go)."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for process in processes:
            with contextlib.suppress(OSError, ValueError):
                process.terminate()
        for process in processes:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                process.join(timeout=5.0)
        # The workers are gone: the manager thread fails what was left and ends.
        executor.shutdown(wait=True)

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`run` starts new ones)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Tracker:
    """Collected results and the progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total = total
        self.progress = progress
        self.results: list[EpisodeResult] = []

    def note(self, result: EpisodeResult) -> None:
        self.results.append(result)
        if self.progress is not None:
            self.progress(len(self.results), self.total, sum(r.success for r in self.results))

    def ordered(self) -> list[EpisodeResult]:
        return sorted(self.results, key=lambda r: r.index)


def run_specs(source: PolicySource, specs: Sequence[EpisodeSpec], workers: int = 1,
              options: RolloutOptions | None = None, progress: Progress | None = None,
              cancel: threading.Event | None = None,
              pool: WorkerPool | None = None) -> list[EpisodeResult]:
    """Run every spec and return the results in spec order.

    Args:
        source: the policy to load in each worker.
        specs: episodes (any order; results are sorted by ``index``).
        workers: worker processes; 1 = this process; 0 = one per core.
        options: rollout options.
        progress: called after each episode with (done, total, successes).
        cancel: set it to stop early (raises :class:`EvaluationCancelledError`).
        pool: a :class:`WorkerPool` to run on when ``workers`` > 1 (kept open); by default a
            pool of ``workers`` processes is started for this call and stopped after it.
            When Ray is asked for (:func:`clawgym_ros.ray_executor.current`), the episodes
            run as Ray tasks instead, pool or not (same results, in spec order).

    Raises:
        EvaluationCancelledError: ``cancel`` was set; WorkerPoolError: a worker died.
    """
    options = options or RolloutOptions()
    from clawgym_ros.ray_executor import current

    cluster = current()      # Ray when asked for (scope or $CLAWGYM_EXECUTOR), even with a pool
    if cluster is not None and specs:
        return _run_on_ray(cluster, source, specs, options, progress, cancel)
    workers = workers or default_workers()
    if workers > 1 and len(specs) > 1:
        if pool is not None:
            return pool.run(source, specs, options, progress, cancel)
        with WorkerPool(min(workers, len(specs))) as own:
            return own.run(source, specs, options, progress, cancel)
    tracker = _Tracker(len(specs), progress)
    runner = Runner(source.load(), options)
    try:
        for spec in specs:
            if cancel is not None and cancel.is_set():
                raise EvaluationCancelledError(f"cancelled after {len(tracker.results)} of "
                                               f"{len(specs)} episodes")
            tracker.note(runner.run(spec))
    finally:
        runner.close()
    return tracker.ordered()


def _run_on_ray(cluster: Any, source: PolicySource, specs: Sequence[EpisodeSpec],
                options: RolloutOptions, progress: Progress | None,
                cancel: threading.Event | None) -> list[EpisodeResult]:
    """:func:`run_specs` on a :class:`~clawgym_ros.ray_executor.RayCluster`: each episode a
    Ray task running :func:`_run` (each Ray worker keeps its runner, as a pool worker does)."""
    tracker = _Tracker(len(specs), progress)
    is_cancelled = cancel.is_set if cancel is not None else (lambda: False)
    cal = _calibration()
    calls = [(source, options, spec, cal) for spec in specs]
    what = [f"episode {s.index} ({s.task}/{s.template}, seed {s.seed})" for s in specs]
    for payload in cluster.map_ordered(_run, calls, what, is_cancelled):
        tracker.note(_result(payload))
    if len(tracker.results) < len(specs):
        raise EvaluationCancelledError(f"cancelled after {len(tracker.results)} of "
                                       f"{len(specs)} episodes")
    return tracker.ordered()
