"""Disturbance: one seeded mid-episode event per episode, and the recovery it asks for.

Events (which ones a task supports, and the stage that triggers each, is declared by the task:
``Task.disturbances``, ``{event: trigger stage}``; pick_place declares the first four):

- ``object_drop``: the object is knocked out of the gripper during transport: teleported to a
  seeded spot on the table near where it was (at rest, upright, seeded yaw); the gripper
  keeps its command;
- ``object_displace``: the same right after the grasp, while the object is still at the table;
- ``goal_move``: the place goal moves (pick_place: to the other bin);
- ``arm_push``: an external force on the gripper hand (``xfrc_applied``) for ``push_steps``
  control steps, in a seeded horizontal direction;
- ``gps_outage`` (gps_nav: trigger ``waypoint_1``, i.e. mid-route): the GPS loses its fix
  for ``outage_s`` seconds (at intensity 1, times the drawn fraction ``u``): the ``gps``
  observation holds the last fix and ``info["gps_status"]`` is -1 (no fix), as under the
  ``gps_dropout`` family; wheel odometry and the IMU go on.

Trigger and size (all drawn when the episode begins, from the perturbation's own seeded
streams, so they do not depend on what the policy does): the event fires ``delay`` control
steps after the step at which the task's trigger stage is first reached, ``delay`` uniform in
``[0, max_delay_steps]``; distances and forces are ``value * intensity`` at the drawn
fraction ``u`` in [0.5, 1] (pick_place puts a moved object its footprint radius + 5 cm +
that distance from where it was, so it always leaves the fingers). ``goal_move`` has no size
(the goal moves to the other bin whatever the intensity); a ``gps_outage``'s size is its
length in seconds.

Recovery (:class:`RecoveryWatch`, fed by the wrapper with the task's stage tracker): at the
firing step the episode had reached ``k`` stages. The disturbance is *recovered* at the first
step at which the episode makes stage progress again: the last stage reached before it
(index ``k - 1``), once it stops holding (the "lost" stage: ``lift`` when the object was
knocked out of the gripper), holds again; or a stage beyond the first ``k`` is reached (when
nothing was lost, e.g. the goal moved before transport). ``steps_to_recover`` counts control
steps from the firing step. Whether the episode still delivered is its success. A GPS outage
takes no stage away (gps_nav's waypoint stages are milestones, not states that hold), so its
recovery is the next stage reached: the time to regained progress.

The core is pure (NumPy); :class:`DisturbanceWrapper` (in-process; the family's registry row
is in ``clawgym_ros.perturbations``) applies
the events through the task env's :meth:`apply_disturbance` hook and the backend.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig, _help
from clawgym_ros.perturbations.gps import STATUS_NO_FIX
from clawgym_ros.perturbations.wrappers import Obs, PerturbationWrapper

EVENT_OBJECT_DROP = "object_drop"
EVENT_OBJECT_DISPLACE = "object_displace"
EVENT_GOAL_MOVE = "goal_move"
EVENT_ARM_PUSH = "arm_push"
EVENT_GPS_OUTAGE = "gps_outage"
EVENTS: tuple[str, ...] = (EVENT_OBJECT_DROP, EVENT_OBJECT_DISPLACE, EVENT_GOAL_MOVE,
                           EVENT_ARM_PUSH, EVENT_GPS_OUTAGE)
#: ``event: any`` draws one of the task's supported events per episode.
EVENT_ANY = "any"
#: The body an arm push acts on.
PUSH_BODY = "gripper_hand"
#: Events the wrapper applies itself (the rest through the task env's ``apply_disturbance``).
WRAPPER_EVENTS: tuple[str, ...] = (EVENT_ARM_PUSH, EVENT_GPS_OUTAGE)
#: Events that take no stage away: recovered when the next stage is reached.
PROGRESS_EVENTS: tuple[str, ...] = (EVENT_GPS_OUTAGE,)


@dataclasses.dataclass(frozen=True)
class DisturbanceConfig(PerturbationConfig):
    """One mid-episode event per episode (sizes at intensity 1)."""

    family: str = dataclasses.field(
        default=C.FAMILY_DISTURBANCE, metadata=_help("disturbance, or 'none' to disable"))
    event: str = dataclasses.field(
        default=EVENT_OBJECT_DROP,
        metadata=_help("object_drop, object_displace, goal_move, arm_push, gps_outage, or "
                       "any (one of the task's, drawn per episode)"))
    max_delay_steps: int = dataclasses.field(
        default=40, metadata=_help("delay after the trigger stage, uniform in [0, this] "
                                   "control steps, [0, 10000]"))
    displacement_m: float = dataclasses.field(
        default=0.08, metadata=_help("how far a dropped/displaced object lands beyond the "
                                     "fingers' clearance, m at intensity 1, [0, 0.3]"))
    push_force_n: float = dataclasses.field(
        default=60.0, metadata=_help("arm push force, N at intensity 1, [0, 500]"))
    push_steps: int = dataclasses.field(
        default=10, metadata=_help("control steps the push lasts, [1, 1000]"))
    outage_s: float = dataclasses.field(
        default=8.0, metadata=_help("GPS outage length, s at intensity 1, [0, 600]"))

    FAMILY = C.FAMILY_DISTURBANCE

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("event", self.event, (*EVENTS, EVENT_ANY))
        check_int("max_delay_steps", self.max_delay_steps, 0, 10_000)
        check_range("displacement_m", self.displacement_m, 0.0, 0.3)
        check_range("push_force_n", self.push_force_n, 0.0, 500.0)
        check_int("push_steps", self.push_steps, 1, 1000)
        check_range("outage_s", self.outage_s, 0.0, 600.0)


def supported_events(task: Any) -> dict[str, str]:
    """``{event: trigger stage}`` a task (instance or class) declares (empty: none)."""
    return dict(getattr(task, "disturbances", None) or {})


def check_event(event: str, task: Any, field: str = "disturbance.event",
                source: str | None = None) -> str:
    """``event`` if ``task`` supports it (``any``: if it supports one at all).

    Raises:
        ConfigError: naming the task and the events it supports.
    """
    return _check(event, supported_events(task), getattr(task, "name", str(task)), field,
                  source)


def _check(event: str, events: Mapping[str, str], name: str, field: str = "disturbance.event",
           source: str | None = None) -> str:
    if event == EVENT_ANY and events:
        return event
    if event not in events:
        allowed = (f"one of {', '.join(events)} or any (supported by {name})" if events
                   else f"none: task {name} supports no disturbance")
        raise ConfigError(field, event, allowed, source)
    return event


class Disturbance(Perturbation):
    """The event schedule of one episode (see the module docstring); the wrapper feeds it the
    number of stages reached and asks it each step whether to fire."""

    config_cls = DisturbanceConfig

    def _restore(self) -> None:
        self.event = "" if self.config.event == EVENT_ANY else self.config.event
        self.trigger_stage = ""
        self.delay = 0
        self.u_size = 0.0
        self.angle = 0.0
        self.yaw = 0.0
        self.size = 0.0
        self.armed_step: int | None = None
        self.fired_step: int | None = None
        #: control steps a GPS outage lasts (set when it fires)
        self.outage_steps = 0
        self._step = 0

    def _sample_episode(self, rng: np.random.Generator) -> None:
        c = self.config
        self.delay = int(rng.integers(0, c.max_delay_steps + 1))
        self.u_size = float(rng.uniform(0.5, 1.0))
        self.angle = float(rng.uniform(-math.pi, math.pi))
        self.yaw = float(rng.uniform(-math.pi, math.pi))

    def bind(self, events: Mapping[str, str], task: str = "") -> None:
        """Choose the episode's event among the task's ``{event: trigger stage}`` (``any``:
        drawn from the ``event`` stream) and its trigger stage.

        Raises:
            ConfigError: the task does not support the configured event.
        """
        if not self.enabled:
            return
        _check(self.config.event, events, task)
        if self.config.event == EVENT_ANY:
            names = sorted(events)
            self.event = names[int(self.stream("event").integers(len(names)))]
        self.trigger_stage = events[self.event]

    # ------------------------------------------------------------------ per step
    def before_step(self, reached: Sequence[str]) -> bool:
        """Advance one control step; True when the event fires at this step.

        Args:
            reached: names of the stages reached before this step.
        """
        self._step += 1
        if not self.enabled or not self.trigger_stage or self.fired_step is not None:
            return False
        if self.armed_step is None and self.trigger_stage in reached:
            self.armed_step = self._step
        if self.armed_step is not None and self._step >= self.armed_step + self.delay:
            self.fired_step = self._step
            return True
        return False

    @property
    def step_count(self) -> int:
        """Control steps taken in this episode."""
        return self._step

    @property
    def fired(self) -> bool:
        return self.fired_step is not None

    @property
    def pushing(self) -> bool:
        """Whether an arm push acts during the current step."""
        return (self.event == EVENT_ARM_PUSH and self.fired_step is not None
                and self._step < self.fired_step + self.config.push_steps)

    @property
    def in_outage(self) -> bool:
        """Whether the GPS has no fix after the current step (a ``gps_outage`` in progress)."""
        return (self.event == EVENT_GPS_OUTAGE and self.fired_step is not None
                and self._step < self.fired_step + self.outage_steps)

    @property
    def active(self) -> bool:
        return self.fired_step == self._step or self.pushing or self.in_outage

    def draw(self) -> dict[str, float]:
        """The event's size and geometry: ``distance`` (m beyond the clearance), ``force`` (N),
        ``outage_s`` (s), ``angle`` (direction, rad), ``yaw`` (of a dropped object, rad)."""
        c, s = self.config, self.intensity
        return {"distance": c.displacement_m * s * self.u_size,
                "force": c.push_force_n * s * self.u_size,
                "outage_s": c.outage_s * s * self.u_size,
                "angle": self.angle, "yaw": self.yaw}

    def _parameters(self) -> dict[str, float]:
        events = (*EVENTS,)
        return {
            "event": float(events.index(self.event)) if self.event in events else -1.0,
            "delay_steps": float(self.delay),
            "fired_step": float(self.fired_step) if self.fired_step is not None else -1.0,
            "size": float(self.size),
        }


class RecoveryWatch:
    """Whether and when an episode regains stage progress after a disturbance (module
    docstring), from the task's stage tracker on the true state after every step."""

    def __init__(self) -> None:
        self.event = ""
        self.step: int | None = None
        self.time_s = 0.0
        self.stages_before = 0
        self.lost_stage = ""
        self.recovered_step: int | None = None
        self._lost = False
        self._watch_lost = True

    def start(self, event: str, step: int, time_s: float, stages_before: int) -> None:
        """The event fired at control step ``step`` with ``stages_before`` stages reached."""
        self.event, self.step, self.time_s = event, int(step), float(time_s)
        self.stages_before = int(stages_before)
        # An event that takes no stage away: only new progress counts.
        self._watch_lost = event not in PROGRESS_EVENTS

    def observe(self, step: int, tracker: Any, state: Mapping[str, np.ndarray]) -> None:
        """The true state after control step ``step`` (from the firing step on)."""
        if self.step is None or self.recovered_step is not None:
            return
        k = self.stages_before
        if len(tracker.reached) > k:
            self.recovered_step = int(step)
            return
        if k == 0 or not self._watch_lost:
            return
        holds = bool(tracker.check(k - 1, state))
        if not holds and not self._lost:
            self._lost = True
            self.lost_stage = tracker.stages[k - 1]
        elif holds and self._lost:
            self.recovered_step = int(step)

    def record(self) -> dict[str, Any]:
        """The episode's recovery entry (without ``delivered``: the evaluator adds it)."""
        if self.step is None:
            return {"disturbed": False, "event": self.event}
        return {"disturbed": True, "event": self.event, "step": self.step,
                "time_s": round(self.time_s, 9), "stages_before": self.stages_before,
                "lost_stage": self.lost_stage, "recovered_step": self.recovered_step,
                "steps_to_recover": (None if self.recovered_step is None
                                     else self.recovered_step - self.step)}


