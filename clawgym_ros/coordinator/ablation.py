"""Closed loop vs open loop at equal budget: paired differences per dimension (pure).

For each seed both arms run the same loop config (same iterations, episodes and training steps
per iteration, same evaluation suite and evaluation seed); they differ only in ``mode``.
The difference of the final scores ``closed - open`` is paired by seed; its mean gets a
Student t interval (df = K - 1) and a seeded percentile bootstrap interval over seeds.

Two comparisons: the loops' own last reports (the suite the closed loop steered by: 6
episodes per cell in the pick_place loops), and a final evaluation of both arms' last
checkpoints on the same suite with more episodes and a seed no loop used
(``constants.ABLATION_FINAL_EPISODES``, ``constants.ABLATION_FINAL_SEED``): the closed loop's
decisions were taken on the first, so only the second is free of selection on its episodes.

On the final evaluation :func:`design_figures` also computes the design's three headline
figures (``constants.DESIGN_*``) from the reports' per-episode records, pooled over seeds with
a paired bootstrap over seeds, each beside its bar.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C


def t_interval(values: Sequence[float], confidence: float = 0.95
               ) -> tuple[float, float, float]:
    """(mean, low, high) of a Student t interval; a single value gives an infinite interval."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, -math.inf, math.inf
    half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1)
                 / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def bootstrap_interval(values: Sequence[float], seed: int = 0, samples: int = 10000,
                       confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resampling seeds with replacement)."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_differences(closed: Mapping[int, Mapping[str, Any]],
                       open_: Mapping[int, Mapping[str, Any]],
                       confidence: float = 0.95) -> dict[str, Any]:
    """Per dimension: per-seed values of both arms, paired differences and their intervals.

    Args:
        closed, open_: seed -> final report ``scores`` (``{dim: {"value", ...}}``).

    Returns:
        ``{dim: {"closed", "open", "diff", "mean_diff", "t_ci", "bootstrap_ci", "n"}}``; a
        dimension without values in both arms for a seed leaves that seed out.
    """
    out: dict[str, Any] = {}
    seeds = sorted(set(closed) & set(open_))
    for dim in C.DIMENSIONS:
        pairs = [(s, closed[s][dim]["value"], open_[s][dim]["value"]) for s in seeds
                 if closed[s].get(dim, {}).get("value") is not None
                 and open_[s].get(dim, {}).get("value") is not None]
        entry: dict[str, Any] = {"seeds": [p[0] for p in pairs],
                                 "closed": [p[1] for p in pairs],
                                 "open": [p[2] for p in pairs],
                                 "diff": [p[1] - p[2] for p in pairs], "n": len(pairs)}
        if pairs:
            mean, lo, hi = t_interval(entry["diff"], confidence)
            entry["mean_diff"] = mean
            entry["t_ci"] = [lo, hi]
            entry["bootstrap_ci"] = list(bootstrap_interval(entry["diff"],
                                                            confidence=confidence))
        else:
            entry.update(mean_diff=None, t_ci=[None, None], bootstrap_ci=[None, None])
        out[dim] = entry
    return out


#: The groups of episodes the design's figures use (:func:`cell_counts`).
GROUPS: tuple[str, ...] = ("nominal", "combined", "in_distribution", "held_out")


def cell_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``{group: [successes, episodes]}`` of a report's per-episode records: ``nominal``
    (training templates, no perturbation), ``combined`` (training templates, cells that combine
    two or more perturbation families, e.g. lighting + sensor noise), ``in_distribution``
    (every training-template cell) and ``held_out`` (held-out templates)."""
    counts = {group: [0, 0] for group in GROUPS}
    for rec in records:
        if rec["split"] == C.SPLIT_TRAIN:
            groups = ["in_distribution"]
            if rec["family"] == C.FAMILY_NONE:
                groups.append("nominal")
            elif "+" in rec["family"]:
                groups.append("combined")
        else:
            groups = ["held_out"]
        for group in groups:
            counts[group][0] += bool(rec["success"])
            counts[group][1] += 1
    return counts


def _rate(counts: np.ndarray, group: str) -> np.ndarray:
    """Success rate of ``group`` from summed counts ``[..., group, (successes, episodes)]``
    (nan where the group has no episode)."""
    pair = counts[..., GROUPS.index(group), :]
    with np.errstate(divide="ignore", invalid="ignore"):
        return pair[..., 0] / pair[..., 1]


def _figures(closed: np.ndarray, open_: np.ndarray) -> dict[str, np.ndarray]:
    """The design's figures from seed-summed counts of both arms (any leading shape)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "functional_gain": _rate(closed, "nominal") / _rate(open_, "nominal") - 1.0,
            "generalization_ratio": ((_rate(closed, "held_out") / _rate(closed, "in_distribution"))
                                     / (_rate(open_, "held_out")
                                        / _rate(open_, "in_distribution"))),
            "combined_stability": _rate(closed, "combined") / _rate(closed, "nominal"),
            "open_combined_stability": _rate(open_, "combined") / _rate(open_, "nominal"),
        }


