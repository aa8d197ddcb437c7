"""Helpers shared by the gps_nav and pill_handover experts: perturbations from an episode
spec, contact measurements, and resampling of per-step series for the evaluator.

Pure (MuJoCo and NumPy only, no rclpy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.perturbations import make
from clawgym_ros.perturbations.base import SEED_MAX, Perturbation
from clawgym_ros.perturbations.wrappers import wrap


def perturbations_for(family: str, intensity: float, seed: int,
                      overrides: Mapping[str, Mapping[str, Any]] | None = None
                      ) -> list[Perturbation]:
    """Perturbation objects of an episode: ``family`` may join several with ``+``.

    Args:
        family: ``none``, one family, or ``a+b``.
        intensity: applied to every component.
        seed: perturbation seed (the episode seed; reduced into the allowed range).
        overrides: family -> config field overrides (e.g. outage timing for gps_dropout).

    Returns:
        The perturbations (empty for ``none`` or zero intensity).
    """
    out: list[Perturbation] = []
    if family in ("", C.FAMILY_NONE) or intensity <= 0.0:
        return out
    for name in family.split("+"):
        params = {"intensity": float(intensity), "seed": int(seed) % SEED_MAX}
        params.update(dict((overrides or {}).get(name, {})))
        out.append(make(name, params))
    return out


def wrapped_env(env_id: str, perturbations: Iterable[Perturbation], **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)`` wrapped with the perturbations (canonical order); the
    env's Dict interface (``control_mode="dict"``) unless ``kwargs`` say otherwise."""
    env = gym.make(env_id, **{"control_mode": C.CONTROL_DICT, **kwargs})
    perturbations = list(perturbations)
    return wrap(env, perturbations) if perturbations else env


def perturbation_params(info: Mapping[str, Any]) -> dict[str, float]:
    """Flatten ``info["perturbations"]`` records into ``{"family.param": value}``."""
    out: dict[str, float] = {}
    for family, record in dict(info.get(C.INFO_PERTURBATIONS, {})).items():
        for key, value in dict(record.get("parameters", {})).items():
            out[f"{family}.{key}"] = float(value)
    return out


def resample(times: np.ndarray, values: np.ndarray, rate_hz: float) -> np.ndarray:
    """Linear resampling of a per-step series onto a fixed ``rate_hz`` grid from times[0]."""
    times = np.asarray(times, dtype=float)
    values = np.asarray(values, dtype=float)
    if times.size < 2:
        return values.copy()
    grid = np.arange(times[0], times[-1] + 1e-9, 1.0 / rate_hz)
    if values.ndim == 1:
        return np.interp(grid, times, values)
    return np.stack([np.interp(grid, times, values[:, k]) for k in range(values.shape[1])],
                    axis=1)
