"""Torch policies for behaviour cloning, and the adapter to the evaluator's Policy protocol.

Two architectures share one module layout, so that parameter groups mean the same everywhere:

- ``mlp`` (default): state vector -> ``encoder`` (Linear + ReLU, width ``hidden[0]``) ->
  ``trunk`` (Linear + ReLU per further width) -> ``head`` (Linear to ``chunk * act_dim``).
- ``cnn``: camera image -> ``encoder`` (3 strided convs, 4x4 average pool, Linear + ReLU to
  ``hidden[0]``), concatenated with the normalized state vector -> ``trunk`` -> ``head``.

Parameter groups (freezable by name): ``encoder``, ``trunk``, ``head``. Normalization statistics
of observations and actions are buffers (saved with the weights, never trained): the network
sees normalized observations and predicts normalized actions; :class:`TorchPolicy` converts.
With ``chunk = k`` the head predicts k consecutive actions; TorchPolicy executes them from a
queue and queries the network again when the queue is empty.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError, ConfigError

#: Side of the average-pooled feature map of the CNN encoder.
_POOL = 4


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """Everything needed to rebuild a policy's modules (stored in checkpoint config.json)."""

    type: str
    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = (256, 256)
    chunk: int = 1
    image_shape: tuple[int, int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden"] = list(self.hidden)
        data["image_shape"] = None if self.image_shape is None else list(self.image_shape)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicySpec:
        shape = data.get("image_shape")
        return cls(type=str(data["type"]), obs_dim=int(data["obs_dim"]),
                   act_dim=int(data["act_dim"]), hidden=tuple(int(h) for h in data["hidden"]),
                   chunk=int(data["chunk"]),
                   image_shape=None if shape is None else tuple(int(s) for s in shape))


class ImageEncoder(nn.Module):
    """Small conv net: uint8 (B, H, W, 3) images -> (B, out_dim) features."""

    def __init__(self, out_dim: int):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d((_POOL, _POOL)),
        )
        self.proj = nn.Sequential(nn.Flatten(), nn.Linear(32 * _POOL * _POOL, out_dim), nn.ReLU())

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = image.permute(0, 3, 1, 2).float().div(255.0).sub(0.5)
        return self.proj(self.convs(x))


