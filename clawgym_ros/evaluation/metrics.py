"""The four evaluation dimensions computed from :class:`EpisodeResult` records (pure).

- functional correctness: success on unperturbed in-distribution episodes (Wilson CI), the stage
  funnel per task, where failures stop, skill-call legality, feasibility violations by kind,
  goal consistency;
- robustness: success per perturbation cell (family, intensity), stability = cell success /
  nominal success (Katz log CI per cell; their mean with a seeded stratified bootstrap CI), the
  boundary intensity per family where success crosses a threshold (linear interpolation),
  recovery time after GPS outages end, and, with disturbance cells, the recovery rate and
  median steps to recover per task, cell and event;
- generalization: held-out / in-distribution success on unperturbed episodes, per task and
  pooled (Katz log CI), plus per held-out template;
- human preference: jerk, hesitation, rhythm entropy, approach speed near the hand, recovery
  speed against disturbance size, a per-episode comfort score, and Bradley-Terry scores of
  pairwise human judgments (:mod:`clawgym_ros.evaluation.preference`).

:func:`dimension_scores` gives the one scalar per dimension (value, 95% CI, n) that the
EvalSummary message carries. Every number here is a deterministic function of the records and
the config (the bootstrap generator is seeded from ``MetricsConfig.bootstrap_seed``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as _st

from clawgym_ros import constants as C
from clawgym_ros.config import check_int, check_range
from clawgym_ros.evaluation.records import EpisodeResult, EpisodeSeries
from clawgym_ros.evaluation.stats import (
    Estimate,
    _r,
    bootstrap_mean,
    bootstrap_mean_ratio,
    katz_ratio,
    wilson,
)


@dataclasses.dataclass(frozen=True)
class MetricsConfig:
    """Thresholds and constants of the metrics (units in the field help)."""

    confidence: float = 0.95
    #: success rate below which a family's intensity counts as past its boundary
    boundary_threshold: float = 0.5
    #: smallest drop from nominal success that makes a condition a gap
    min_gap_deviation: float = 0.05
    bootstrap_samples: int = 2000
    bootstrap_seed: int = 0
    #: tool speed (m/s) under which the motion counts as stopped
    hesitation_speed: float = 0.01
    #: a stop mid-task longer than this (s) is a hesitation
    hesitation_min_s: float = 0.3
    entropy_bins: int = 16
    #: upper edge (m/s) of the speed histogram; faster samples fall into the last bin
    entropy_max_speed: float = 0.5
    #: tool-to-hand distance (m) within which the approach speed is measured
    hand_radius: float = 0.15
    #: comfortable approach speed (m/s) near a human hand
    approach_speed_limit: float = 0.05
    #: RMS jerk (m/s^3) at which the jerk component of the comfort score is 0.5
    jerk_ref: float = 5.0
    #: ridge (Gaussian prior precision) on Bradley-Terry log-strengths
    bt_ridge: float = 0.01

    def __post_init__(self) -> None:
        check_range("confidence", self.confidence, 0.5, 1.0, high_open=True)
        check_range("boundary_threshold", self.boundary_threshold, 0.0, 1.0)
        check_range("min_gap_deviation", self.min_gap_deviation, 0.0, 1.0)
        check_int("bootstrap_samples", self.bootstrap_samples, 100, 1_000_000)
        check_int("bootstrap_seed", self.bootstrap_seed, 0, 2**63 - 1)
        check_range("hesitation_speed", self.hesitation_speed, 0.0, low_open=True)
        check_range("hesitation_min_s", self.hesitation_min_s, 0.0, low_open=True)
        check_int("entropy_bins", self.entropy_bins, 2, 1000)
        check_range("entropy_max_speed", self.entropy_max_speed, 0.0, low_open=True)
        check_range("hand_radius", self.hand_radius, 0.0, low_open=True)
        check_range("approach_speed_limit", self.approach_speed_limit, 0.0, low_open=True)
        check_range("jerk_ref", self.jerk_ref, 0.0, low_open=True)
        check_range("bt_ridge", self.bt_ridge, 0.0, 100.0, low_open=True)

    def rng(self, stream: str) -> np.random.Generator:
        """A generator for one named bootstrap (independent of the order of computations)."""
        import zlib

        return np.random.default_rng([self.bootstrap_seed, zlib.crc32(stream.encode())])


# --- helpers ---------------------------------------------------------------------------------

def _success(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> Estimate:
    return wilson(sum(r.success for r in results), len(results), cfg.confidence)


def _nominal_train(results: Sequence[EpisodeResult]) -> list[EpisodeResult]:
    return [r for r in results if r.nominal and r.split == C.SPLIT_TRAIN]


def failure_stages(results: Sequence[EpisodeResult]) -> dict[str, int]:
    """Failed episodes counted by the stage where they stopped (sorted by name)."""
    counts = Counter(r.failed_stage for r in results if not r.success)
    return dict(sorted(counts.items()))


def dominant_failure_stage(results: Sequence[EpisodeResult]) -> tuple[str | None, float]:
    """The stage where most failures stop and the share of failures stopping there.

    Ties go to the earlier stage of the task's list (then to the name), so the result is
    deterministic.
    """
    failed = [r for r in results if not r.success]
    if not failed:
        return None, 0.0
    counts = Counter(r.failed_stage for r in failed)
    order = {}
    for r in failed:
        for i, s in enumerate((*r.stages, C.STAGE_FINAL_CHECK)):
            order.setdefault(s, i)
    stage = min(counts, key=lambda s: (-counts[s], order.get(s, 1 << 30), s))
    return stage, counts[stage] / len(failed)


# --- functional correctness ------------------------------------------------------------------

def functional(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> dict[str, Any]:
    """Functional-correctness metrics.

    Scope: unperturbed episodes on training templates; if the suite has none, all episodes
    (``scope`` says which).

    Returns:
        ``{"scope", "success", "funnel", "failure_stages", "skill_legality", "violations",
        "goal_consistency"}`` with estimates as ``{"value", "ci", "n"}``.
    """
    scoped = _nominal_train(results)
    scope = "nominal_train"
    if not scoped:
        scoped, scope = list(results), "all"
    funnel = {}
    for task in sorted({r.task for r in scoped}):
        eps = [r for r in scoped if r.task == task]
        stages = max((r.stages for r in eps), key=len)
        rows = []
        for i, stage in enumerate(stages):
            k = sum(len(r.stages_reached) > i for r in eps)
            rows.append({"stage": stage, "reached": k,
                         **wilson(k, len(eps), cfg.confidence).to_dict()})
        k = sum(r.success for r in eps)
        rows.append({"stage": "success", "reached": k,
                     **wilson(k, len(eps), cfg.confidence).to_dict()})
        funnel[task] = rows
    calls = [c for r in scoped for c in r.skill_calls]
    legal = wilson(sum(c.legal for c in calls), len(calls), cfg.confidence)
    kinds = sorted({k for r in scoped for k in r.violations})
    violations = {}
    for kind in kinds:
        hit = sum(r.violations.get(kind, 0) > 0 for r in scoped)
        violations[kind] = {
            "total": sum(r.violations.get(kind, 0) for r in scoped),
            "episodes": hit,
            "episode_rate": wilson(hit, len(scoped), cfg.confidence).to_dict(),
        }
    goal = [r.goal_consistent for r in scoped if r.goal_consistent is not None]
    return {
        "scope": scope,
        "success": _success(scoped, cfg).to_dict(),
        "funnel": funnel,
        "failure_stages": failure_stages(scoped),
        "skill_legality": legal.to_dict(),
        "skill_outcomes": dict(sorted(Counter(c.outcome for c in calls).items())),
        "violations": violations,
        "goal_consistency": wilson(sum(goal), len(goal), cfg.confidence).to_dict(),
    }


# --- robustness ------------------------------------------------------------------------------

def boundary_intensity(
    points: Sequence[tuple[float, float]], threshold: float
) -> float | None:
    """Intensity where success first falls below ``threshold`` (linear interpolation).

    Args:
        points: (intensity, success) pairs, including the nominal point (0, s0).
        threshold: success rate defining the boundary.

    Returns:
        The interpolated intensity, 0.0 when already below at the lowest intensity, or None
        when success never falls below the threshold on the tested grid.
    """
    pts = sorted(points)
    for i, (x1, s1) in enumerate(pts):
        if s1 < threshold:
            if i == 0:
                return float(x1)
            x0, s0 = pts[i - 1]
            return float(x0 + (s0 - threshold) * (x1 - x0) / (s0 - s1))
    return None


def _cells(results: Sequence[EpisodeResult]) -> dict[tuple[str, float], list[EpisodeResult]]:
    cells: dict[tuple[str, float], list[EpisodeResult]] = defaultdict(list)
    for r in results:
        if r.split == C.SPLIT_TRAIN:
            cells[(r.family, r.intensity)].append(r)
    return dict(sorted(cells.items()))


def robustness(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> dict[str, Any]:
    """Robustness metrics over the training-template episodes of every cell.

    Returns:
        ``{"nominal", "cells", "families", "stability", "gps_recovery"}``; each cell has its
        success (Wilson) and stability (Katz log CI); each family its curve and boundary.
    """
    cells = _cells(results)
    nominal_eps = cells.get((C.FAMILY_NONE, 0.0), [])
    x0, n0 = sum(r.success for r in nominal_eps), len(nominal_eps)
    rows = []
    for (family, intensity), eps in cells.items():
        x, n = sum(r.success for r in eps), len(eps)
        stage, share = dominant_failure_stage(eps)
        rows.append({
            "family": family,
            "families": list(eps[0].families),
            "intensity": intensity,
            "successes": x,
            "success": wilson(x, n, cfg.confidence).to_dict(),
            "stability": (katz_ratio(x, n, x0, n0, cfg.confidence).to_dict()
                          if family != C.FAMILY_NONE else None),
            "failure_stages": failure_stages(eps),
            "dominant_failure_stage": stage,
            "dominant_failure_share": _r(share),
        })
    families = {}
    s_nom = x0 / n0 if n0 else None
    for family in sorted({f for f, _ in cells if f != C.FAMILY_NONE}):
        curve = [(i, sum(r.success for r in eps) / len(eps))
                 for (f, i), eps in cells.items() if f == family]
        points = ([(0.0, s_nom)] if s_nom is not None else []) + curve
        families[family] = {
            "intensities": [i for i, _ in curve],
            "success": [_r(s) for _, s in curve],
            "boundary": _r(boundary_intensity(points, cfg.boundary_threshold)),
            "threshold": cfg.boundary_threshold,
        }
    perturbed = [(sum(r.success for r in eps), len(eps))
                 for (f, _), eps in cells.items() if f != C.FAMILY_NONE]
    stability = bootstrap_mean_ratio(perturbed, (x0, n0), cfg.rng("stability"),
                                     cfg.bootstrap_samples, cfg.confidence)
    out = {
        "nominal": wilson(x0, n0, cfg.confidence).to_dict(),
        "cells": rows,
        "families": families,
        "stability": stability.to_dict(),
        "gps_recovery": gps_recovery(results, cfg),
    }
    if any(r.recovery is not None for r in results):   # disturbance cells only: other
        out["disturbance_recovery"] = disturbance_recovery(results, cfg)   # reports keep ids
    return out


def median_ci(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Median with the distribution-free order-statistic interval: the ranks ``l < u`` of the
    sorted values with ``P(l <= B < u) >= confidence`` for ``B ~ Binomial(n, 1/2)``
    (symmetric); the whole range when n is too small for that level."""
    x = sorted(float(v) for v in values)
    n = len(x)
    if n == 0:
        return Estimate(None, None, None, 0)
    median = float(np.median(x))
    lo = int(_st.binom.ppf((1 - confidence) / 2, n, 0.5))   # P(B < lo) <= alpha / 2
    while lo > 0 and _st.binom.cdf(lo - 1, n, 0.5) > (1 - confidence) / 2:
        lo -= 1
    if lo == 0:
        return Estimate(median, x[0], x[-1], n)
    return Estimate(median, x[lo - 1], x[n - lo], n)


