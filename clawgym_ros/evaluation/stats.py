"""Interval estimates used by the metrics: Wilson, Katz log ratio, seeded bootstrap.

Choices (documented in docs/notes/evaluation.md):

- a success rate gets the Wilson score interval (good coverage for small n and rates near 0
  or 1, never outside [0, 1]);
- a ratio of two success rates (stability, generalization) gets the Katz log interval; when a
  count is 0 or equal to n, 0.5 is added to both successes and failures of that group for the
  interval only (the Haldane-Anscombe correction), so the interval stays finite;
- anything else (a mean of ratios, a mean of scores) gets a percentile bootstrap from a
  generator seeded by the metrics config, so the same data always give the same interval.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as _st


def z_value(confidence: float) -> float:
    """Two-sided normal quantile for ``confidence`` (1.959964 for 0.95)."""
    return float(_st.norm.ppf(0.5 + confidence / 2.0))


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A value with its confidence interval and the number of observations behind it."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict[str, float | int | None]:
        return {"value": _r(self.value), "ci": [_r(self.low), _r(self.high)], "n": int(self.n)}


def _r(x: float | None) -> float | None:
    """Round for the report (12 significant digits: stable across platforms' last-bit noise)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.12g}")


def wilson(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """Success rate with the Wilson score interval.

    Args:
        successes: number of successes, 0 <= successes <= n.
        n: number of trials.
        confidence: two-sided level.

    Returns:
        The rate and interval; value/low/high are None when n == 0.
    """
    if n == 0:
        return Estimate(None, None, None, 0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must be in [0, n={n}]")
    z = z_value(confidence)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The interval contains p exactly (rounding can leave centre + half a hair below 1).
    return Estimate(p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), n)


def katz_ratio(
    x1: int, n1: int, x0: int, n0: int, confidence: float = 0.95
) -> Estimate:
    """Ratio of two rates (x1/n1) / (x0/n0) with the Katz log interval.

    Returns:
        value None when a group is empty or the reference rate is 0; ``n`` is n1 + n0.
    """
    n = n1 + n0
    if n1 == 0 or n0 == 0 or x0 == 0:
        return Estimate(None, None, None, n)
    ratio = (x1 / n1) / (x0 / n0)

    def corrected(x: int, m: int) -> tuple[float, float]:
        return (x + 0.5, m + 1.0) if x in (0, m) else (float(x), float(m))

    a, m1 = corrected(x1, n1)
    b, m0 = corrected(x0, n0)
    se = math.sqrt(1 / a - 1 / m1 + 1 / b - 1 / m0)
    centre = math.log((a / m1) / (b / m0))
    z = z_value(confidence)
    # The continuity correction moves the interval off an estimate of 0 (x1 = 0): the lower
    # bound is then 0, and the interval always contains the estimate.
    low = 0.0 if x1 == 0 else min(ratio, math.exp(centre - z * se))
    return Estimate(ratio, low, max(ratio, math.exp(centre + z * se)), n)


def bootstrap_mean(
    values: Sequence[float], rng: np.random.Generator, samples: int, confidence: float = 0.95
) -> Estimate:
    """Mean of ``values`` with a percentile-bootstrap interval (resampling the values)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(None, None, None, 0)
    idx = rng.integers(0, data.size, size=(samples, data.size))
    means = data[idx].mean(axis=1)
    lo, hi = np.quantile(means, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return Estimate(float(data.mean()), float(lo), float(hi), int(data.size))


def bootstrap_mean_ratio(
    cells: Sequence[tuple[int, int]],
    reference: tuple[int, int],
    rng: np.random.Generator,
    samples: int,
    confidence: float = 0.95,
) -> Estimate:
    """Mean over cells of (cell rate / reference rate), with a stratified bootstrap interval.

    Each group's success count is redrawn as Binomial(n, observed rate), which is exactly
    resampling its Bernoulli outcomes with replacement. Replicates whose reference rate is 0
    are dropped.

    Args:
        cells: (successes, n) of each perturbed cell.
        reference: (successes, n) of the reference (nominal) cell.
    """
    cells = [(x, n) for x, n in cells if n > 0]
    x0, n0 = reference
    total = sum(n for _, n in cells) + n0
    if not cells or n0 == 0 or x0 == 0:
        return Estimate(None, None, None, total)
    point = float(np.mean([(x / n) / (x0 / n0) for x, n in cells]))
    ref = rng.binomial(n0, x0 / n0, size=samples) / n0
    ratios = np.empty((len(cells), samples))
    for i, (x, n) in enumerate(cells):
        ratios[i] = rng.binomial(n, x / n, size=samples) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = (ratios / ref).mean(axis=0)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return Estimate(point, None, None, total)
    lo, hi = np.quantile(reps, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return Estimate(point, float(lo), float(hi), total)
