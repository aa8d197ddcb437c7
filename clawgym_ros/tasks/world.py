"""Task envs: :class:`TaskEnv` subclasses :class:`~clawgym_ros.sim.envs.ClawEnv` with template
variants of the scene, a goal drawn at reset and a :class:`~clawgym_ros.tasks.base.StageTracker`
fed with the true state after every control step.

Each template is simulated by its own backend (model built once per env and template, e.g. other
objects, another bin layout, a hole block); every backend of a task has the same observation
layout, so the Gymnasium spaces never change. Per step the env also measures what the
feasibility check needs: the largest contact force (normal force of every active contact, N)
and whether an unintended contact occurred, both sampled at the end of each control step.
Unintended contacts are judged per geom pair: any contact with a robot geom is unintended unless
the pair is in the task env's :attr:`TaskEnv.allowed_contacts` (pairs of contact groups:
``robot``, ``gripper``, ``objects``, ``floor``, ``obstacles`` (static geoms other than the
floor), ``world`` (all static geoms), or a geom or body name). Per geom, because the floor and
every fixed obstacle belong to the same (world) body.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from clawgym_ros.errors import ConfigError
from clawgym_ros.sim import scene_mjcf as MJ
from clawgym_ros.sim import scene_spec as S
from clawgym_ros.sim.envs import ClawEnv
from clawgym_ros.sim.mujoco_backend import MujocoBackend, MujocoConfig
from clawgym_ros.sim.world import MujocoPhysics, contact_summary, enable_energy, name_index
from clawgym_ros.tasks.base import StageTracker, Task, Template
from clawgym_ros.tasks.rewards import DEFAULT_WEIGHTS

#: Robot bodies allowed to touch task objects (grasping): the ``gripper`` contact group.
GRIPPER_BODIES = ("gripper_hand", "gripper_left_finger", "gripper_right_finger")
#: Names of the contact groups usable in :attr:`TaskEnv.allowed_contacts`.
CONTACT_GROUPS = ("robot", "gripper", "objects", "floor", "obstacles", "world")


class TemplateBackend(MujocoBackend):
    """A MuJoCo backend whose scene is built by a task env for one template."""

    def __init__(self, config: MujocoConfig, env: TaskEnv, template: Template) -> None:
        self._env = env
        self._template = template
        super().__init__(config)

    def _load(self, scene_name: str) -> tuple[S.SceneSpec, Any]:
        scene = self._env.build_scene(self._template)
        spec = MJ.build_spec(scene)
        self._env.edit_spec(spec, self._template)
        model = spec.compile()
        enable_energy(model)
        return scene, model


class TaskEnv(ClawEnv):
    """Base of task envs (see the module docstring).

    Args:
        template: a template name; empty = a training template drawn at every reset.
        **kwargs: :class:`ClawEnv` options (cameras, image size, render mode).

    Subclasses set :attr:`task_cls` and implement :meth:`build_scene`, :meth:`sample_goal` and
    :meth:`make_tracker`; optional hooks: :meth:`before_physics`, :meth:`after_physics`,
    :meth:`step_info`, :meth:`true_state`.

    Attributes:
        allowed_contacts: pairs of contact groups (see the module docstring) whose contacts
            are intended; every other contact of a robot geom is an unintended collision.
        reward_scale: distance (m) at which the dense reward's in-stage progress is 0.24.
    """

    task_cls: type[Task] = Task
    allowed_contacts: ClassVar[tuple[tuple[str, str], ...]] = (("gripper", "objects"),)
    #: distance scale (m) of the dense reward's in-stage progress (:meth:`dense_reward`)
    reward_scale: ClassVar[float] = 0.25
    #: the stage-wise reward terms this task is scored on and their default weights
    #: (:mod:`clawgym_ros.tasks.rewards`; ``reward_mode="shaped"`` and RL fine-tuning)
    reward_weights: ClassVar[Mapping[str, float]] = DEFAULT_WEIGHTS

    def __init__(self, template: str = "", **kwargs: Any) -> None:
        self.task = self.task_cls()
        self.fixed_template = self.task.template(template) if template else None
        self._initial = self.fixed_template or self.task.template(self.task.training_templates[0])
        self._backends: dict[str, MujocoBackend] = {}
        self._config: MujocoConfig | None = None
        self.template = self._initial
        self.goal: Any = None
        self.tracker: StageTracker | None = None
        self.physics_time = 0.0
        self.last_contact_force = 0.0
        self.last_collision = False
        self.reset_options: dict[str, Any] = {}
        self.last_state: Mapping[str, np.ndarray] = {}
        super().__init__(scene=self.task.scene, **kwargs)

    # ------------------------------------------------------------------ task hooks
    @abc.abstractmethod
    def build_scene(self, template: Template) -> S.SceneSpec:
        """The scene spec of ``template`` (objects, bins, ...)."""

    def edit_spec(self, spec: Any, template: Template) -> None:
        """Edit the uncompiled ``mujoco.MjSpec`` of ``template`` (default: nothing)."""

    @abc.abstractmethod
    def sample_goal(self, rng: np.random.Generator, template: Template) -> Any:
        """The episode's goal, drawn from ``rng`` after the backend reset."""

    @abc.abstractmethod
    def make_tracker(self, goal: Any) -> StageTracker:
        """A fresh stage tracker for ``goal``."""

    def after_reset(self, rng: np.random.Generator) -> None:
        """Hook after the goal is drawn (e.g. set tool wear on the model)."""

    def before_physics(self, action: Mapping[str, Any]) -> None:
        """Hook before the physics of a control step (e.g. move scripted bodies)."""

    def after_physics(self) -> None:
        """Hook after the physics of a control step, before the state is read."""

    def step_info(self, info: dict[str, Any], state: Mapping[str, np.ndarray]) -> None:
        """Hook: add task entries to a step's (and the reset's) ``info`` from the true state."""

    # ------------------------------------------------------------------ backends
    def _make_backend(self, config: MujocoConfig) -> MujocoBackend:
        self._config = config
        return self._backend_for(self._initial)

    def _backend_for(self, template: Template) -> MujocoBackend:
        backend = self._backends.get(template.name)
        if backend is None:
            assert self._config is not None
            backend = TemplateBackend(self._config, self, template)
            self._backends[template.name] = backend
            self._prepare_contacts(backend)
        return backend

    def contact_group(self, backend: MujocoBackend, name: str) -> np.ndarray:
        """Boolean mask over ``backend``'s geoms of a contact group, geom name or body name.

        Raises:
            ConfigError: ``name`` is neither a group nor a geom or body of the model.
        """
        m, idx = backend.model, backend.index
        mask = np.zeros(m.ngeom, dtype=bool)
        floor = name_index(m, "geom", "floor")
        if name == "robot":
            mask[np.asarray(idx.robot_geoms, dtype=int)] = True
        elif name == "gripper":
            bodies = [name_index(m, "body", b) for b in GRIPPER_BODIES]
            mask[np.isin(m.geom_bodyid, [b for b in bodies if b >= 0])] = True
        elif name == "objects":
            mask[np.asarray(idx.object_geoms, dtype=int)] = True
        elif name in ("floor", "obstacles", "world"):
            if name != "floor":
                mask[np.asarray(idx.obstacle_geoms, dtype=int)] = True
            if floor >= 0:
                mask[floor] = name != "obstacles"
        else:
            geom = name_index(m, "geom", name)
            body = name_index(m, "body", name)
            if geom >= 0:
                mask[geom] = True
            elif body >= 0:
                mask[m.geom_bodyid == body] = True
            else:
                raise ConfigError(f"{type(self).__name__}.allowed_contacts", name,
                                  "a contact group (" + ", ".join(CONTACT_GROUPS)
                                  + ") or a geom or body name")
        return mask

    def _prepare_contacts(self, backend: MujocoBackend) -> None:
        robot = self.contact_group(backend, "robot")
        # unintended[g1, g2]: a robot geom touching anything, unless the pair is allowed
        bad = robot[:, None] | robot[None, :]
        for a, b in self.allowed_contacts:
            ga, gb = self.contact_group(backend, a), self.contact_group(backend, b)
            bad &= ~((ga[:, None] & gb[None, :]) | (gb[:, None] & ga[None, :]))
        backend._unintended = bad  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ Env API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset: pick the template (fixed or drawn), reset its backend, draw the goal."""
        import gymnasium as gym

        gym.Env.reset(self, seed=seed)
        rng = self.np_random
        template = self.fixed_template or self.task.choose_template(rng)
        if options and options.get("template"):
            template = self.task.template(options["template"])
        self.template = template
        self.reset_options = dict(options or {})
        self.backend = self._backend_for(template)
        self.backend.reset(seed if seed is not None else -1, rng=rng)
        self.goal = self.sample_goal(rng, template)
        self.after_reset(rng)
        MujocoPhysics(self.backend.model, self.backend.data).forward()
        self.tracker = self.make_tracker(self.goal)
        self.physics_time = 0.0
        self.last_contact_force, self.last_collision = 0.0, False
        state = self.true_state()
        self.last_state = state
        self.tracker.update(self.backend.time, state)
        info = self._task_info(reset=True)
        self.step_info(info, state)
        return self.policy_observation(state), info

    def step(self, action: dict[str, Any]
             ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """One control step; the tracker sees the true state (:meth:`true_state`) afterwards."""
        self.before_physics(action)
        t0 = time.perf_counter()
        self.backend.step(action)
        self.physics_time += time.perf_counter() - t0
        self.last_contact_force, self.last_collision = self._contacts()
        self.after_physics()
        state = self.true_state()
        self.last_state = state
        assert self.tracker is not None
        new = self.tracker.update(self.backend.time, state)
        success, _ = self.tracker.success(state)
        info = self._task_info(success=success)
        info["new_stages"] = new
        self.step_info(info, state)
        return (self.policy_observation(state), float(len(self.tracker.reached)), bool(success),
                False, info)

    def restore_progress(self, reached: Sequence[tuple[str, float]]) -> dict[str, np.ndarray]:
        """After ``backend.set_state`` put a reset episode into a snapshot's physics state:
        the stages it had reached (name, time), in order. Returns the observation.

        Raises:
            ConfigError: ``reached`` is not a prefix of this episode's stages.
        """
        assert self.tracker is not None
        names = [str(n) for n, _ in reached]
        if tuple(names) != self.tracker.stages[:len(names)]:
            raise ConfigError("reached", names,
                              f"a prefix of the stages {list(self.tracker.stages)}")
        self.tracker.reached = [(n, float(t)) for n, t in reached]
        self.last_contact_force, self.last_collision = self._contacts()
        self.last_state = self.true_state()
        return self.policy_observation(self.last_state)

    def dense_reward(self) -> float:
        """Dense task progress in [0, 1] after the last reset or step (the RL interface's
        default reward, ``reward_mode="dense"``): stages reached plus progress toward the next
        one, :meth:`~clawgym_ros.tasks.base.StageTracker.progress` at :attr:`reward_scale`.
        The step's own reward (the Dict interface) stays the number of stages reached."""
        assert self.tracker is not None
        return self.tracker.progress(self.last_state, self.reward_scale)

    def true_state(self) -> dict[str, np.ndarray]:
        """The unperturbed state (what stage validators read); subclasses may add task
        signals (keys outside the observation space are not shown to the policy)."""
        return self.backend.observation(cameras=())

    def policy_observation(self, state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The observation returned by reset/step: the observation-space keys of ``state``
        (copies: wrappers may perturb them in place) plus the configured camera images."""
        keys = self.observation_space.spaces
        obs = {k: np.array(v, copy=True) for k, v in state.items() if k in keys}
        if self.backend.config.cameras:
            images = self.backend.observation()
            obs.update({k: v for k, v in images.items() if k in keys and k not in obs})
        return obs

    def _task_info(self, reset: bool = False, success: bool | None = None) -> dict[str, Any]:
        assert self.tracker is not None
        info: dict[str, Any] = {"time": self.backend.time,
                                "stages_reached": self.tracker.reached_names,
                                "contact_force": self.last_contact_force,
                                "collision": self.last_collision}
        if reset:
            info.update(template=self.template.name, split=self.template.split,
                        goal=self.goal_dict(), stages=list(self.tracker.stages))
        else:
            if success is None:
                success = self.tracker.success(self.true_state())[0]
            info["success"] = bool(success)
        return info

    def goal_dict(self) -> dict[str, Any]:
        """The goal as a JSON-able dict (``record.goal``)."""
        to_dict = getattr(self.goal, "to_dict", None)
        return to_dict() if to_dict is not None else dict(self.goal or {})

    def _contacts(self) -> tuple[float, bool]:
        """(largest contact normal force in N, any unintended contact) at this instant."""
        return contact_summary(self.backend.data, self.backend._unintended)  # type: ignore

    def describe_contacts(self) -> list[str]:
        """Names of the geom pairs in contact now (debugging)."""
        m, d = self.backend.model, self.backend.data
        out = []
        for i in range(d.ncon):
            g1, g2 = d.contact.geom[i]
            out.append(f"{m.geom(g1).name}-{m.geom(g2).name}")
        return out