class BCPolicy(nn.Module):
    """Observation (normalized) [+ image] -> chunk of normalized actions (B, chunk, act_dim)."""

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None):
        super().__init__()
        if spec.type not in (C.POLICY_MLP, C.POLICY_CNN):
            raise ConfigError("policy", spec.type, f"{C.POLICY_MLP!r} or {C.POLICY_CNN!r}")
        if spec.type == C.POLICY_CNN and spec.image_shape is None:
            raise ClawgymError("a cnn policy needs camera images; the training table has none")
        self.spec = spec
        stats = stats or {}
        for name, dim, fill in (("obs_mean", spec.obs_dim, 0.0), ("obs_std", spec.obs_dim, 1.0),
                                ("action_mean", spec.act_dim, 0.0),
                                ("action_std", spec.act_dim, 1.0)):
            value = stats.get(name)
            tensor = torch.full((dim,), fill) if value is None else \
                torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(dim)
            self.register_buffer(name, tensor.clone())
        width = spec.hidden[0]
        if spec.type == C.POLICY_MLP:
            self.encoder: nn.Module = nn.Sequential(nn.Linear(spec.obs_dim, width), nn.ReLU())
            trunk_in = width
        else:
            self.encoder = ImageEncoder(width)
            trunk_in = width + spec.obs_dim
        layers: list[nn.Module] = []
        for out in spec.hidden[1:]:
            layers += [nn.Linear(trunk_in, out), nn.ReLU()]
            trunk_in = out
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(trunk_in, spec.chunk * spec.act_dim)

    def normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.obs_mean) / self.obs_std

    def normalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return (action - self.action_mean) / self.action_std

    def unnormalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return action * self.action_std + self.action_mean

    def forward(self, obs_n: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """Normalized observations (B, obs_dim) [+ uint8 images] -> (B, chunk, act_dim)."""
        if self.spec.type == C.POLICY_MLP:
            x = self.encoder(obs_n)
        else:
            if image is None:
                raise ClawgymError("cnn policy called without an image")
            x = torch.cat([self.encoder(image), obs_n], dim=1)
        return self.head(self.trunk(x)).view(-1, self.spec.chunk, self.spec.act_dim)


def build_policy(spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 seed: int | None = None) -> BCPolicy:
    """Build a policy; with ``seed``, its initial weights depend only on the seed."""
    if seed is None:
        return BCPolicy(spec, stats)
    devices: list[Any] = []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return BCPolicy(spec, stats)


def parameter_groups(policy: BCPolicy) -> dict[str, list[tuple[str, nn.Parameter]]]:
    """Named parameter groups: ``{"encoder": [(name, param), ...], "trunk": ..., "head": ...}``.

    The group is the first component of the parameter name; every parameter is in exactly one.
    """
    groups: dict[str, list[tuple[str, nn.Parameter]]] = {
        C.PARAM_GROUP_ENCODER: [], C.PARAM_GROUP_TRUNK: [], C.PARAM_GROUP_HEAD: []}
    for name, param in policy.named_parameters():
        groups[name.split(".", 1)[0]].append((name, param))
    return groups


def freeze(policy: BCPolicy, groups: Sequence[str]) -> list[str]:
    """Set ``requires_grad = False`` on the parameters of ``groups``.

    Returns:
        Names of the parameters that remain trainable.

    Raises:
        ConfigError: for an unknown group, or when nothing would remain trainable.
    """
    named = parameter_groups(policy)
    for i, group in enumerate(groups):
        if group not in named:
            raise ConfigError(f"frozen_groups[{i}]", group, "one of " + ", ".join(named))
        for _, param in named[group]:
            param.requires_grad_(False)
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    if not trainable:
        raise ConfigError("frozen_groups", list(groups), "leaving at least one group trainable")
    return trainable


def flatten_obs(obs: Mapping[str, Any], obs_spec: Mapping[str, int]) -> np.ndarray:
    """Concatenate the observation keys of ``obs_spec`` (in its order) into one float32 vector.

    Raises:
        ClawgymError: a key is missing or has the wrong number of values.
    """
    parts = []
    for key, width in obs_spec.items():
        if key not in obs:
            raise ClawgymError(f"observation lacks key {key!r}; the policy expects "
                               + ", ".join(obs_spec))
        value = np.asarray(obs[key], dtype=np.float32).reshape(-1)
        if value.size != width:
            raise ClawgymError(f"observation {key!r} has {value.size} values, expected {width}")
        parts.append(value)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def unflatten_action(vector: np.ndarray, action_spec: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Split an action vector into the keys of ``action_spec`` (float64 arrays)."""
    out, start = {}, 0
    for key, width in action_spec.items():
        out[key] = np.asarray(vector[start:start + width], dtype=np.float64)
        start += width
    return out


class TorchPolicy:
    """A trained :class:`BCPolicy` behind the evaluator's Policy protocol.

    Args:
        model: the network (put in eval mode).
        obs_spec: observation key -> width, in the order the network was trained on.
        action_spec: action key -> width.
        image_key: observation key holding the camera image (cnn policies).
    """

    def __init__(self, model: BCPolicy, obs_spec: Mapping[str, int],
                 action_spec: Mapping[str, int], image_key: str = C.OBS_IMAGE):
        self.model = model.eval()
        self.obs_spec = dict(obs_spec)
        self.action_spec = dict(action_spec)
        self.image_key = image_key
        self._queue: deque[np.ndarray] = deque()

    def reset(self) -> None:
        """Forget queued actions of a chunk (called at every episode start)."""
        self._queue.clear()

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Next action for ``obs`` as ``{ACT_*: array}``."""
        if not self._queue:
            state = torch.from_numpy(flatten_obs(obs, self.obs_spec)).unsqueeze(0)
            image = None
            if self.model.spec.type == C.POLICY_CNN:
                if self.image_key not in obs:
                    raise ClawgymError(f"observation lacks the camera image {self.image_key!r}")
                image = torch.from_numpy(np.ascontiguousarray(obs[self.image_key],
                                                              dtype=np.uint8)).unsqueeze(0)
            with torch.inference_mode():
                chunk = self.model.unnormalize_action(
                    self.model(self.model.normalize_obs(state), image))[0]
            self._queue.extend(chunk.numpy().astype(np.float64))
        return unflatten_action(self._queue.popleft(), self.action_spec)
