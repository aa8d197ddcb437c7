"""Robustness hardening: perturb the observations of a share of each batch, on the fly.

Perturbations act on normalized observations, so their sizes are in units of each feature's
standard deviation in the dataset (scale-free across joints, grippers and object poses):

- noise: independent gaussian per feature (sensor noise);
- bias: one gaussian offset per observation key and sample, shared by the key's features
  (a calibration error, e.g. all joint readings offset together).

Pure torch; randomness only from the caller's generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch


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