def _finite(x: float) -> float | None:
    """``x`` as a float, None where it is not finite (an unbounded interval end)."""
    return float(x) if math.isfinite(x) else None


#: figure -> its bar (the design's value, ``constants.DESIGN_*``)
DESIGN_BARS: dict[str, float] = {"functional_gain": C.DESIGN_FUNCTIONAL_GAIN,
                                 "generalization_ratio": C.DESIGN_GENERALIZATION_RATIO,
                                 "combined_stability": C.DESIGN_COMBINED_STABILITY}


def design_figures(closed: Mapping[int, Mapping[str, Sequence[int]]],
                   open_: Mapping[int, Mapping[str, Sequence[int]]], seed: int = 0,
                   samples: int = 10000, confidence: float = 0.95) -> dict[str, Any]:
    """The design's three figures, closed arm against open arm, from per-seed
    :func:`cell_counts` of the final evaluation; counts are pooled over the seeds both arms
    have (a ratio of sums), and the interval is a percentile bootstrap resampling those seeds
    with their pairs.

    Returns:
        ``{figure: {"value", "bootstrap_ci", "share_at_bar", "bar", "met"}}`` for
        ``functional_gain`` (closed / open nominal success - 1), ``generalization_ratio``
        (closed held-out / in-distribution success over the open arm's) and
        ``combined_stability`` (closed combined-cell / nominal success; ``open_value``: the
        open arm's), plus ``"counts"``: the pooled counts per arm. A figure the suite cannot
        give (no combined cell, no held-out template, a zero denominator) has value None,
        ``met`` False and a ``note`` saying why; ``share_at_bar`` is the share of resamples
        at or above the bar (those with a figure; an infinite ratio counts as above), an
        interval end None where it is unbounded.
    """
    seeds = sorted(set(closed) & set(open_))
    if not seeds:
        raise ValueError("design_figures needs at least one seed present in both arms")

    def table(arm):
        return np.array([[arm[s][g] for g in GROUPS] for s in seeds], dtype=float)

    c, o = table(closed), table(open_)
    point = _figures(c.sum(axis=0), o.sum(axis=0))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(seeds), size=(samples, len(seeds)))
    boot = _figures(c[idx].sum(axis=1), o[idx].sum(axis=1))
    alpha = (1 - confidence) / 2
    out: dict[str, Any] = {}
    for name, bar in DESIGN_BARS.items():
        # A resample whose open arm never succeeds held out while the closed arm does has an
        # infinite ratio: above any bar, kept; one with nothing to divide (nan) is left out.
        defined = boot[name][~np.isnan(boot[name])]
        entry: dict[str, Any] = {"value": _finite(point[name]), "bar": bar}
        if math.isinf(point[name]):
            entry["note"] = "unbounded: the open arm's part of it is 0, the closed arm's not"
        elif math.isnan(point[name]):
            entry["note"] = "undefined: nothing to divide in either arm"
        if len(defined):
            with np.errstate(invalid="ignore"):          # inf - inf between two inf ends: nan
                ends = np.quantile(defined, [alpha, 1 - alpha])
            entry["bootstrap_ci"] = [_finite(ends[0]), _finite(ends[1])]
            entry["share_at_bar"] = float(np.mean(defined >= bar))
        else:
            entry.update(bootstrap_ci=[None, None], share_at_bar=None)
        entry["met"] = entry["value"] is not None and entry["value"] >= bar
        out[name] = entry
    out["combined_stability"]["open_value"] = _finite(point["open_combined_stability"])
    out["counts"] = {label: {g: [int(v) for v in arm.sum(axis=0)[i]]
                             for i, g in enumerate(GROUPS)}
                     for label, arm in (("closed", c), ("open", o))}
    out["counts"]["seeds"] = seeds
    return out


