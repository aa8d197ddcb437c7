"""Recovery synthesis: demonstrations that start where an evaluated policy failed.

An evaluation report keeps restorable failure states of its failed episodes
(:mod:`clawgym_ros.evaluation.failure_states`). :func:`recovery_specs` turns them into
synthesis episode specs whose ``recover_from`` option carries one snapshot (its metadata, the
report id and the state values, so the spec alone reproduces the episode and the dataset id
follows from it). The task's expert restores the snapshot instead of starting a fresh episode
and finishes the task from there (:meth:`Task.recovery_grammar` lists the legal skill
sequences of such a segment); the ordinary dual sign-off checks the segment, with the stages
the policy had already reached recorded at the segment's first step. A snapshot the expert
cannot recover from ends as a rejected episode with its reason, counted in the yield.

Bad input is refused before anything runs: a report id of another kind, a report without
failure states, a snapshot of another robot or scene, a corrupted snapshot (one line naming
it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.failure_states import (
    KINDS,
    FailureState,
    FailureStateError,
    decode,
    metas_of,
    restored_envs,
)
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import episode_seed

#: Generator option of a recovery episode: the snapshot to start from (module docstring).
OPTION = "recover_from"


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
    from clawgym_ros.artifacts import ArtifactStore

    path = ArtifactStore(run_dir).get(report_id, C.KIND_REPORT).file(C.FILE_FAILURE_STATES)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FailureStateError(f"report {short}: cannot read {path.name}: "
                                f"{err.strerror or err}") from None
    return report_id, decode(data, metas, f"report {short} {path.name}")


def check_restorable(states: Sequence[FailureState]) -> None:
    """Restore every snapshot once into its task env (one env per task and template).

    Raises:
        FailureStateError: a snapshot of a task without recovery synthesis, of another robot
            or scene (model signature), or whose state does not fit.
    """
    from clawgym_ros.tasks.registry import get_task

    for fs in states:
        task = get_task(fs.task)
        if not task.recovery_grammar:
            raise FailureStateError(f"failure state {fs.name}: task {fs.task!r} has no "
                                    "recovery expert (pick_place has)")
        if int(task.template(fs.template).params.get("placements", 1)) != 1:
            raise FailureStateError(f"failure state {fs.name}: template {fs.template!r} "
                                    "has several placements; recovery covers one")
    for _ in restored_envs(states):
        pass


def recovery_specs(report_id: str, states: Sequence[FailureState], episodes: int, seed: int,
                   options: Mapping[str, Any] | None = None) -> list[EpisodeSpec]:
    """Synthesis specs, one per snapshot in turn (``episodes`` of them; 0 = one each).

    Stage-entry snapshots come first (states the policy reached on its way, before it went
    astray: measured in the demo loop, the expert finished 10 of 17 of them, 2 of 33 episode
    ends), then stall, then end snapshots; episode ``i`` gets seed ``episode_seed(seed, i)``
    and the evaluated episode's cell (template, perturbation family and intensity).

    Raises:
        ConfigError: ``episodes`` < 0, or no snapshots.
    """
    if episodes < 0:
        raise ConfigError("episodes", episodes, "0 (one per failure state) or more")
    rank = {kind: i for i, kind in enumerate(KINDS)}       # stage, stall, end
    ordered = sorted(states, key=lambda fs: (rank[fs.kind], fs.episode))
    if not ordered:
        raise ConfigError("failure states", 0, "at least one")
    n = episodes or len(ordered)
    specs = []
    for index in range(n):
        fs = ordered[index % len(ordered)]
        assert fs.state is not None
        origin = {**fs.meta(), "report": report_id,
                  "state": [float(v) for v in np.asarray(fs.state, dtype=np.float64)]}
        specs.append(EpisodeSpec(
            index=index, seed=episode_seed(seed, index), task=fs.task, template=fs.template,
            family=fs.family, intensity=float(fs.intensity),
            options={**dict(options or {}), OPTION: origin}))
    return specs


def snapshot_of(spec: EpisodeSpec) -> FailureState | None:
    """The snapshot a recovery spec starts from (None for an ordinary spec).

    Raises:
        FailureStateError: a malformed ``recover_from`` option.
    """
    origin = spec.options.get(OPTION)
    if not origin:
        return None
    try:
        state = np.asarray(origin["state"], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise FailureStateError(f"episode {spec.index}: {OPTION} has no valid state values"
                                ) from None
    fs = FailureState.from_meta(origin, state=state, source=f"episode {spec.index} {OPTION}")
    if fs.digest() != origin.get("sha256"):
        raise FailureStateError(f"episode {spec.index}: {OPTION} state {fs.name} is corrupted "
                                "(sha256 differs)")
    return fs


def origin_info(spec: EpisodeSpec, fs: FailureState | None) -> dict[str, Any]:
    """What a recovery episode's record says about where it came from (no state values);
    ``fs``: its :func:`snapshot_of` (None for an ordinary spec: empty)."""
    if fs is None:
        return {}
    return {"kind": "recovery", "report": str(spec.options[OPTION].get("report", "")),
            "state": fs.name, "state_kind": fs.kind, "episode": fs.episode,
            "failed_stage": fs.stage, "time": fs.time,
            "reached_before": [n for n, _ in fs.reached]}


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
