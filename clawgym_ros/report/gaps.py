"""Capability gaps for the coordinator and the plain-language diagnosis (pure).

A gap says under which condition which capability deviated, and how much:

- perturbation gaps, one per family (or combination): the condition is the family at and above
  the lowest tested intensity whose success is at least ``min_gap_deviation`` below nominal
  (``lighting>=0.6``); the cells at and above it are pooled;
- generalization gaps, one per held-out template whose success is at least
  ``min_gap_deviation`` below its task's training templates (``held_out:pick_place/stack``).

capability = the stage where most failed episodes of the condition stop; deviation = reference
success - condition success. Gaps are ranked by deviation (largest first; ties by condition).
Every gap carries structured fields (family, intensity_min, task, template) so the coordinator
never parses the condition string.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.evaluation.metrics import MetricsConfig, dominant_failure_stage
from clawgym_ros.evaluation.records import EpisodeResult
from clawgym_ros.evaluation.stats import Estimate, _r, wilson

KIND_PERTURBATION = "perturbation"
KIND_GENERALIZATION = "generalization"


def fmt_estimate(est: Estimate | dict[str, Any]) -> str:
    """``0.92 [0.85, 0.96]``."""
    if isinstance(est, Estimate):
        est = est.to_dict()
    if est["value"] is None:
        return "n/a"
    lo, hi = est["ci"]
    return f"{est['value']:.2f} [{lo:.2f}, {hi:.2f}]"


def family_text(family: str) -> str:
    """``lighting + sensor_noise`` for a combination label."""
    return " + ".join(family.split("+"))


def _failure_clause(stage: str | None, share: float) -> str:
    if stage is None:
        return "no failures"
    return f"{round(100 * share)}% of failures stop at stage {stage}"


def perturbation_gaps(
    results: Sequence[EpisodeResult], cfg: MetricsConfig
) -> list[dict[str, Any]]:
    """One gap per perturbed family whose success drops by >= ``min_gap_deviation``."""
    train = [r for r in results if r.split == C.SPLIT_TRAIN]
    nominal = [r for r in train if r.nominal]
    if not nominal:
        return []
    ref = wilson(sum(r.success for r in nominal), len(nominal), cfg.confidence)
    gaps = []
    for family in sorted({r.family for r in train if not r.nominal}):
        eps = [r for r in train if r.family == family]
        grid = sorted({r.intensity for r in eps})
        # The condition starts at the lowest intensity from which every tested intensity is
        # at least min_gap_deviation below nominal (a single noisy dip does not open a gap).
        start = None
        for x in reversed(grid):
            cell = [r for r in eps if r.intensity == x]
            rate = sum(r.success for r in cell) / len(cell)
            if ref.value - rate < cfg.min_gap_deviation - 1e-12:
                break
            start = x
        if start is None:
            continue
        pooled = [r for r in eps if r.intensity >= start]
        est = wilson(sum(r.success for r in pooled), len(pooled), cfg.confidence)
        stage, share = dominant_failure_stage(pooled)
        condition = f"{family}>={start:g}"
        evidence = (f"under {family_text(family)} intensity >= {start:g}, success falls from "
                    f"{fmt_estimate(ref)} to {fmt_estimate(est)} (n={len(pooled)}); "
                    f"{_failure_clause(stage, share)}")
        gaps.append({
            "kind": KIND_PERTURBATION, "condition": condition,
            "capability": stage or C.STAGE_FINAL_CHECK,
            "deviation": _r(ref.value - est.value), "evidence": evidence,
            "family": family, "families": family.split("+"), "intensity_min": start,
            "task": None, "template": None,
            "success": est.to_dict(), "reference": ref.to_dict(),
            "failure_share": _r(share),
            "significant": bool(est.high < ref.low),
        })
    return gaps


def generalization_gaps(
    results: Sequence[EpisodeResult], cfg: MetricsConfig
) -> list[dict[str, Any]]:
    """One gap per held-out template whose success trails its task's training templates."""
    nominal = [r for r in results if r.nominal]
    gaps = []
    for task in sorted({r.task for r in nominal if r.split == C.SPLIT_HELD_OUT}):
        ind = [r for r in nominal if r.task == task and r.split == C.SPLIT_TRAIN]
        if not ind:
            continue
        ref = wilson(sum(r.success for r in ind), len(ind), cfg.confidence)
        held = [r for r in nominal if r.task == task and r.split == C.SPLIT_HELD_OUT]
        for template in sorted({r.template for r in held}):
            eps = [r for r in held if r.template == template]
            est = wilson(sum(r.success for r in eps), len(eps), cfg.confidence)
            if ref.value - est.value < cfg.min_gap_deviation - 1e-12:
                continue
            stage, share = dominant_failure_stage(eps)
            evidence = (f"on held-out template {task}/{template}, success falls from "
                        f"{fmt_estimate(ref)} on the training templates to {fmt_estimate(est)} "
                        f"(n={len(eps)}); {_failure_clause(stage, share)}")
            gaps.append({
                "kind": KIND_GENERALIZATION, "condition": f"held_out:{task}/{template}",
                "capability": stage or C.STAGE_FINAL_CHECK,
                "deviation": _r(ref.value - est.value), "evidence": evidence,
                "family": C.FAMILY_NONE, "families": [], "intensity_min": None,
                "task": task, "template": template,
                "success": est.to_dict(), "reference": ref.to_dict(),
                "failure_share": _r(share),
                "significant": bool(est.high < ref.low),
            })
    return gaps


