"""Robustness hardening: perturb the observations of a share of each batch, on the fly.

Two noise models (``TrainConfig.hardening_noise``):

- ``sensor_noise`` (default): the evaluation's sensor-noise family in its physical units
  (:class:`~clawgym_ros.perturbations.sensor_noise.SensorNoiseConfig`): each perturbed row
  draws an intensity uniformly in [0, ``hardening_intensity``] and every feature gets gaussian
  noise of ``intensity x`` its per-feature std (rad, rad/s, m; see :func:`sensor_noise_std`).
  The policy is trained on the noise it will be evaluated under, not on a guess of its size.
- ``feature_std``: sizes in units of each feature's standard deviation in the dataset
  (scale-free across keys): noise, independent gaussian per feature; bias, one gaussian offset
  per observation key and sample, shared by the key's features (a calibration error). On
  pick_place, 0.1 feature std is ~0.05 rad on the joints, 15x the evaluation's noise at
  intensity 0.3, and it took the policy's nominal success from 0.55 to 0
  (docs/results/2026-12-02-loop-demo-ablation-history.md).

Pure torch; randomness only from the caller's generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from clawgym_ros import constants as C


def hardening_layout(obs_spec: Mapping[str, int],
                     keys: Iterable[str]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Which features are perturbed and which key each belongs to.

    Returns:
        ``(mask, key_index, n_keys)``: float (obs_dim,) mask of perturbed features, long
        (obs_dim,) index of each feature's key among the perturbed keys (0 where unperturbed),
        and the number of perturbed keys present in ``obs_spec``.
    """
    keys = set(keys)
    dim = sum(obs_spec.values())
    mask = torch.zeros(dim)
    key_index = torch.zeros(dim, dtype=torch.long)
    start, n_keys = 0, 0
    for key, width in obs_spec.items():
        if key in keys:
            mask[start:start + width] = 1.0
            key_index[start:start + width] = n_keys
            n_keys += 1
        start += width
    return mask, key_index, n_keys


def perturb_observations(
    obs_n: torch.Tensor,
    count: int,
    layout: tuple[torch.Tensor, torch.Tensor, int],
    noise_std: float,
    bias_std: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """Return ``obs_n`` with its first ``count`` rows perturbed (the input is not modified).

    Args:
        obs_n: normalized observations (B, obs_dim); rows are in random order already.
        count: rows to perturb (the batch's hardening share).
        layout: from :func:`hardening_layout`.
        noise_std: per-feature noise std (units of the feature's std).
        bias_std: per-key offset std (units of the feature's std).
        generator: source of all randomness.
    """
    mask, key_index, n_keys = layout
    if count <= 0 or n_keys == 0 or (noise_std == 0.0 and bias_std == 0.0):
        return obs_n
    dim = obs_n.shape[1]
    noise = torch.randn((count, dim), generator=generator) * noise_std
    bias = torch.randn((count, n_keys), generator=generator)[:, key_index] * bias_std
    out = obs_n.clone()
    out[:count] += (noise + bias) * mask
    return out


def sensor_noise_std(obs_spec: Mapping[str, int], keys: Iterable[str], horizon_s: float,
                     config: object | None = None) -> torch.Tensor:
    """Per-feature std, at sensor-noise intensity 1, of the perturbed ``keys``.

    Each feature's std combines the sample noise and the bias random walk accumulated over an
    episode (rms over ``[0, horizon_s]``: ``walk * sqrt(horizon_s / 2)``) plus any constant
    bias: joint positions and the gripper width from the joint encoder fields (the fingers
    are joints: on the ROS path sensor_noise_node perturbs them and the width is assembled
    from them; the in-process wrapper leaves the width clean), joint velocities from the
    velocity fields, object positions from the pose estimate's position fields and
    quaternion components from its rotation std (a small rotation of angle a moves a unit
    quaternion's components by about a / 2). Keys the sensor-noise family does not reach get
    0. Dropped and stale samples (a repeat of the last value) are not emulated.

    Args:
        obs_spec: observation key -> width, in table column order.
        keys: the keys to perturb.
        horizon_s: episode length the bias walks accumulate over, seconds.
        config: a :class:`~clawgym_ros.perturbations.sensor_noise.SensorNoiseConfig`
            (default: the family's defaults, as the evaluation suites use them).
    """
    from clawgym_ros.perturbations.sensor_noise import SensorNoiseConfig

    cfg = config if config is not None else SensorNoiseConfig()
    walk = math.sqrt(horizon_s / 2.0)

    def combined(std: float, bias: float = 0.0, bias_walk: float = 0.0) -> float:
        return math.sqrt(std ** 2 + bias ** 2 + (bias_walk * walk) ** 2)

    joint = combined(cfg.joint_pos_std, cfg.joint_pos_bias, cfg.joint_pos_bias_walk)
    per_key = {C.OBS_JOINT_POS: [joint], C.OBS_GRIPPER: [joint],
               C.OBS_JOINT_VEL: [combined(cfg.joint_vel_std, cfg.joint_vel_bias)],
               C.OBS_OBJECT_POSES: [combined(cfg.pose_position_std, cfg.pose_position_bias,
                                             cfg.pose_position_bias_walk)] * 3
               + [cfg.pose_orientation_std / 2.0] * 4}
    keys = set(keys)
    parts = []
    for key, width in obs_spec.items():
        pattern = per_key.get(key, [0.0]) if key in keys else [0.0]
        parts.append(torch.tensor((pattern * (width // len(pattern) + 1))[:width],
                                  dtype=torch.float32))
    return torch.cat(parts) if parts else torch.zeros(0)


def perturb_sensor_noise(obs: torch.Tensor, count: int, std: torch.Tensor,
                         max_intensity: float, generator: torch.Generator) -> torch.Tensor:
    """Return raw ``obs`` with its first ``count`` rows perturbed by the sensor-noise model
    (the input is not modified): row intensity ~ U[0, max_intensity], noise ~ N(0, (intensity
    x std)^2) per feature. ``std`` from :func:`sensor_noise_std`."""
    if count <= 0 or max_intensity <= 0.0 or not bool((std > 0).any()):
        return obs
    intensity = torch.rand((count, 1), generator=generator) * max_intensity
    noise = torch.randn((count, obs.shape[1]), generator=generator) * std * intensity
    out = obs.clone()
    out[:count] += noise.to(out.dtype)
    return out
