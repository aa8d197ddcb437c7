"""Torch policies for behaviour cloning: the :class:`PolicyModel` contract, the built-in
types, and the adapter to the evaluator's Policy protocol.

Policy types are registered by name (:mod:`clawgym_ros.training.registry`); the training loop
calls only the contract (build, ``loss``, ``act``). The two built-in types share one module
layout, so that parameter groups mean the same everywhere:

- ``mlp`` (default): state vector -> ``encoder`` (Linear + ReLU, width ``hidden[0]``) ->
  ``trunk`` (Linear + ReLU per further width) -> ``head`` (Linear to ``chunk * act_dim``).
- ``cnn``: camera image (optionally subsampled, :class:`CNNOptions` ``downsample``) ->
  ``encoder`` (3 strided convs, 4x4 average pool, Linear + ReLU to ``hidden[0]``),
  concatenated with the normalized state vector -> ``trunk`` -> ``head``. Trained with image
  augmentation (:meth:`CNNPolicy.augment`: random shifts and brightness).

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
from clawgym_ros.training.options import (  # noqa: F401  (re-exported)
    RELATIVE_BASE_COMMAND,
    RELATIVE_BASE_OBSERVATION,
    RELATIVE_BASES,
    CNNOptions,
    MLPOptions,
)
from clawgym_ros.training.registry import policy_class, register_policy

#: Side of the average-pooled feature map of the CNN encoder.
_POOL = 4
#: Derived observation features (computed inside the policy from its observation keys, so
#: training and acting compute them alike): name -> observation keys they need.
FEATURE_OBJECT_REL_TOOL = "object_rel_tool"    # each object's position minus the tool's (3/obj)
FEATURE_GOAL_REL_TOOL = "goal_rel_tool"        # place goal minus tool position (3)
FEATURE_GOAL_REL_OBJECT = "goal_rel_object"    # place goal minus the first object's position (3)
FEATURE_OBJECT_YAW = "object_yaw"              # sin/cos of 2x and 4x each object's yaw (4/obj)
#: each further object's pose relative to the first object's (11/obj): position difference
#: (3), its x/y part at the millimetre scale, ``d / (|d| + OBJECT_REL_FIRST_SCALE)`` (2), the
#: yaw difference x as sin/cos of 2x and 4x (4) and as ``t / (|t| + k)``, t = tan 2x, with
#: k = 1 and k = OBJECT_REL_FIRST_YAW_SCALE (2: monotone in x over a square's +-45 degrees,
#: the fine one resolving a degree). peg_insert's peg-to-hole offset must be
#: resolved to 0.5 mm and a square peg's yaw to ~1 degree while positions vary over
#: decimetres: differences of normalized absolute poses do not resolve that. Arithmetic only
#: (bit for bit the same in any batch and in numpy).
FEATURE_OBJECT_REL_FIRST = "object_rel_first"
#: scales of the fine parts of ``object_rel_first``: an offset of 3 mm, or a yaw difference
#: of 1.4 degrees (tan 2x = 0.05), maps to 0.5
OBJECT_REL_FIRST_SCALE = 0.003
OBJECT_REL_FIRST_YAW_SCALE = 0.05
FEATURES: dict[str, tuple[str, ...]] = {
    FEATURE_OBJECT_REL_TOOL: (C.OBS_OBJECT_POSES, C.OBS_TOOL_POSE),
    FEATURE_GOAL_REL_TOOL: (C.OBS_PLACE_GOAL, C.OBS_TOOL_POSE),
    FEATURE_GOAL_REL_OBJECT: (C.OBS_PLACE_GOAL, C.OBS_OBJECT_POSES),
    FEATURE_OBJECT_YAW: (C.OBS_OBJECT_POSES,),
    FEATURE_OBJECT_REL_FIRST: (C.OBS_OBJECT_POSES,),
}
#: Derived features whose values depend on how many rows are computed at once (vectorized
#: transcendental functions round differently in a SIMD loop's scalar tail than in its
#: vector body): the trainer featurizes them batch by batch, or in windows of whole SIMD
#: blocks. Every other feature must be row-exact (arithmetic only; a test checks each one),
#: or be listed here, or training in windows would change checkpoint ids.
BATCH_DEPENDENT_FEATURES = frozenset({FEATURE_OBJECT_YAW})


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """Everything needed to rebuild a policy's modules (stored in checkpoint config.json)."""

    type: str
    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = (256, 256)
    chunk: int = 1
    image_shape: tuple[int, int, int] | None = None
    #: derived features (names of :data:`FEATURES`) appended to the observation vector
    features: tuple[str, ...] = ()
    #: ordered (key, width) pairs of the observation vector (needed by ``features``)
    obs_layout: tuple[tuple[str, int], ...] = ()
    #: (action column, observation column, width) triples of action parts predicted relative
    #: to an observation (joint targets relative to the joint positions: ``action_mode`` delta)
    relative: tuple[tuple[int, int, int], ...] = ()
    #: the policy type's own options (its ``Options`` dataclass as a dict; empty = defaults)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        """Width of the network input: observation vector plus derived features."""
        return self.obs_dim + feature_dim(self.features, dict(self.obs_layout))

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hidden"] = list(self.hidden)
        data["image_shape"] = None if self.image_shape is None else list(self.image_shape)
        data["features"] = list(self.features)
        data["obs_layout"] = [[k, w] for k, w in self.obs_layout]
        data["relative"] = [list(r) for r in self.relative]
        # Left out when empty: the spec of a policy without options stays what it was before
        # policy types had options (checkpoint content ids unchanged).
        if not self.options:
            del data["options"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicySpec:
        shape = data.get("image_shape")
        return cls(type=str(data["type"]), obs_dim=int(data["obs_dim"]),
                   act_dim=int(data["act_dim"]), hidden=tuple(int(h) for h in data["hidden"]),
                   chunk=int(data["chunk"]),
                   image_shape=None if shape is None else tuple(int(s) for s in shape),
                   features=tuple(str(f) for f in data.get("features", ())),
                   obs_layout=tuple((str(k), int(w)) for k, w in data.get("obs_layout", ())),
                   relative=tuple((int(a), int(o), int(w))
                                  for a, o, w in data.get("relative", ())),
                   options=dict(data.get("options", {})))


def check_features(features: Sequence[str], obs_spec: Mapping[str, int]) -> None:
    """Refuse unknown feature names and features whose observation keys are missing.

    Raises:
        ConfigError: naming the feature and what it needs.
    """
    for i, name in enumerate(features):
        if name not in FEATURES:
            raise ConfigError(f"features[{i}]", name, "one of " + ", ".join(FEATURES))
        missing = [k for k in FEATURES[name] if k not in obs_spec]
        if missing:
            raise ConfigError(f"features[{i}]", name, "features whose observation keys the "
                              f"policy sees (missing: {', '.join(missing)})")


def feature_dim(features: Sequence[str], obs_spec: Mapping[str, int]) -> int:
    """Number of values the derived ``features`` add."""
    n_obj = obs_spec.get(C.OBS_OBJECT_POSES, 0) // 7
    width = {FEATURE_OBJECT_REL_TOOL: 3 * n_obj, FEATURE_GOAL_REL_TOOL: 3,
             FEATURE_GOAL_REL_OBJECT: 3, FEATURE_OBJECT_YAW: 4 * n_obj,
             FEATURE_OBJECT_REL_FIRST: 11 * max(0, n_obj - 1)}
    return sum(width[f] for f in features)


class Featurizer(nn.Module):
    """Observation vector (B, obs_dim) -> observation vector + derived features (B, input_dim).

    Raw (unnormalized) values in, raw values out; object poses are (x, y, z, qw, qx, qy, qz)
    per object, the tool pose likewise, the place goal (x, y, z).
    """

    def __init__(self, features: Sequence[str], obs_layout: Sequence[tuple[str, int]]):
        super().__init__()
        self.features = tuple(features)
        spec = dict(obs_layout)
        check_features(self.features, spec)
        self.at: dict[str, tuple[int, int]] = {}
        col = 0
        for key, width in obs_layout:
            self.at[key] = (col, width)
            col += width

    def _key(self, obs: Any, key: str) -> Any:
        lo, width = self.at[key]
        return obs[:, lo:lo + width]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._derive(obs, _TORCH_OPS)

    def numpy(self, obs: np.ndarray) -> np.ndarray:
        """:meth:`forward` on a float32 array (B, obs_dim), bit for bit: the same operations
        on the same operands, the arithmetic in numpy (IEEE, rounded alike) and the
        transcendental functions through torch (~4x cheaper per row than torch alone; what
        the RL residual env runs every control step)."""
        return self._derive(obs, _NUMPY_OPS)

    def _derive(self, obs: Any, ops: _Ops) -> Any:
        if not self.features:
            return obs
        parts = [obs]
        batch = obs.shape[0]
        objects = self._key(obs, C.OBS_OBJECT_POSES).reshape(batch, -1, 7) \
            if C.OBS_OBJECT_POSES in self.at else None
        for name in self.features:
            if name == FEATURE_OBJECT_REL_TOOL:
                tool = self._key(obs, C.OBS_TOOL_POSE)[:, None, :3]
                parts.append((objects[:, :, :3] - tool).reshape(batch, -1))
            elif name == FEATURE_GOAL_REL_TOOL:
                parts.append(self._key(obs, C.OBS_PLACE_GOAL)
                             - self._key(obs, C.OBS_TOOL_POSE)[:, :3])
            elif name == FEATURE_GOAL_REL_OBJECT:
                parts.append(self._key(obs, C.OBS_PLACE_GOAL) - objects[:, 0, :3])
            elif name == FEATURE_OBJECT_REL_FIRST:
                parts.append(_relative_to_first(objects, ops).reshape(batch, -1))
            else:
                w, x, y, z = (objects[:, :, i] for i in range(3, 7))
                yaw = ops.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
                yaw2, yaw4 = 2 * yaw, 4 * yaw
                parts.append(ops.stack([ops.sin(yaw2), ops.cos(yaw2), ops.sin(yaw4),
                                        ops.cos(yaw4)]).reshape(batch, -1))
        return ops.cat(parts)


def _relative_to_first(objects: Any, ops: _Ops) -> Any:
    """``object_rel_first`` of object poses (B, n, 7): (B, n - 1, 11)."""
    rel = objects[:, 1:, :3] - objects[:, :1, :3]
    fine = rel[:, :, :2] / (abs(rel[:, :, :2]) + OBJECT_REL_FIRST_SCALE)
    w, x, y, z = (objects[:, :, i] for i in range(3, 7))
    # Heading (cos yaw, sin yaw) of each object from its quaternion (of unit length for an
    # upright object; not normalized: numpy's float32 sqrt differs from torch's in the last bit)
    hx, hy = 1 - 2 * (y * y + z * z), 2 * (w * z + x * y)
    c1 = hx[:, 1:] * hx[:, :1] + hy[:, 1:] * hy[:, :1]     # cos of the yaw difference
    s1 = hy[:, 1:] * hx[:, :1] - hx[:, 1:] * hy[:, :1]     # sin
    c2, s2 = c1 * c1 - s1 * s1, 2 * s1 * c1
    c4, s4 = c2 * c2 - s2 * s2, 2 * s2 * c2
    # tan(2x) through softsign, monotone in x over (-45, 45] degrees (a square's yaw error),
    # coarse and at the degree scale: s4 / (|s4| + k (1 + c4)) = t / (|t| + k), t = tan 2x
    half = 1 + c4 + 1e-6
    yaw = ops.stack([s2, c2, s4, c4, s4 / (abs(s4) + half),
                     s4 / (abs(s4) + OBJECT_REL_FIRST_YAW_SCALE * half)])
    return ops.cat3([rel, fine, yaw])


@dataclasses.dataclass(frozen=True)
class _Ops:
    """The array functions :meth:`Featurizer._derive` needs beyond arithmetic and slicing."""

    atan2: Any
    sin: Any
    cos: Any
    stack: Any      # along a new last axis
    cat: Any        # along axis 1
    cat3: Any       # along axis 2


def _via_torch(fn: Any) -> Any:
    return lambda *arrays: fn(*map(torch.from_numpy, arrays)).numpy()


_TORCH_OPS = _Ops(torch.atan2, torch.sin, torch.cos, lambda xs: torch.stack(xs, dim=-1),
                  lambda xs: torch.cat(xs, dim=1), lambda xs: torch.cat(xs, dim=2))
_NUMPY_OPS = _Ops(_via_torch(torch.atan2), _via_torch(torch.sin), _via_torch(torch.cos),
                  lambda xs: np.stack(xs, axis=-1), lambda xs: np.concatenate(xs, axis=1),
                  lambda xs: np.concatenate(xs, axis=2))


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


@dataclasses.dataclass
class TensorBatch:
    """A minibatch ready for the network: normalized, possibly hardened."""

    obs: torch.Tensor  # float32 (B, input_dim), normalized
    target: torch.Tensor  # float32 (B, chunk, act_dim), normalized
    group: torch.Tensor  # int64 (B,)
    image: torch.Tensor | None = None  # uint8 (B, H, W, 3)


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """Options of a policy type that has none beyond the shared :class:`PolicySpec`."""


def to_relative(relative: Sequence[tuple[int, int, int]], action: torch.Tensor,
                obs: torch.Tensor) -> torch.Tensor:
    """Raw actions (B, chunk, act_dim) -> relative targets: each ``(action column, observation
    column, width)`` part minus the raw observation (B, obs_dim) it is relative to."""
    if not relative:
        return action
    out = action.clone()
    for a0, o0, width in relative:
        out[:, :, a0:a0 + width] -= obs[:, None, o0:o0 + width]
    return out


def relative_to_command(spec: PolicySpec) -> bool:
    """Whether ``spec``'s relative action parts are relative to the previous command (policy
    option ``relative_base: command``; the data loader then gathers each row's previous
    action)."""
    return bool(spec.relative) and \
        spec.options.get("relative_base", RELATIVE_BASE_OBSERVATION) == RELATIVE_BASE_COMMAND


def command_base(relative: Sequence[tuple[int, int, int]], obs: torch.Tensor,
                 command: torch.Tensor | None) -> torch.Tensor:
    """What relative action parts are relative to when the base is the previous command
    (``relative_base: command``): the raw observations (B, obs_dim) with each relative part's
    observation columns replaced by the previous action's (B, act_dim) columns; ``obs`` itself
    where there is no previous command (None: an episode's first chunk)."""
    if command is None or not relative:
        return obs
    out = obs.clone()
    for a0, o0, width in relative:
        out[:, o0:o0 + width] = command[:, a0:a0 + width]
    return out


def command_tensor(last: np.ndarray | None) -> torch.Tensor | None:
    """The previous raw action as :meth:`PolicyModel.act`'s ``command`` (1, act_dim), float32;
    None at an episode's start (no action sent yet)."""
    return None if last is None else torch.from_numpy(last.astype(np.float32)).unsqueeze(0)


class PolicyModel(nn.Module):
    """The contract of a policy type: what the training loop and :class:`TorchPolicy` call.

    A policy type subclasses this, registers itself with
    ``@clawgym_ros.training.registry.register_policy("name")`` (or an entry point of the group
    ``clawgym_ros.policies``) and provides:

    - ``Options``: a dataclass of its own settings (``TrainConfig.policy_options``, stored in
      the checkpoint's policy spec); default: none;
    - ``__init__(spec, stats, options)``: call ``super().__init__(spec, stats, options)`` (the
      observation featurizer and the normalization buffers), then build the modules, with
      every trainable parameter under ``encoder``, ``trunk`` or ``head`` (the freezable
      groups);
    - :meth:`forward`: normalized input [+ uint8 images] -> normalized action chunk;
    - optionally :meth:`loss` (default: mean squared error per sample), :meth:`act` and
      :meth:`augment` (training-time image augmentation; default none);
    - ``uses_image = True`` when it needs camera images.

    The loop knows no architecture: it builds the policy with :func:`build_policy`, trains on
    :meth:`loss` and validates with it; checkpoints store :attr:`spec` and the state dict.
    """

    #: name in the registry (set by ``register_policy``)
    type_name: str = ""
    #: whether the policy reads the camera image (the table must have images)
    uses_image: bool = False
    #: the policy type's own options (a dataclass; validated when the policy is built)
    Options: type = NoOptions

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 options: Any = None):
        super().__init__()
        if self.uses_image and spec.image_shape is None:
            raise ClawgymError(f"a {spec.type} policy needs camera images; the training table "
                               "has none")
        self.spec = spec
        self.options = options if options is not None else make_options(type(self), spec)
        self.featurizer = Featurizer(spec.features, spec.obs_layout)
        stats = stats or {}
        in_dim = spec.input_dim
        for name, dim, fill in (("obs_mean", in_dim, 0.0), ("obs_std", in_dim, 1.0),
                                ("action_mean", spec.act_dim, 0.0),
                                ("action_std", spec.act_dim, 1.0)):
            value = stats.get(name)
            tensor = torch.full((dim,), fill) if value is None else \
                torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(dim)
            self.register_buffer(name, tensor.clone())

    def forward(self, obs_n: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """Normalized input (B, input_dim) [+ uint8 images (B, H, W, 3)] -> normalized action
        chunk (B, chunk, act_dim)."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def loss(self, batch: TensorBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Loss of each sample of ``batch`` and extra metrics.

        Per sample, not reduced: the loop weights samples by their group (and reports loss
        per group), so the reduction is the loop's.

        Returns:
            ``(per_sample, metrics)``: a float tensor (B,) with gradient, and scalar tensors
            (logged by name; may be empty).
        """
        pred = self(batch.obs, batch.image)
        return (pred - batch.target).pow(2).mean(dim=(1, 2)), {}

    def augment(self, image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Training-time augmentation of a minibatch of uint8 images (B, H, W, 3), drawn with
        ``generator`` (the loop's seeded noise generator, so a run is reproducible and
        resumable). Default: none."""
        return image

    @property
    def relative_to_command(self) -> bool:
        """Whether relative action parts are relative to the previous command (the policy
        type's option ``relative_base: command``) rather than to the observation."""
        return relative_to_command(self.spec)

    def relative_base(self, obs: torch.Tensor, command: torch.Tensor | None) -> torch.Tensor:
        """The raw vectors (B, obs_dim) relative action parts are relative to: ``obs``, or with
        ``relative_base: command`` the previous command's columns in place of the observed
        ones (:func:`command_base`; ``obs`` where ``command`` is None)."""
        return command_base(self.spec.relative, obs, command) \
            if self.relative_to_command else obs

    def act(self, state: torch.Tensor, image: torch.Tensor | None = None,
            command: torch.Tensor | None = None) -> torch.Tensor:
        """Raw observation vectors (B, obs_dim) [+ images] -> raw action chunks
        (B, chunk, act_dim): normalize, predict, unnormalize, undo relative targets.

        Args:
            command: the previous raw action (B, act_dim) of each row, read by a policy whose
                relative parts are relative to it (``relative_base: command``); None at an
                episode's start (the observation stands in).
        """
        return self.from_relative(self.unnormalize_action(
            self(self.normalize_obs(state), image)), self.relative_base(state, command))

    def normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observation vectors (B, obs_dim) -> normalized network input (B, input_dim)
        (derived features appended first)."""
        return (self.featurizer(obs) - self.obs_mean) / self.obs_std

    def to_relative(self, action: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Raw actions (B, chunk, act_dim) -> what the network predicts (relative parts minus
        the raw observation (B, obs_dim) they are relative to)."""
        return to_relative(self.spec.relative, action, obs)

    def from_relative(self, action: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`to_relative`."""
        if not self.spec.relative:
            return action
        out = action.clone()
        for a0, o0, width in self.spec.relative:
            out[:, :, a0:a0 + width] += obs[:, None, o0:o0 + width]
        return out

    def normalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return (action - self.action_mean) / self.action_std

    def unnormalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return action * self.action_std + self.action_mean


class _TrunkHead(PolicyModel):
    """Shared tail of the built-in types: ``trunk`` (Linear + ReLU per width of
    ``hidden[1:]``) and ``head`` (Linear to ``chunk * act_dim``)."""

    def _build_tail(self, trunk_in: int) -> None:
        layers: list[nn.Module] = []
        for out in self.spec.hidden[1:]:
            layers += [nn.Linear(trunk_in, out), nn.ReLU()]
            trunk_in = out
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(trunk_in, self.spec.chunk * self.spec.act_dim)

    def _tail(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x)).view(-1, self.spec.chunk, self.spec.act_dim)


@register_policy(C.POLICY_MLP)
class MLPPolicy(_TrunkHead):
    """State vector -> ``encoder`` (Linear + ReLU, width ``hidden[0]``) -> trunk -> head
    (:class:`MLPOptions`)."""

    Options = MLPOptions

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 options: Any = None):
        super().__init__(spec, stats, options)
        self.encoder = nn.Sequential(nn.Linear(spec.input_dim, spec.hidden[0]), nn.ReLU())
        self._build_tail(spec.hidden[0])

    def forward(self, obs_n: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        return self._tail(self.encoder(obs_n))


@register_policy(C.POLICY_CNN)
class CNNPolicy(_TrunkHead):
    """Camera image -> ``encoder`` (:class:`ImageEncoder`, width ``hidden[0]``), concatenated
    with the normalized state vector -> trunk -> head; trained on augmented images
    (:class:`CNNOptions`)."""

    uses_image = True
    Options = CNNOptions

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 options: Any = None):
        super().__init__(spec, stats, options)
        self.encoder = ImageEncoder(spec.hidden[0])
        self._build_tail(spec.hidden[0] + spec.input_dim)

    def downsampled(self, image: torch.Tensor) -> torch.Tensor:
        """Camera images (B, H, W, 3) at the trained size -> what the encoder sees (every
        ``downsample``-th row and column); images already downsampled (from :meth:`augment`)
        pass unchanged."""
        step = self.options.downsample
        if step == 1 or self.spec.image_shape is None \
                or tuple(image.shape[1:3]) != tuple(self.spec.image_shape[:2]):
            return image
        return image[:, ::step, ::step]

    def forward(self, obs_n: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        if image is None:
            raise ClawgymError("cnn policy called without an image")
        return self._tail(torch.cat([self.encoder(self.downsampled(image)), obs_n], dim=1))

    def augment(self, image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Downsampling (:meth:`downsampled`, first: the rest works on fewer pixels), a random
        shift (clamped indices: the same as replicate padding then cropping) and a brightness
        factor per image; uint8 in, uint8 out."""
        image = self.downsampled(image)
        batch, height, width, _ = image.shape
        pad = self.options.shift_pad
        if pad:
            shift = torch.randint(-pad, pad + 1, (2, batch), generator=generator)
            rows = (torch.arange(height)[None, :] + shift[0][:, None]).clamp_(0, height - 1)
            cols = (torch.arange(width)[None, :] + shift[1][:, None]).clamp_(0, width - 1)
            image = image[torch.arange(batch)[:, None, None], rows[:, :, None], cols[:, None, :]]
        if self.options.brightness:
            low = 1.0 - self.options.brightness
            scale = low + 2.0 * self.options.brightness * torch.rand(batch, generator=generator)
            image = (image.float() * scale[:, None, None, None]).round_().clamp_(0, 255).to(
                torch.uint8)
        return image


def floor_stats(stats: Mapping[str, np.ndarray], floor: float) -> dict[str, np.ndarray]:
    """Normalization stats with every std raised to at least ``floor``.

    A feature that (nearly) never changes in the data, e.g. the height of a distractor that is
    never touched, has a tiny std; without a floor a millimetre of change at act time becomes
    a huge normalized input and the policy's output is garbage.
    """
    out = {k: np.asarray(v, dtype=np.float32) for k, v in stats.items()}
    for name in ("obs_std", "action_std"):
        if name in out:
            out[name] = np.maximum(out[name], np.float32(floor))
    return out


def make_options(cls: type[PolicyModel], spec: PolicySpec) -> Any:
    """The ``Options`` of policy class ``cls`` from ``spec.options``.

    Raises:
        ConfigError: an option the policy type does not have (or its own validation).
    """
    try:
        return cls.Options(**dict(spec.options))
    except TypeError:
        allowed = [f.name for f in dataclasses.fields(cls.Options)] \
            if dataclasses.is_dataclass(cls.Options) else []
        raise ConfigError("policy_options", dict(spec.options),
                          f"options of the {spec.type} policy: "
                          + (", ".join(allowed) or "none")) from None


def build_policy(spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 seed: int | None = None) -> PolicyModel:
    """Build the policy type ``spec.type`` (looked up in the registry); with ``seed``, its
    initial weights depend only on the seed.

    Raises:
        ConfigError: unknown policy type or options.
        ClawgymError: an image policy without images in ``spec``.
    """
    cls = policy_class(spec.type)
    options = make_options(cls, spec)
    if seed is None:
        return cls(spec, stats, options)
    devices: list[Any] = []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return cls(spec, stats, options)


def parameter_groups(policy: PolicyModel) -> dict[str, list[tuple[str, nn.Parameter]]]:
    """Named parameter groups: ``{"encoder": [(name, param), ...], "trunk": ..., "head": ...}``.

    The group is the first component of the parameter name; every parameter is in exactly one.

    Raises:
        ClawgymError: a parameter outside the groups (a policy type breaking the contract).
    """
    groups: dict[str, list[tuple[str, nn.Parameter]]] = {
        C.PARAM_GROUP_ENCODER: [], C.PARAM_GROUP_TRUNK: [], C.PARAM_GROUP_HEAD: []}
    for name, param in policy.named_parameters():
        group = name.split(".", 1)[0]
        if group not in groups:
            raise ClawgymError(f"policy {policy.spec.type!r} has parameter {name!r} outside "
                               "the groups " + ", ".join(groups))
        groups[group].append((name, param))
    return groups


def freeze(policy: PolicyModel, groups: Sequence[str]) -> list[str]:
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


def check_image_shape(spec: PolicySpec, shape: Sequence[int]) -> None:
    """Refuse a camera image of another size than the policy was trained on.

    Raises:
        ClawgymError: one line naming both sizes (height x width x channels).
    """
    want = spec.image_shape
    if want is not None and tuple(int(s) for s in shape) != tuple(want):
        got = "x".join(str(int(s)) for s in shape)
        raise ClawgymError(f"camera image is {got} (height x width x channels); this "
                           f"{spec.type} policy was trained on {'x'.join(map(str, want))} "
                           f"images: set the camera's image size to {want[1]}x{want[0]}")


class TorchPolicy:
    """A trained :class:`PolicyModel` behind the evaluator's Policy protocol.

    Args:
        model: the network (put in eval mode).
        obs_spec: observation key -> width, in the order the network was trained on.
        action_spec: action key -> width.
        image_key: observation key holding the camera image (cnn policies).
    """

    def __init__(self, model: PolicyModel, obs_spec: Mapping[str, int],
                 action_spec: Mapping[str, int], image_key: str = C.OBS_IMAGE):
        self.model = model.eval()
        self.obs_spec = dict(obs_spec)
        self.action_spec = dict(action_spec)
        self.image_key = image_key
        self._queue: deque[np.ndarray] = deque()
        #: whether the model's targets are relative to its previous command, and that command:
        #: the last action returned (None at an episode's start)
        self._to_command = bool(getattr(self.model, "relative_to_command", False))
        self._last: np.ndarray | None = None

    def reset(self) -> None:
        """Forget queued actions of a chunk and the last action (called at every episode
        start), and the model's own per-episode state where it has one (``reset_state``, e.g.
        a residual policy's base chunk)."""
        self._queue.clear()
        self._last = None
        reset_state = getattr(self.model, "reset_state", None)
        if reset_state is not None:
            reset_state()

    def open_loop_steps(self) -> int:
        """Queued actions of the current chunk: the next calls of :meth:`act` that do not read
        their observation."""
        return len(self._queue)

    def act(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Next action for ``obs`` as ``{ACT_*: array}``."""
        if not self._queue:
            state = torch.from_numpy(flatten_obs(obs, self.obs_spec)).unsqueeze(0)
            image = None
            if self.model.uses_image:
                if self.image_key not in obs:
                    raise ClawgymError(f"observation lacks the camera image {self.image_key!r}")
                pixels = np.ascontiguousarray(obs[self.image_key], dtype=np.uint8)
                check_image_shape(self.model.spec, pixels.shape)
                image = torch.from_numpy(pixels).unsqueeze(0)
            with torch.inference_mode():
                if self._to_command:
                    chunk = self.model.act(state, image, command_tensor(self._last))[0]
                else:
                    chunk = self.model.act(state, image)[0]
            self._queue.extend(chunk.numpy().astype(np.float64))
        action = self._queue.popleft()
        if self._to_command:
            self._last = action.copy()
        return unflatten_action(action, self.action_spec)
