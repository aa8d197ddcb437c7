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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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


def final_suite_yaml(suite_path: str | Path, episodes_per_cell: int) -> str:
    """The loop's evaluation suite with ``episodes_per_cell`` episodes per cell, as YAML text
    (the ablation's final evaluation: same cells, more episodes, another seed).

    Raises:
        ConfigError: unreadable suite, or ``episodes_per_cell`` < 1.
    """
    import yaml

    from clawgym_ros.config import check_int, load_yaml
    from clawgym_ros.evaluation.suites import parse_suite

    check_int("--final-episodes", episodes_per_cell, 1, 10_000)
    data = load_yaml(suite_path)
    parse_suite(data, str(suite_path))          # the source is a valid suite (a mapping)
    data = dict(data, name=f"{data.get('name', 'suite')}_final",
                episodes_per_cell=int(episodes_per_cell),
                description=f"final evaluation of `clawgym ablate`: {suite_path} with "
                            f"{episodes_per_cell} episodes per cell")
    text = yaml.safe_dump(data, sort_keys=False)
    parse_suite(yaml.safe_load(text), "final suite")
    return text


def format_table(result: Mapping[str, Any], labels: Sequence[str] = ("closed", "open")
                 ) -> list[str]:
    """Text lines: one row per dimension (the arms' means, difference, intervals); ``labels``
    name the two arms (:func:`paired_differences`' first and second)."""
    lines = [f"{'dimension':<15} {labels[0]:>7} {labels[1]:>7} {'diff':>8}  {'95% t CI':<19} "
             f"{'95% bootstrap CI':<19} n"]
    for dim, e in result.items():
        if not e["n"]:
            lines.append(f"{dim:<15} {'n/a':>7} {'n/a':>7} {'n/a':>8}")
            continue

        def ci(pair):
            return f"[{pair[0]:+.3f}, {pair[1]:+.3f}]"

        lines.append(f"{dim:<15} {np.mean(e['closed']):7.3f} {np.mean(e['open']):7.3f} "
                     f"{e['mean_diff']:+8.3f}  {ci(e['t_ci']):<19} {ci(e['bootstrap_ci']):<19} "
                     f"{e['n']}")
    return lines
