"""Stage-wise rewards: named terms a learner can use, declared per task in one place.

A task env declares the terms it is scored on and their default weights in
:attr:`~clawgym_ros.tasks.world.TaskEnv.reward_weights` (a task overrides the class attribute;
a weight of 0 switches a term off); a config may override weights but never add a term the task
does not declare. :class:`StageReward` computes them after every control step from the task's
own signals (the stage tracker over the true state, the per-step contact measurements of the
feasibility sign-off):

* ``progress``: the increase of the task's stage-wise progress ``phi`` (stages reached plus the
  shaped distance to the next one, :meth:`~clawgym_ros.tasks.base.StageTracker.progress`):
  ``phi(s') - phi(s)``. As a potential difference it sums to ``phi(end) - phi(start)`` over an
  episode, so lingering earns nothing and a policy cannot farm it;
* ``success``: 1 on the step the task's success condition first holds;
* ``collision``: -1 per step with an unintended contact (the sign-off's notion);
* ``force``: minus the step's largest contact force above the task's limit, as a fraction of the
  limit, at most 1 (squeezing or ramming harder than the feasibility check allows);
* ``recovery``: timely recognition of an anomaly: on the step an episode regains the stage
  progress a disturbance took away (the disturbance family's recovery watch,
  ``info["disturbance"]``), ``1 - steps / RECOVERY_WINDOW`` if that took fewer than
  :data:`RECOVERY_WINDOW` steps, else 0; always 0 without disturbances.

Used by ``gym.make(ID, reward_mode="shaped")`` and by RL fine-tuning
(:mod:`clawgym_ros.training.rl`). The reward is a function of the true state and the step's
measurements only: same seed and actions, same rewards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

#: Every term a task may declare (what :class:`StageReward` knows how to compute).
TERMS: tuple[str, ...] = ("progress", "success", "collision", "force", "recovery")
#: Default weights of :attr:`TaskEnv.reward_weights`.
DEFAULT_WEIGHTS: dict[str, float] = {"progress": 10.0, "success": 5.0, "collision": 0.1,
                                     "force": 0.1, "recovery": 2.0}
#: Control steps (4 s at 50 Hz) within which regaining lost progress earns ``recovery``.
RECOVERY_WINDOW = 200


def resolve_weights(task_env: Any, overrides: Mapping[str, Any] | None = None,
                    field: str = "reward_weights") -> dict[str, float]:
    """The task's declared weights with ``overrides`` applied.

    Raises:
        ConfigError: an override names a term the task does not declare, or is not a number
            in [0, 1000].
    """
    declared = dict(getattr(task_env, "reward_weights", {}) or {})
    name = getattr(getattr(task_env, "task", None), "name", type(task_env).__name__)
    weights = dict(declared)
    for term, value in (overrides or {}).items():
        if term not in declared:
            raise ConfigError(f"{field}.{term}", value, f"a reward term task {name} declares: "
                              + ", ".join(declared))
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 <= float(value) <= 1000.0:
            raise ConfigError(f"{field}.{term}", value, "a weight in [0, 1000]")
        weights[term] = float(value)
    return weights


class StageReward:
    """The weighted stage-wise reward of one task env (see the module docstring).

    Args:
        task_env: the unwrapped task env (a :class:`~clawgym_ros.tasks.world.TaskEnv`).
        overrides: term -> weight replacing the task's declared default.
    """

    def __init__(self, task_env: Any, overrides: Mapping[str, Any] | None = None) -> None:
        self.env = task_env
        self.weights = resolve_weights(task_env, overrides)
        unknown = [t for t in self.weights if t not in TERMS]
        if unknown:
            raise ConfigError("reward_weights", unknown, "terms among " + ", ".join(TERMS))
        self.max_force = float(getattr(task_env.task, "max_contact_force", 0.0) or 0.0)
        self._phi = 0.0
        self._succeeded = False
        self._recovered = False
        self.totals = dict.fromkeys(self.weights, 0.0)

    def reset(self) -> None:
        """Start an episode (after the env's reset)."""
        self._phi = float(self.env.dense_reward())
        self._succeeded = False
        self._recovered = False
        self.totals = dict.fromkeys(self.weights, 0.0)

    def step(self, info: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        """The reward of the step just taken and its unweighted terms."""
        phi = float(self.env.dense_reward())
        success = bool(info.get("success", False)) and not self._succeeded
        self._succeeded = self._succeeded or success
        force = float(info.get("contact_force", 0.0))
        over = max(0.0, force - self.max_force) / self.max_force if self.max_force > 0 else 0.0
        recovery = 0.0
        record = info.get(C.INFO_DISTURBANCE) or {}
        steps = record.get("steps_to_recover")
        if steps is not None and not self._recovered:
            self._recovered = True
            recovery = max(0.0, 1.0 - float(steps) / RECOVERY_WINDOW)
        values = {"progress": phi - self._phi, "success": float(success),
                  "collision": -float(bool(info.get("collision", False))),
                  "force": -min(1.0, over), "recovery": recovery}
        self._phi = phi
        terms = {t: values[t] for t in self.weights}
        for t, v in terms.items():
            self.totals[t] += v
        return float(sum(self.weights[t] * v for t, v in terms.items())), terms
