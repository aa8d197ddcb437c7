"""Synthetic episode results with known ground truth (for tests, docs and downstream tests).

Not an evaluation of anything: :func:`synthetic_results` turns episode specs into
:class:`EpisodeResult` records whose success probability follows a known degradation model,
so that metrics, gaps, reports and the coordinator can be tested before (and independently of)
the simulator. Randomness comes only from each spec's own seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.evaluation.records import (
    Disturbance,
    EpisodeResult,
    EpisodeSeries,
    GpsOutage,
    SkillCall,
)
from clawgym_ros.evaluation.suites import EpisodeSpec

#: Stage lists used by the synthetic model (the task library owns the real ones).
STAGES: dict[str, tuple[str, ...]] = {
    C.TASK_PICK_PLACE: ("reach", "grasp", "lift", "transport", "place", "release"),
    C.TASK_PEG_INSERT: ("reach", "grasp", "align", "insert"),
    C.TASK_PILL_HANDOVER: ("reach", "grasp", "approach", "wait_for_hand", "release"),
    C.TASK_GPS_NAV: ("localize", "waypoint_1", "waypoint_2", "waypoint_3"),
}


@dataclasses.dataclass(frozen=True)
class SyntheticModel:
    """Ground truth: success = nominal * (1 - drop[family] * intensity ** power).

    Held-out templates multiply success by ``held_out_factor``. Failures of a family stop at
    ``fail_stage[family]`` with probability ``fail_stage_share`` (else at a uniform stage).
    """

    nominal: float = 0.9
    drop: Mapping[str, float] = dataclasses.field(default_factory=lambda: {
        C.FAMILY_LIGHTING: 0.8, C.FAMILY_SENSOR_NOISE: 0.3, C.FAMILY_GPS_DROPOUT: 0.5,
        C.FAMILY_DYNAMICS: 0.2})
    power: float = 2.0
    held_out_factor: float = 0.6
    fail_stage: Mapping[str, str] = dataclasses.field(default_factory=lambda: {
        C.FAMILY_NONE: "place", C.FAMILY_LIGHTING: "grasp", C.FAMILY_SENSOR_NOISE: "place",
        C.FAMILY_GPS_DROPOUT: "waypoint_2", C.FAMILY_DYNAMICS: "lift"})
    fail_stage_share: float = 0.8

    def success_probability(self, spec: EpisodeSpec) -> float:
        p = self.nominal
        for family in spec.families:
            p *= 1.0 - self.drop.get(family, 0.0) * spec.intensity ** self.power
        if spec.split == C.SPLIT_HELD_OUT:
            p *= self.held_out_factor
        return float(np.clip(p, 0.0, 1.0))


def _series(spec: EpisodeSpec, rng: np.random.Generator, rate: float) -> EpisodeSeries:
    n = int(rng.integers(60, 120))
    t = np.linspace(0.0, 1.0, n)
    peak = 0.25 * (1.0 + 0.5 * spec.intensity)
    speed = peak * np.sin(np.pi * t) ** 2 + rng.normal(0.0, 0.002 + 0.02 * spec.intensity, n)
    speed = np.abs(speed)
    if rng.random() < 0.3 + 0.5 * spec.intensity:
        k = int(rng.integers(n // 4, n // 2))
        speed[k:k + int(rate * 0.6)] = 0.0
    hand = ()
    if spec.task == C.TASK_PILL_HANDOVER:
        hand = tuple(np.linspace(0.6, 0.02, n))
    outages: tuple[GpsOutage, ...] = ()
    if spec.task == C.TASK_GPS_NAV and C.FAMILY_GPS_DROPOUT in spec.families:
        start = float(rng.uniform(0.5, 1.5))
        end = start + 8.0 * spec.intensity + 0.1
        rec = float(end + rng.exponential(1.0 + 3.0 * spec.intensity))
        outages = (GpsOutage(start, end, rec if rng.random() < 0.9 else None),)
    disturbances = ()
    if C.FAMILY_DYNAMICS in spec.families or spec.task == C.TASK_PILL_HANDOVER:
        size = float(rng.uniform(0.01, 0.1))
        disturbances = (Disturbance(float(rng.uniform(0, n / rate)), size,
                                    float(0.2 + 2.0 * size + rng.normal(0, 0.02)) ),)
    return EpisodeSeries(rate_hz=rate, tool_speed=tuple(speed), hand_distance=hand,
                         disturbances=disturbances, gps_outages=outages)


def synthetic_result(spec: EpisodeSpec, model: SyntheticModel | None = None,
                     rate_hz: float = 20.0) -> EpisodeResult:
    """One synthetic record for ``spec`` (deterministic in the spec's seeds)."""
    model = model or SyntheticModel()
    rng = np.random.default_rng([spec.seed, spec.perturbation_seed])
    stages = STAGES[spec.task]
    success = bool(rng.random() < model.success_probability(spec))
    if success:
        reached = stages
    else:
        family = spec.families[0] if spec.families else C.FAMILY_NONE
        target = model.fail_stage.get(family)
        if target in stages and rng.random() < model.fail_stage_share:
            stop = stages.index(target)
        else:
            stop = int(rng.integers(0, len(stages)))
        reached = stages[:stop]
    calls = tuple(SkillCall(s, C.SKILL_OK if (success or i < len(reached)) else C.SKILL_FAILED,
                            legal=bool(rng.random() > 0.02))
                  for i, s in enumerate(stages[: len(reached) + (0 if success else 1)]))
    violations = {"collision": int(rng.random() < 0.05 + 0.1 * spec.intensity)}
    perturbation = {f"{f}.intensity": spec.intensity for f in spec.families}
    return EpisodeResult(
        index=spec.index, seed=spec.seed, perturbation_seed=spec.perturbation_seed,
        task=spec.task, template=spec.template, split=spec.split, family=spec.family,
        families=spec.families, intensity=spec.intensity, perturbation=perturbation,
        stages=stages, stages_reached=reached, skill_calls=calls, violations=violations,
        goal_consistent=success or bool(rng.random() < 0.5), success=success,
        duration_s=float(rng.uniform(5.0, 15.0)), series=_series(spec, rng, rate_hz))


def synthetic_results(specs: Sequence[EpisodeSpec], model: SyntheticModel | None = None
                      ) -> list[EpisodeResult]:
    """Synthetic records for every spec."""
    return [synthetic_result(s, model) for s in specs]