def disturbance_recovery(results: Sequence[EpisodeResult], cfg: MetricsConfig
                         ) -> list[dict[str, Any]]:
    """Recovery under mid-episode disturbances, per task, cell and event.

    Returns:
        Rows ``{"task", "family", "intensity", "event", "episodes", "disturbed",
        "recovery_rate", "regained", "steps_to_recover"}``: ``recovery_rate`` = disturbed
        episodes that still delivered (Wilson), ``regained`` = disturbed episodes whose stage
        progress came back (Wilson), ``steps_to_recover`` = median control steps from the
        disturbance to regained stage progress over those (order-statistic CI).
    """
    groups: dict[tuple[str, str, float, str], list[EpisodeResult]] = defaultdict(list)
    for r in results:
        if r.recovery is not None:
            groups[(r.task, r.family, r.intensity, str(r.recovery.get("event", "")))].append(r)
    rows = []
    for (task, family, intensity, event), eps in sorted(groups.items()):
        hit = [r for r in eps if r.recovery["disturbed"]]
        steps = [r.recovery["steps_to_recover"] for r in hit
                 if r.recovery["steps_to_recover"] is not None]
        rows.append({
            "task": task, "family": family, "intensity": intensity, "event": event,
            "episodes": len(eps), "disturbed": len(hit),
            "recovery_rate": wilson(sum(r.success for r in hit), len(hit),
                                    cfg.confidence).to_dict(),
            "regained": wilson(len(steps), len(hit), cfg.confidence).to_dict(),
            "steps_to_recover": median_ci(steps, cfg.confidence).to_dict(),
        })
    return rows


