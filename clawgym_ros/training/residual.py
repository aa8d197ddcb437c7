"""Residual policy: a frozen behaviour-cloning policy plus a small learned correction.

RL fine-tuning (:mod:`clawgym_ros.training.rl`) trains the correction; this module is what a
fine-tuned checkpoint holds and what every consumer of checkpoints (``clawgym eval``, the loop's
evaluations, policy_node over ROS) runs, through the same :class:`PolicyModel` contract as the
BC types. Registered as the policy type ``residual`` (entry point of ``clawgym_ros.policies``).

Per control step:

1. the base (the BC policy, weights frozen, copied into this checkpoint) gives its action for
   the step: its chunk of ``k`` actions is computed every ``k`` steps and executed from a
   queue, exactly as the BC policy alone would execute it;
2. the residual network reads the base's normalized input and the base's own normalized
   prediction of this step's action, ``x = [base.normalize_obs(s), base.normalize_action(
   base.to_relative(a_base, s))]``;
3. the action is ``a_base + scale * clip(net(x), -1, 1)`` (``scale`` per action element:
   radians for joint targets, metres for the gripper width).

A zero residual reproduces the BC policy step for step; the network's output layer starts near
zero, so fine-tuning starts from the BC policy's behaviour. The residual network has the
freezable groups of the contract (``encoder``: first layer, ``trunk``: hidden layers, ``head``:
output layer); the base is not a trainable group and is never trained here.

The policy is stateful (the base's chunk queue): :meth:`reset_state` clears it, and
:class:`~clawgym_ros.training.policies.TorchPolicy` calls it at every episode start. It acts
on one observation at a time (batch 1).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.training.policies import PolicyModel, PolicySpec, build_policy

#: The policy type name (entry point ``clawgym_ros.policies``, see setup.py).
POLICY_RESIDUAL = "residual"


@dataclasses.dataclass(frozen=True)
class ResidualOptions:
    """Options of a residual policy (stored in its checkpoint's policy spec).

    Attributes:
        base_spec: the BC policy's :class:`PolicySpec` as JSON.
        scale: largest correction per action element (action units: rad, m).
    """

    base_spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scale: Sequence[float] = ()

    def __post_init__(self) -> None:
        if not self.base_spec:
            raise ConfigError("policy_options.base_spec", dict(self.base_spec),
                              "the BC policy spec a residual policy corrects (written by "
                              "`clawgym train --finetune rl`)")
        for i, value in enumerate(self.scale):
            if not (isinstance(value, (int, float)) and 0.0 <= float(value) <= 10.0):
                raise ConfigError(f"policy_options.scale[{i}]", value, "[0, 10]")


def residual_spec(base: PolicySpec, scale: Sequence[float], hidden: Sequence[int]) -> PolicySpec:
    """The spec of a residual policy over ``base`` (same observation and action layout).

    Raises:
        ConfigError: ``scale`` does not have one value per action element.
    """
    if len(scale) != base.act_dim:
        raise ConfigError("residual_scale", list(scale),
                          f"{base.act_dim} values, one per action element")
    return PolicySpec(type=POLICY_RESIDUAL, obs_dim=base.obs_dim, act_dim=base.act_dim,
                      hidden=tuple(int(h) for h in hidden), chunk=1,
                      image_shape=base.image_shape,
                      options={"base_spec": base.to_json(),
                               "scale": [float(s) for s in scale]})


class ResidualPolicy(PolicyModel):
    """Frozen BC base + residual MLP (see the module docstring)."""

    Options = ResidualOptions

    def __init__(self, spec: PolicySpec, stats: Mapping[str, np.ndarray] | None = None,
                 options: Any = None):
        super().__init__(spec, stats, options)
        base_spec = PolicySpec.from_json(self.options.base_spec)
        if (base_spec.obs_dim, base_spec.act_dim) != (spec.obs_dim, spec.act_dim):
            raise ConfigError("policy_options.base_spec",
                              f"obs {base_spec.obs_dim}, act {base_spec.act_dim}",
                              f"the residual's own layout (obs {spec.obs_dim}, act "
                              f"{spec.act_dim})")
        if base_spec.type == POLICY_RESIDUAL:
            raise ConfigError("policy_options.base_spec.type", base_spec.type,
                              "a behaviour-cloning policy type (not a residual of a residual)")
        if len(self.options.scale) != spec.act_dim:
            raise ConfigError("policy_options.scale", list(self.options.scale),
                              f"{spec.act_dim} values, one per action element")
        self.uses_image = bool(policy_class_uses_image(base_spec))
        self.base = build_policy(base_spec)
        self.base.requires_grad_(False)
        self.register_buffer("scale", torch.as_tensor(
            np.asarray(self.options.scale, dtype=np.float32).reshape(spec.act_dim)))
        width = base_spec.input_dim + spec.act_dim
        hidden = list(spec.hidden)
        self.encoder = nn.Sequential(nn.Linear(width, hidden[0]), nn.Tanh())
        layers: list[nn.Module] = []
        for a, b in zip(hidden[:-1], hidden[1:]):
            layers += [nn.Linear(a, b), nn.Tanh()]
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(hidden[-1], spec.act_dim)
        self._queue: deque[Any] = deque()     # torch rows, or numpy rows (RL env)
        self._numpy_stats: dict[str, np.ndarray] | None = None
        self._numpy_scale: np.ndarray | None = None

    # --------------------------------------------------------------- contract
    def forward(self, obs_n: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """Residual network input (B, input width) -> correction in [-1, 1] (B, 1, act_dim)."""
        return self.head(self.trunk(self.encoder(obs_n))).clamp(-1.0, 1.0).unsqueeze(1)

    def loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise ClawgymError("a residual policy is trained by RL fine-tuning "
                           "(`clawgym train --finetune rl --from CHECKPOINT`), not by "
                           "behaviour cloning")

    def act(self, state: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """One raw observation (1, obs_dim) -> this step's raw action (1, 1, act_dim)."""
        x, base_action = self.residual_input(state, image)
        correction = self(x)[:, 0]
        return self.combine(base_action, correction).unsqueeze(1)

    def reset_state(self) -> None:
        """Forget the base's queued chunk (every episode start)."""
        self._queue.clear()

    # --------------------------------------------------------------- pieces (RL training)
    def residual_input(self, state: torch.Tensor, image: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance the base by one step: ``(x, a_base)`` for the raw observation ``state``
        (1, obs_dim): the residual network's input (1, width) and the base action (1, act)."""
        if state.shape[0] != 1:
            raise ClawgymError(f"a residual policy acts on one observation at a time, got a "
                               f"batch of {state.shape[0]}")
        if not self._queue:
            self._queue.extend(self.base.act(state, image)[0])
        base_action = self._queue.popleft().unsqueeze(0)
        predicted = self.base.normalize_action(
            self.base.to_relative(base_action.unsqueeze(1), state))[:, 0]
        return torch.cat([self.base.normalize_obs(state), predicted], dim=1), base_action

    def residual_input_numpy(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`residual_input` for one raw float32 observation vector (obs_dim,), in numpy:
        ``(x, a_base)`` as float32 vectors, bit for bit the torch values (the same operations
        on the same operands; the base network itself runs in torch once per chunk). What the
        RL residual env runs every control step, where torch's per-call overhead on rows of a
        few dozen values cost more than the arithmetic. Not for images (a base that reads
        them raises)."""
        if self.uses_image:
            raise ClawgymError("residual_input_numpy takes no camera image; use "
                               "residual_input")
        base = self.base
        if self._numpy_stats is None:      # the base is frozen: its buffers never change
            self._numpy_stats = {name: getattr(base, name).numpy().copy() for name in
                                 ("obs_mean", "obs_std", "action_mean", "action_std")}
        stats = self._numpy_stats
        row = state.reshape(1, -1)
        if not self._queue:
            with torch.inference_mode():
                chunk = base.act(torch.from_numpy(row))[0].numpy()
            self._queue.extend(chunk.copy())
        base_action = self._queue.popleft()
        relative = base_action.copy()
        for a0, o0, width in base.spec.relative:
            relative[a0:a0 + width] -= state[o0:o0 + width]
        predicted = (relative - stats["action_mean"]) / stats["action_std"]
        obs_n = (base.featurizer.numpy(row)[0] - stats["obs_mean"]) / stats["obs_std"]
        return np.concatenate([obs_n, predicted]), base_action

    def combine_numpy(self, base_action: np.ndarray, correction: np.ndarray) -> np.ndarray:
        """:meth:`combine` on float32 vectors (same values bit for bit)."""
        if self._numpy_scale is None:
            self._numpy_scale = self.scale.numpy().copy()
        # np.clip's wrapper costs more than the arithmetic on a row; same values
        return base_action + self._numpy_scale * np.minimum(np.maximum(correction, -1.0), 1.0)

    def combine(self, base_action: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
        """Base action + scaled correction (correction clipped to [-1, 1])."""
        return base_action + self.scale * correction.clamp(-1.0, 1.0)

    def load_residual(self, layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Set the residual network from (weight, bias) pairs, first layer first (e.g. an
        SB3 actor's ``mlp_extractor.policy_net`` then ``action_net``).

        Raises:
            ClawgymError: the shapes do not fit this network.
        """
        linears = [m for m in (*self.encoder, *self.trunk, self.head)
                   if isinstance(m, nn.Linear)]
        if len(layers) != len(linears):
            raise ClawgymError(f"residual network has {len(linears)} layers, got {len(layers)}")
        with torch.no_grad():
            for linear, (weight, bias) in zip(linears, layers):
                if tuple(weight.shape) != tuple(linear.weight.shape):
                    raise ClawgymError(f"residual layer shape {tuple(weight.shape)} != "
                                       f"{tuple(linear.weight.shape)}")
                linear.weight.copy_(weight)
                linear.bias.copy_(bias)


def policy_class_uses_image(spec: PolicySpec) -> bool:
    """Whether the policy type of ``spec`` reads camera images."""
    from clawgym_ros.training.registry import policy_class

    return bool(policy_class(spec.type).uses_image)