def find_gaps(results: Sequence[EpisodeResult], cfg: MetricsConfig) -> list[dict[str, Any]]:
    """All gaps, ranked by deviation (largest first), each with its ``rank`` (1-based)."""
    gaps = perturbation_gaps(results, cfg) + generalization_gaps(results, cfg)
    gaps.sort(key=lambda g: (-g["deviation"], g["condition"]))
    for i, gap in enumerate(gaps, start=1):
        gap["rank"] = i
    return gaps


def diagnosis(
    gaps: Sequence[dict[str, Any]], aggregated: dict[str, Any], cfg: MetricsConfig,
    worst: int = 5,
) -> list[str]:
    """Plain-language sentences: the worst gaps, then each family's boundary intensity."""
    lines = [g["evidence"][0].upper() + g["evidence"][1:] + "." for g in gaps[:worst]]
    if not gaps:
        lines.append(f"No tested condition lowers success by {cfg.min_gap_deviation:g} or more "
                     "below its reference.")
    families = aggregated[C.DIM_ROBUSTNESS]["families"]
    for family, info in families.items():
        if info["boundary"] is None:
            top = max(info["intensities"])
            lines.append(f"Under {family_text(family)}, success stays at or above "
                         f"{info['threshold']:g} up to the highest tested intensity ({top:g}).")
        else:
            lines.append(f"Under {family_text(family)}, success falls below "
                         f"{info['threshold']:g} at intensity {info['boundary']:.2f} "
                         "(interpolated).")
    rec = aggregated[C.DIM_ROBUSTNESS]["gps_recovery"]
    if rec["outages"]:
        mean = rec["recovery_s"]["value"]
        timing = (f", mean recovery {fmt_estimate(rec['recovery_s'])} s after the outage ended"
                  if mean is not None else "")
        lines.append(f"GPS outages: {rec['recovered']['value']:.0%} of {rec['outages']} "
                     f"recovered{timing}.")
    for d in aggregated[C.DIM_ROBUSTNESS].get("disturbance_recovery", ()):
        if not d["disturbed"]:
            lines.append(f"Disturbance {d['event']} on {d['task']} (intensity "
                         f"{d['intensity']:g}) never fired: the trigger stage was never "
                         "reached.")
            continue
        steps = d["steps_to_recover"]
        timing = (f"; median {fmt_estimate(steps)} steps to regain stage progress"
                  if steps["value"] is not None else "; stage progress never regained")
        lines.append(f"Disturbance {d['event']} on {d['task']} (intensity {d['intensity']:g}):"
                     f" {d['recovery_rate']['value']:.0%} of {d['disturbed']} disturbed "
                     f"episodes still delivered{timing}.")
    return lines