def gps_recovery(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> dict[str, Any]:
    """Recovery after GPS outages end: share recovered (Wilson) and mean time (bootstrap).

    Returns:
        ``{"outages", "recovered", "recovery_s"}`` (estimates null when there were none).
    """
    outages = [g for r in results for g in r.series.gps_outages]
    times = [g.recovery_time for g in outages if g.recovery_time is not None]
    return {
        "outages": len(outages),
        "recovered": wilson(len(times), len(outages), cfg.confidence).to_dict(),
        "recovery_s": bootstrap_mean(times, cfg.rng("gps_recovery"), cfg.bootstrap_samples,
                                     cfg.confidence).to_dict(),
    }


# --- generalization --------------------------------------------------------------------------

def generalization(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> dict[str, Any]:
    """Held-out / in-distribution success on unperturbed episodes, per task and pooled.

    Returns:
        ``{"pooled", "tasks", "templates"}``: the pooled and per-task ratios with Katz log
        CIs, and the success of every held-out template with its ratio to its task's
        in-distribution success.
    """
    nominal = [r for r in results if r.nominal]
    tasks = {}
    templates = {}
    totals = [0, 0, 0, 0]
    for task in sorted({r.task for r in nominal}):
        ind = [r for r in nominal if r.task == task and r.split == C.SPLIT_TRAIN]
        held = [r for r in nominal if r.task == task and r.split == C.SPLIT_HELD_OUT]
        if not held:
            continue
        xi, ni = sum(r.success for r in ind), len(ind)
        xh, nh = sum(r.success for r in held), len(held)
        totals = [totals[0] + xh, totals[1] + nh, totals[2] + xi, totals[3] + ni]
        tasks[task] = {
            "in_distribution": wilson(xi, ni, cfg.confidence).to_dict(),
            "held_out": wilson(xh, nh, cfg.confidence).to_dict(),
            "ratio": katz_ratio(xh, nh, xi, ni, cfg.confidence).to_dict(),
        }
        for template in sorted({r.template for r in held}):
            eps = [r for r in held if r.template == template]
            x = sum(r.success for r in eps)
            stage, share = dominant_failure_stage(eps)
            templates[f"{task}/{template}"] = {
                "task": task, "template": template,
                "success": wilson(x, len(eps), cfg.confidence).to_dict(),
                "ratio": katz_ratio(x, len(eps), xi, ni, cfg.confidence).to_dict(),
                "dominant_failure_stage": stage, "dominant_failure_share": _r(share),
            }
    pooled = katz_ratio(*totals, confidence=cfg.confidence) if totals[1] else Estimate(
        None, None, None, 0)
    return {"pooled": pooled.to_dict(), "tasks": tasks, "templates": templates}


# --- human preference ------------------------------------------------------------------------

def jerk_rms(series: EpisodeSeries) -> float | None:
    """RMS jerk (m/s^3): third derivative of the tool position, or second of its speed.

    Finite differences at the series rate; None when there are fewer than 4 samples.
    """
    dt = 1.0 / series.rate_hz
    if len(series.tool_position) >= 4:
        p = np.asarray(series.tool_position)
        jerk = np.linalg.norm(np.diff(p, n=3, axis=0), axis=1) / dt**3
    elif len(series.tool_speed) >= 4:
        jerk = np.abs(np.diff(np.asarray(series.tool_speed), n=2)) / dt**2
    else:
        return None
    return float(np.sqrt(np.mean(jerk**2)))


def hesitations(series: EpisodeSeries, speed: float, min_s: float) -> tuple[int, float]:
    """Count and total duration (s) of stops mid-task.

    A stop is a run of samples with speed below ``speed``; it counts as a hesitation when it
    lasts longer than ``min_s`` and neither touches the first nor the last sample (standing
    still before starting or after finishing is not hesitating).
    """
    v = np.asarray(series.tool_speed)
    if v.size == 0:
        return 0, 0.0
    slow = np.concatenate([[False], v < speed, [False]])
    edges = np.flatnonzero(np.diff(slow.astype(np.int8)))
    starts, ends = edges[::2], edges[1::2]
    count, total = 0, 0.0
    for s, e in zip(starts, ends):
        duration = (e - s) / series.rate_hz
        if s == 0 or e == v.size or duration <= min_s:
            continue
        count += 1
        total += duration
    return count, total


def rhythm_entropy(series: EpisodeSeries, bins: int, max_speed: float) -> float | None:
    """Normalised Shannon entropy (in [0, 1]) of the tool-speed histogram.

    Fixed bin edges (``bins`` equal bins over [0, max_speed], faster samples in the last bin)
    make values comparable across policies: 0 = one constant speed, 1 = all speeds equally often.
    """
    v = np.asarray(series.tool_speed)
    if v.size == 0:
        return None
    counts, _ = np.histogram(np.clip(v, 0.0, max_speed), bins=bins, range=(0.0, max_speed))
    p = counts[counts > 0] / v.size
    return float(-(p * np.log(p)).sum() / math.log(bins))


def approach_speed(series: EpisodeSeries, radius: float) -> float | None:
    """Mean tool speed (m/s) while the tool is within ``radius`` of the hand; None if never."""
    if not series.hand_distance:
        return None
    d = np.asarray(series.hand_distance)
    near = d < radius
    if not near.any():
        return None
    return float(np.asarray(series.tool_speed)[near].mean())


def episode_motion(r: EpisodeResult, cfg: MetricsConfig) -> dict[str, Any]:
    """Per-episode motion-quality metrics and the comfort score (None when no series).

    comfort = mean of the available components, each in [0, 1]:
    ``1 / (1 + jerk_rms / jerk_ref)``, ``1 / (1 + hesitation_count)`` and, near a hand,
    ``min(1, approach_speed_limit / approach_speed)``.
    """
    s = r.series
    if not s.tool_speed:
        return {}
    jerk = jerk_rms(s)
    count, duration = hesitations(s, cfg.hesitation_speed, cfg.hesitation_min_s)
    approach = approach_speed(s, cfg.hand_radius)
    parts = [1.0 / (1.0 + count)]
    if jerk is not None:
        parts.append(1.0 / (1.0 + jerk / cfg.jerk_ref))
    if approach is not None:
        parts.append(min(1.0, cfg.approach_speed_limit / max(approach, 1e-9)))
    return {
        "jerk_rms": _r(jerk),
        "hesitation_count": count,
        "hesitation_s": _r(duration),
        "rhythm_entropy": _r(rhythm_entropy(s, cfg.entropy_bins, cfg.entropy_max_speed)),
        "approach_speed": _r(approach),
        "comfort": _r(float(np.mean(parts))),
    }


def recovery_scaling(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> dict[str, Any]:
    """How recovery speed (size / recovery time) scales with disturbance size.

    Least-squares slope of recovery speed against size over all recovered disturbances, with
    a t-based CI of the slope. A positive slope means bigger pushes are corrected faster
    (proportional, human-like); about zero means a fixed correction speed.
    """
    pairs = [(d.size, d.size / d.recovery_s) for r in results for d in r.series.disturbances
             if d.recovery_s is not None and d.recovery_s > 0]
    unrecovered = sum(d.recovery_s is None for r in results for d in r.series.disturbances)
    out: dict[str, Any] = {"disturbances": len(pairs) + unrecovered, "unrecovered": unrecovered,
                           "slope": Estimate(None, None, None, len(pairs)).to_dict(),
                           "intercept": None}
    sizes = np.array([p[0] for p in pairs])
    if len(pairs) >= 3 and np.ptp(sizes) > 0:
        fit = _st.linregress(sizes, [p[1] for p in pairs])
        t = float(_st.t.ppf(0.5 + cfg.confidence / 2, len(pairs) - 2))
        out["slope"] = Estimate(fit.slope, fit.slope - t * fit.stderr, fit.slope + t * fit.stderr,
                                len(pairs)).to_dict()
        out["intercept"] = _r(fit.intercept)
    return out


def preference(
    results: Sequence[EpisodeResult],
    cfg: MetricsConfig,
    judgments: Sequence[Any] | None = None,
    policy: str = "",
) -> dict[str, Any]:
    """Human-preference metrics: motion quality, recovery scaling, comfort, judgments.

    Args:
        judgments: pairwise human judgments (:class:`~clawgym_ros.evaluation.preference.
            Judgment`); fitted with Bradley-Terry when given.
        policy: the evaluated policy's item name in the judgments (a full checkpoint id or
            ``scripted:...``); when it was judged, ``policy`` holds its judged strength and
            the combined score (:func:`~clawgym_ros.evaluation.preference.judged_section`).

    Returns:
        ``{"episodes", "motion", "comfort", "recovery", "judgments"}`` (+ ``"policy"``).
    """
    from clawgym_ros.evaluation.preference import judged_section

    per = [episode_motion(r, cfg) for r in results]
    per = [m for m in per if m]
    motion = {}
    for key in ("jerk_rms", "hesitation_count", "hesitation_s", "rhythm_entropy",
                "approach_speed"):
        values = [m[key] for m in per if m[key] is not None]
        motion[key] = bootstrap_mean(values, cfg.rng(key), cfg.bootstrap_samples,
                                     cfg.confidence).to_dict()
    comfort = bootstrap_mean([m["comfort"] for m in per], cfg.rng("comfort"),
                             cfg.bootstrap_samples, cfg.confidence)
    fitted, judged = judged_section(judgments or (), policy, comfort.to_dict(), cfg.bt_ridge,
                                    cfg.confidence)
    out = {
        "episodes": len(per),
        "motion": motion,
        "comfort": comfort.to_dict(),
        "recovery": recovery_scaling(results, cfg),
        "judgments": fitted,
    }
    if judged:
        out["policy"] = judged
    return out


# --- everything ------------------------------------------------------------------------------

def evaluate(
    results: Sequence[EpisodeResult],
    cfg: MetricsConfig | None = None,
    judgments: Sequence[Any] | None = None,
    policy: str = "",
) -> dict[str, Any]:
    """All four dimensions: ``{dimension: metrics}`` (keys from constants.DIMENSIONS)."""
    cfg = cfg or MetricsConfig()
    return {
        C.DIM_FUNCTIONAL: functional(results, cfg),
        C.DIM_ROBUSTNESS: robustness(results, cfg),
        C.DIM_GENERALIZATION: generalization(results, cfg),
        C.DIM_PREFERENCE: preference(results, cfg, judgments, policy),
    }


def dimension_scores(aggregated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The scalar of each dimension for EvalSummary: ``{dim: {"value", "ci", "n"}}``.

    functional = nominal success; robustness = mean stability over perturbed cells;
    generalization = pooled held-out / in-distribution ratio; preference = mean comfort score,
    combined with the human judgments when the evaluated policy was judged
    (:func:`~clawgym_ros.evaluation.preference.preference_score`).
    A dimension the suite did not measure has value null and n 0.
    """
    import copy

    from clawgym_ros.evaluation.preference import preference_score

    return copy.deepcopy({
        C.DIM_FUNCTIONAL: aggregated[C.DIM_FUNCTIONAL]["success"],
        C.DIM_ROBUSTNESS: aggregated[C.DIM_ROBUSTNESS]["stability"],
        C.DIM_GENERALIZATION: aggregated[C.DIM_GENERALIZATION]["pooled"],
        C.DIM_PREFERENCE: preference_score(aggregated[C.DIM_PREFERENCE]),
    })
