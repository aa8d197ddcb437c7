"""Dataset synthesis with the task experts: what ``clawgym synth`` and synthesis_node run.

Plans the episodes (mixture, count, run seed), generates them with the experts in worker
processes, signs every episode off with the tasks' dual sign-off and commits the accepted ones
as a dataset artifact (MCAP episodes + metadata). Pure: no rclpy.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore
from clawgym_ros.config import check_int
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.failure_states import (
    FailureState,
    FailureStateError,
    decode,
    metas_of,
)
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import MixtureSpec, load_mixture, plan_episodes
from clawgym_ros.synthesis.pool import GenerationSummary, ProgressCallback
from clawgym_ros.tasks.recovery import check_restorable, recovery_specs
from clawgym_ros.tasks.registry import generate_any, get_task, signoff_for


@dataclasses.dataclass(frozen=True)
class SynthRequest:
    """One synthesis run (CLI arguments / a Synthesize goal)."""

    out: str
    episodes: int
    seed: int
    task: str = ""
    mixture: MixtureSpec | None = None
    workers: int = 0                         # 0 = one per core
    images: bool = False
    #: extra generator options for every episode (e.g. ``{"planning": "ompl"}``); part of
    #: the dataset id
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("episodes", self.episodes, 1, 10_000_000)
        check_int("seed", self.seed, 0, 2**63 - 1)
        check_int("workers", self.workers, 0, 1024)
        if self.mixture is None:
            if not self.task:
                raise ConfigError("task", self.task, "a task name or a mixture")
            object.__setattr__(self, "mixture", MixtureSpec.single(self.task))

    @classmethod
    def from_args(cls, out: str, episodes: int, seed: int, task: str = "",
                  mixture_path: str | Path | None = None, workers: int = 0,
                  images: bool = False) -> SynthRequest:
        """Build from CLI-like arguments (a mixture file overrides ``task``)."""
        mixture = load_mixture(mixture_path) if mixture_path else None
        return cls(out=out, episodes=episodes, seed=seed, task=task, mixture=mixture,
                   workers=workers, images=images)


def synthesize(request: SynthRequest, progress: ProgressCallback | None = None,
               cancel: threading.Event | Callable[[], bool] | None = None,
               start_method: str | None = None
               ) -> tuple[Artifact | None, GenerationSummary]:
    """Run a synthesis and commit the dataset.

    Raises:
        ConfigError: unknown task or template, a held-out template (never synthesized), a
            procedural template outside its family's declared ranges, bad mixture.
    """
    from clawgym_ros.dataset.writer import synthesize_dataset

    mixture = request.mixture
    assert mixture is not None
    for i, cell in enumerate(mixture.cells):
        task = get_task(cell.task)
        task.synthesis_template(cell.template, f"mixture[{i}].template")   # never held out
        if cell.family == C.FAMILY_DISTURBANCE:     # the task must support the event
            from clawgym_ros.perturbations.disturbance import DisturbanceConfig, check_event

            check_event(cell.event or DisturbanceConfig().event, task,
                        f"mixture[{i}].event" if cell.event
                        else f"mixture[{i}].disturbance.event")
    options: dict[str, Any] = dict(request.options)
    if request.images:
        options["images"] = True
    from clawgym_ros.sim.active_calibration import OPTION_KEY, active

    calibration = active()
    if calibration is not None and OPTION_KEY not in options:
        # the episodes run at the active calibration (--calibration, a loop's key): it joins
        # their options, hence the dataset's id
        options[OPTION_KEY] = calibration.to_dict()
    specs = plan_episodes(mixture, request.episodes, request.seed, options=options)
    signoff = signoff_for(mixture.tasks)
    generation: Mapping[str, Any] = {"seed": request.seed, "episodes": request.episodes,
                                     "mixture": mixture.to_dict(), "options": options,
                                     "generator": "clawgym_ros.tasks.registry:generate_any"}
    return synthesize_dataset(
        ArtifactStore(request.out), specs, generate_any, signoff,
        workers=request.workers or None, generation=generation,
        config={"workers": request.workers, **generation}, seeds={"run": request.seed},
        progress=progress, cancel=cancel, start_method=start_method)


def synthesize_recovery(out: str, report_ref: str, episodes: int, seed: int, workers: int = 0,
                        progress: ProgressCallback | None = None,
                        cancel: threading.Event | Callable[[], bool] | None = None,
                        start_method: str | None = None,
                        options: Mapping[str, Any] | None = None
                        ) -> tuple[Artifact | None, GenerationSummary]:
    """Recovery demonstrations from a report's failure states (:mod:`.recovery`): the experts
    restart from where the evaluated policy failed; the dataset's parent is the report.

    Args:
        episodes: how many (0 = one per failure state).
        options: expert options of every episode (``clawgym synth --option``, e.g. the
            time-optimal expert of the dataset the policy was trained on); part of the
            dataset id when given.

    Raises:
        ClawgymError: a bad report id, a report without failure states, a snapshot of
            another robot or scene, a corrupted snapshot (before anything is generated).
    """
    from clawgym_ros.dataset.writer import synthesize_dataset

    check_int("episodes", episodes, 0, 10_000_000)
    check_int("seed", seed, 0, 2**63 - 1)
    check_int("workers", workers, 0, 1024)
    from clawgym_ros.sim.active_calibration import OPTION_KEY, active

    plan = plan_recovery(out, report_ref, episodes, seed, options)
    specs = list(plan.specs)
    tasks = sorted({spec.task for spec in specs})
    generation: dict[str, Any] = {
        "seed": seed, "episodes": len(specs), "from_report": plan.report_id,
        "failure_states": [fs.name for fs in plan.states],
        "held_out_skipped": list(plan.held_out),
        "generator": "clawgym_ros.tasks.registry:generate_any"}
    if options:                        # only when given: ids of earlier datasets unchanged
        generation["options"] = dict(sorted(options.items()))
    calibration = active()
    if calibration is not None:        # the experts restart in the calibrated simulator
        specs = [dataclasses.replace(s, options={**s.options, OPTION_KEY: calibration.to_dict()})
                 for s in specs]
        generation["calibration"] = calibration.id
    return synthesize_dataset(
        ArtifactStore(out), specs, generate_any, signoff_for(tasks),
        workers=workers or None, generation=generation,
        config={"workers": workers, **generation}, seeds={"run": seed},
        parents=[plan.report_id], progress=progress, cancel=cancel, start_method=start_method)


def load_failure_states(run_dir: str | Path, report_ref: str
                        ) -> tuple[str, list[FailureState]]:
    """The failure states of a committed report, verified.

    Returns:
        (full report id, the snapshots in report order).

    Raises:
        ArtifactError: not a report id (or another kind's). FailureStateError: the report has
            no failure states, or its failure-state file is missing or corrupted.
    """
    from clawgym_ros.report.render import load_report

    report_id, report = load_report(run_dir, report_ref)
    metas = metas_of(report)
    short = report_id[:12]
    if not metas:
        raise FailureStateError(
            f"report {short} has no failure states (every episode succeeded, or it was "
            "evaluated in ros mode or in the bare scene, which record none)")
    path = ArtifactStore(run_dir).get(report_id, C.KIND_REPORT).file(C.FILE_FAILURE_STATES)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FailureStateError(f"report {short}: cannot read {path.name}: "
                                f"{err.strerror or err}") from None
    return report_id, decode(data, metas, f"report {short} {path.name}")


@dataclasses.dataclass(frozen=True)
class RecoveryPlan:
    """A checked recovery synthesis: the report, its snapshots and the episode specs.

    ``held_out``: names of the snapshots left out because they were taken on a held-out
    template (never synthesized: generalization is measured on templates no data shows).
    """

    report_id: str
    states: tuple[FailureState, ...]
    specs: tuple[EpisodeSpec, ...]
    held_out: tuple[str, ...] = ()


def plan_recovery(run_dir: str | Path, report_ref: str, episodes: int, seed: int,
                  options: Mapping[str, Any] | None = None) -> RecoveryPlan:
    """Load, verify and restore-check a report's failure states; plan the episodes.

    Raises:
        ArtifactError, FailureStateError, ConfigError: any bad input (module docstring),
            before anything is generated.
    """
    from clawgym_ros.tasks.registry import get_task

    report_id, states = load_failure_states(run_dir, report_ref)
    usable = [fs for fs in states
              if get_task(fs.task).template(fs.template).split == C.SPLIT_TRAIN]
    held_out = tuple(fs.name for fs in states if fs not in usable)
    if not usable:
        raise FailureStateError(f"report {report_id[:12]}: all {len(states)} failure states "
                                "are on held-out templates, which are never synthesized")
    check_restorable(usable)
    specs = recovery_specs(report_id, usable, episodes, seed, options)
    return RecoveryPlan(report_id, tuple(usable), tuple(specs), held_out)
