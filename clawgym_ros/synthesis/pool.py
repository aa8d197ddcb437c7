"""Generation runner: episodes over worker processes, dual sign-off, results in index order.

Each episode is generated, signed off and (optionally) encoded inside a worker; the parent
receives results strictly in episode-index order, whatever the number of workers or the order in
which they finish. Since every episode's seed depends only on the run seed and its index (see
:func:`~clawgym_ros.synthesis.mixture.plan_episodes`), 1 and W workers give identical results.

``generate``, ``signoff`` and ``encode`` must be picklable (module-level functions or instances
of module-level classes): workers are started with the ``forkserver`` (Linux) or ``spawn``
context, never ``fork``, so that no ROS or thread state is copied into them.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.synthesis.signoff import Rejection, reason_codes

Generator = Callable[[EpisodeSpec], EpisodeRecord]
Signoff = Callable[[EpisodeRecord], Sequence[Rejection]]
Encoder = Callable[[EpisodeRecord], Any]
ProgressCallback = Callable[["Progress"], None]
Cancel = threading.Event | Callable[[], bool] | None
_POLL_S = 0.05


@dataclasses.dataclass(frozen=True)
class Progress:
    """Counts after each finished episode (what the Synthesize action's feedback carries)."""

    done: int
    total: int
    accepted: int
    rejected: int
    rejected_by_reason: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EpisodeResult:
    """One finished episode.

    Attributes:
        spec: what was asked.
        rejections: empty when accepted.
        summary: ``record.summary()`` (or the spec's fields on a generator error).
        record: the record when ``keep_records`` (None after a generator error).
        payload: ``encode(record)`` for accepted episodes when an encoder was given.
    """

    spec: EpisodeSpec
    rejections: list[Rejection]
    summary: dict[str, Any]
    record: EpisodeRecord | None = None
    payload: Any = None

    @property
    def accepted(self) -> bool:
        return not self.rejections


@dataclasses.dataclass
class GenerationSummary:
    """Totals of a generation run (wall time is the only non-deterministic field)."""

    planned: int
    done: int = 0
    accepted: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = dataclasses.field(default_factory=dict)
    cancelled: bool = False
    workers: int = 1
    wall_s: float = 0.0

    @property
    def yield_(self) -> float:
        """accepted / done (0 when nothing was done)."""
        return self.accepted / self.done if self.done else 0.0

    def add(self, result: EpisodeResult) -> None:
        """Count one result (each reason once per episode)."""
        self.done += 1
        if result.accepted:
            self.accepted += 1
            return
        self.rejected += 1
        for code in reason_codes(result.rejections):
            self.rejected_by_reason[code] = self.rejected_by_reason.get(code, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; reasons in the stable order of constants.REJECTION_REASONS."""
        order = {c: i for i, c in enumerate(C.REJECTION_REASONS)}
        reasons = dict(sorted(self.rejected_by_reason.items(),
                              key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
        return {"planned": self.planned, "done": self.done, "accepted": self.accepted,
                "rejected": self.rejected, "rejected_by_reason": reasons,
                "yield": round(self.yield_, 6), "cancelled": self.cancelled,
                "workers": self.workers, "wall_s": round(self.wall_s, 3)}


def default_workers() -> int:
    """One worker per core available to this process."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def run_episode(generate: Generator, signoff: Signoff, encode: Encoder | None,
                keep_records: bool, spec: EpisodeSpec) -> EpisodeResult:
    """Generate, sign off and encode one episode (runs in a worker, or inline for 1 worker).

    A generator exception becomes a ``generator_error`` rejection (the run goes on); a sign-off
    or encoder exception propagates (it is a configuration or code error, not a bad episode).
    """
    # the simulator runs at the spec's calibration (part of the dataset's id), or at none
    from clawgym_ros.sim.active_calibration import OPTION_KEY, activate

    activate(spec.options.get(OPTION_KEY))
    try:
        record = generate(spec)
        if not isinstance(record, EpisodeRecord):
            raise TypeError(f"generator returned {type(record).__name__}, not EpisodeRecord")
        record.validate()
    except Exception as err:  # noqa: BLE001 (an expert bug must not stop the whole run)
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        return EpisodeResult(spec, [Rejection(C.REJECT_GENERATOR_ERROR, last)],
                             summary=spec.to_dict())
    rejections = list(signoff(record))
    payload = encode(record) if encode is not None and not rejections else None
    return EpisodeResult(spec, rejections, record.summary(),
                         record if keep_records else None, payload)


def iter_generation(
    specs: Sequence[EpisodeSpec],
    generate: Generator,
    signoff: Signoff,
    *,
    workers: int | None = None,
    encode: Encoder | None = None,
    keep_records: bool = True,
    cancel: Cancel = None,
    start_method: str | None = None,
) -> Iterator[EpisodeResult]:
    """Yield :class:`EpisodeResult` in ``specs`` order, computed by ``workers`` processes.

    Args:
        specs: the plan (normally from ``plan_episodes``).
        generate, signoff, encode: picklable callables (see module docstring).
        workers: process count; None or 0 = one per core; 1 = inline in this process.
            When Ray is asked for (:func:`clawgym_ros.ray_executor.current`: an
            ``executor_scope("ray")`` or ``$CLAWGYM_EXECUTOR=ray``), the episodes run as Ray
            tasks instead (same results, same order).
        keep_records: return records (False saves the transfer when only payloads are needed).
        cancel: an Event or a callable, checked before each episode is started and before
            each result is handed out; once set, the iterator stops (in-flight work is
            discarded), so the results are always a prefix of the plan.
        start_method: ``forkserver`` (default where available) or ``spawn``.

    Raises:
        ClawgymError: ``start_method`` is ``fork`` or unknown.
        Exception: whatever sign-off or the encoder raised.
    """
    is_cancelled = _cancel_fn(cancel)
    from clawgym_ros.ray_executor import current

    cluster = current()
    if cluster is not None:   # Ray asked for: Ray tasks, same order and results
        yield from cluster.map_ordered(
            run_episode, [(generate, signoff, encode, keep_records, spec) for spec in specs],
            [f"episode {spec.index} (seed {spec.seed})" for spec in specs], is_cancelled)
        return
    workers = min(workers or default_workers(), max(1, len(specs)))
    if workers == 1:
        for spec in specs:
            if is_cancelled():
                return
            yield run_episode(generate, signoff, encode, keep_records, spec)
        return
    ctx = _context(start_method)
    window = 2 * workers
    pool = ctx.Pool(processes=workers, initializer=_init_worker)
    try:
        pending: dict[int, Any] = {}
        submitted = 0
        for emitted in range(len(specs)):
            if is_cancelled():
                return
            while submitted < len(specs) and len(pending) < window and not is_cancelled():
                pending[submitted] = pool.apply_async(
                    run_episode, (generate, signoff, encode, keep_records, specs[submitted]))
                submitted += 1
            if emitted not in pending:
                return  # cancelled before this episode was started
            handle = pending[emitted]
            while not handle.ready():
                if is_cancelled():
                    return
                handle.wait(_POLL_S)
            del pending[emitted]
            yield handle.get()
    finally:
        # No Pool.terminate(): it can hang joining the pool's handler threads (seen once with
        # forkserver workers). At most `window` episodes are queued, so letting them finish
        # (their results are discarded) bounds the wait and always ends.
        pool.close()
        pool.join()


def run_generation(
    specs: Sequence[EpisodeSpec],
    generate: Generator,
    signoff: Signoff,
    *,
    workers: int | None = None,
    encode: Encoder | None = None,
    keep_records: bool = True,
    on_result: Callable[[EpisodeResult], None] | None = None,
    progress: ProgressCallback | None = None,
    cancel: Cancel = None,
    start_method: str | None = None,
) -> GenerationSummary:
    """Run a whole plan; hand each result (in index order) to ``on_result``.

    Args:
        on_result: consumer of results (e.g. the dataset writer); called in index order.
        progress: called after each result with :class:`Progress` (done/total/accepted/
            rejected), in the calling thread.
        Others: as in :func:`iter_generation`.

    Returns:
        The totals, with ``cancelled`` True when the run stopped early.
    """
    workers = min(workers or default_workers(), max(1, len(specs)))
    summary = GenerationSummary(planned=len(specs), workers=workers)
    is_cancelled = _cancel_fn(cancel)
    start = time.perf_counter()
    for result in iter_generation(specs, generate, signoff, workers=workers, encode=encode,
                                  keep_records=keep_records, cancel=cancel,
                                  start_method=start_method):
        summary.add(result)
        if on_result is not None:
            on_result(result)
        if progress is not None:
            progress(Progress(summary.done, summary.planned, summary.accepted,
                              summary.rejected, dict(summary.rejected_by_reason)))
    summary.cancelled = summary.done < summary.planned and is_cancelled()
    summary.wall_s = time.perf_counter() - start
    return summary


def _cancel_fn(cancel: Cancel) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if isinstance(cancel, threading.Event):
        return cancel.is_set
    if callable(cancel):
        return lambda: bool(cancel())
    raise ClawgymError(f"cancel must be a threading.Event or a callable, not {cancel!r}")


def _context(start_method: str | None) -> multiprocessing.context.BaseContext:
    available = multiprocessing.get_all_start_methods()
    method = start_method or ("forkserver" if "forkserver" in available else "spawn")
    if method not in ("forkserver", "spawn") or method not in available:
        raise ClawgymError(f"start_method={method!r} is invalid; allowed: "
                           + ", ".join(m for m in ("forkserver", "spawn") if m in available))
    return multiprocessing.get_context(method)


def _init_worker() -> None:
    # Workers share the cores with each other: keep numerical libraries single-threaded.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