class DisturbanceWrapper(PerturbationWrapper):
    """In-process front end: binds the event to the task at reset, fires it through the task
    env's ``apply_disturbance(event, draw, stages_reached) -> size`` (arm pushes through the
    backend's ``xfrc_applied``), watches the recovery and reports it in
    ``info["disturbance"]`` on reset and every step (the recovery record) and in the perturbation
    record (``fired_step``, ``size``)."""

    core_cls = Disturbance
    family = C.FAMILY_DISTURBANCE

    def _after_reset(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        env = self.env.unwrapped
        core: Disturbance = self.perturbation
        self._reached: list[str] = list(info.get("stages_reached", []))
        self.watch = RecoveryWatch()
        if core.enabled:
            task = getattr(env, "task", None)
            if task is None:
                raise ConfigError("disturbance", core.config.event,
                                  "a task world (the disturbance needs the task's stages)")
            core.bind(supported_events(task), getattr(task, "name", ""))
            if core.event not in WRAPPER_EVENTS and not hasattr(env, "apply_disturbance"):
                raise ConfigError("disturbance", core.event, f"an event {task.name}'s env "
                                  "applies (it has no apply_disturbance)")
            self._fix = obs.get(C.OBS_GPS)
            self.watch.event = core.event
            info[C.INFO_DISTURBANCE] = self.watch.record()
        return obs, info

    def _push(self, force: np.ndarray) -> None:
        from clawgym_ros.sim.world import name_index

        b = self.backend
        body = name_index(b.model, "body", PUSH_BODY)
        b.data.xfrc_applied[body, :3] = force

    def _before_step(self) -> None:
        core: Disturbance = self.perturbation
        was_pushing = core.pushing
        if core.before_step(self._reached):
            env = self.env.unwrapped
            draw = core.draw()
            if core.event == EVENT_ARM_PUSH:
                core.size = draw["force"]
            elif core.event == EVENT_GPS_OUTAGE:
                core.size = draw["outage_s"]
                core.outage_steps = max(1, round(core.size / self.backend.control_dt))
            else:
                core.size = float(env.apply_disturbance(core.event, draw, list(self._reached)))
            self.watch.start(core.event, core.step_count, self.backend.time,
                             len(self._reached))
        if core.pushing:
            f = core.draw()["force"]
            self._push(np.array([f * math.cos(core.angle), f * math.sin(core.angle), 0.0]))
        elif was_pushing:
            self._push(np.zeros(3))

    def _after_step(self, obs: Obs, info: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        self._reached = list(info.get("stages_reached", self._reached))
        core: Disturbance = self.perturbation
        if core.enabled and C.OBS_GPS in obs:
            if core.in_outage:
                # No fix: the last one held, as the gps_dropout wrapper shows an outage.
                obs = {**obs, C.OBS_GPS: self._fix.copy()}
                info[C.INFO_GPS_STATUS] = STATUS_NO_FIX
            else:
                self._fix = obs[C.OBS_GPS]
        if core.enabled:
            env = self.env.unwrapped
            if self.watch.step is not None and env.tracker is not None:
                self.watch.observe(core.step_count, env.tracker, env.last_state)
            info[C.INFO_DISTURBANCE] = self.watch.record()
        return obs, info