def format_design_figures(figures: Mapping[str, Any]) -> list[str]:
    """Text lines: each design figure, its bootstrap interval and its bar, met or not."""
    def show(name, v):
        if v is None:
            return "n/a"
        return f"{v:+.1%}" if name == "functional_gain" else f"{v:.3f}"

    lines = [f"{'figure':<21} {'value':>8}  {'95% bootstrap CI':<21} {'bar':>7}  point >= bar"]
    for name, bar in DESIGN_BARS.items():
        e = figures[name]
        lo, hi = e["bootstrap_ci"]
        ci = f"[{show(name, lo)}, {'inf' if hi is None and lo is not None else show(name, hi)}]"
        if e["value"] is None:      # no figure to hold against the bar: say why
            holds = f"no ({e.get('note', 'no value')})"
        else:
            holds = ("yes" if e["met"] else "no") + (
                f" ({e['share_at_bar']:.0%} of resamples at the bar)"
                if e["share_at_bar"] is not None else "")
        extra = (f"  open {show(name, e['open_value'])}" if "open_value" in e else "")
        lines.append(f"{name:<21} {show(name, e['value']):>8}  {ci:<21} {show(name, bar):>7}  "
                     f"{holds}{extra}")
    return lines


def final_suite_yaml(suite_path: str | Path, episodes_per_cell: int,
                     held_out_episodes: int = 0) -> str:
    """The loop's evaluation suite with ``episodes_per_cell`` episodes per cell (and
    ``held_out_episodes`` per held-out template cell, 0 = the same), as YAML text (the
    ablation's final evaluation: same cells, more episodes, another seed).

    Raises:
        ConfigError: unreadable suite, ``episodes_per_cell`` < 1 or ``held_out_episodes`` < 0.
    """
    import yaml

    from clawgym_ros.config import check_int, load_yaml
    from clawgym_ros.evaluation.suites import parse_suite

    check_int("--final-episodes", episodes_per_cell, 1, 10_000)
    check_int("--final-held-out-episodes", held_out_episodes, 0, 10_000)
    data = load_yaml(suite_path)
    parse_suite(data, str(suite_path))          # the source is a valid suite (a mapping)
    held_out = f", {held_out_episodes} per held-out template cell" if held_out_episodes else ""
    data = dict(data, name=f"{data.get('name', 'suite')}_final",
                episodes_per_cell=int(episodes_per_cell),
                description=f"final evaluation of `clawgym ablate`: {suite_path} with "
                            f"{episodes_per_cell} episodes per cell{held_out}")
    data.pop("held_out_episodes_per_cell", None)
    if held_out_episodes:
        data["held_out_episodes_per_cell"] = int(held_out_episodes)
    text = yaml.safe_dump(data, sort_keys=False)
    parse_suite(yaml.safe_load(text), "final suite")
    return text


def format_table(result: Mapping[str, Any], labels: Sequence[str] = ("closed", "open")
                 ) -> list[str]:
    """Text lines: one row per dimension (the arms' means, difference, intervals); ``labels``
    name the two arms (:func:`paired_differences`' first and second)."""
    def ci(pair, n):
        # One seed has no t interval (its bounds are infinite): say so.
        if not all(math.isfinite(v) for v in pair):
            return f"n/a ({n} seed)"
        return f"[{pair[0]:+.3f}, {pair[1]:+.3f}]"

    lines = [f"{'dimension':<15} {labels[0]:>7} {labels[1]:>7} {'diff':>8}  {'95% t CI':<19} "
             f"{'95% bootstrap CI':<19} n"]
    for dim, e in result.items():
        if not e["n"]:
            lines.append(f"{dim:<15} {'n/a':>7} {'n/a':>7} {'n/a':>8}")
            continue
        lines.append(f"{dim:<15} {np.mean(e['closed']):7.3f} {np.mean(e['open']):7.3f} "
                     f"{e['mean_diff']:+8.3f}  {ci(e['t_ci'], e['n']):<19} "
                     f"{ci(e['bootstrap_ci'], e['n']):<19} "
                     f"{e['n']}")
    return lines
