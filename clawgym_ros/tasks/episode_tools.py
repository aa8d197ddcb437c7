"""Helpers shared by the gps_nav and pill_handover experts: perturbations from an episode
spec, contact measurements, and resampling of per-step series for the evaluator.

Pure (MuJoCo and NumPy only, no rclpy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.perturbations import make
from clawgym_ros.perturbations.base import SEED_MAX, Perturbation
from clawgym_ros.perturbations.wrappers import wrap
from clawgym_ros.synthesis.episode import EpisodeRecorder, EpisodeSpec


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


def spec_env(env_id: str, spec: EpisodeSpec, template: str) -> gym.Env:
    """The env an episode of ``spec`` runs in: ``env_id`` for ``template`` (Dict interface),
    wrapped with the spec's perturbations (family, intensity, seed, and the config overrides
    ``spec.options["perturbation"]``: family -> fields). Closed when used in ``with``."""
    overrides = {k: dict(v) for k, v in dict(spec.options.get("perturbation", {})).items()}
    return wrapped_env(env_id, perturbations_for(spec.family, spec.intensity, spec.seed,
                                                 overrides), template=template)


def start_episode(env: gym.Env, spec: EpisodeSpec, template: str,
                  joint_names: Sequence[str]) -> tuple[Any, dict[str, Any], EpisodeRecorder]:
    """Reset ``env`` for ``spec`` and ``template``: (observation, info, a recorder of the
    episode with the perturbation parameters the reset drew)."""
    obs, info = env.reset(seed=spec.seed, options={"template": template})
    rec = EpisodeRecorder(spec, joint_names, template=template,
                          perturbation_params=perturbation_params(info))
    return obs, info, rec


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
