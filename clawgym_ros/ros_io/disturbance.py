"""Disturbances through ROS: sim_node's ``sim/set_disturbance`` request and its
``disturbance_state`` message, both in existing types (no new interface).

``sim/set_disturbance`` (clawgym_interfaces/SetPerturbation): ``family`` ``disturbance`` (or
``none``: no disturbance), ``intensity``, ``schedule``, ``seed`` (the cell's perturbation
seed) and every numeric field of :class:`~clawgym_ros.perturbations.disturbance.
DisturbanceConfig` as a parameter; the ``event`` name rides as the parameter ``event``, its
index in :data:`EVENT_CODES` (``EVENTS`` then ``any``). It configures the episodes that follow:
the next ``sim/reset(seed)`` begins the episode with that seed, as ``env.reset(seed=...)``
begins it on the in-process wrapper.

``disturbance_state`` (clawgym_interfaces/PerturbationState, one per control step and at
reset, stamped with the simulation time): the core's :meth:`~clawgym_ros.perturbations.base.
Perturbation.state` as parameters (what the episode record's ``perturbation`` holds) and the
recovery record (:meth:`~clawgym_ros.perturbations.disturbance.RecoveryWatch.record`) as
``recovery.*`` parameters: event as its index in ``EVENTS`` (-1: none), the lost stage as its
index in the task's stages (-1: none), steps as whole numbers (-1: None). Every value is a
float64, so the round trip is exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_interfaces.msg import PerturbationParameter, PerturbationState
from clawgym_interfaces.srv import SetPerturbation
from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import PerturbationConfig
from clawgym_ros.perturbations.disturbance import EVENT_ANY, EVENTS, DisturbanceConfig

#: Codes of the ``event`` parameter of ``sim/set_disturbance``.
EVENT_CODES: tuple[str, ...] = (*EVENTS, EVENT_ANY)
#: Recovery record keys sent as whole numbers (-1 = None) and the prefix of their names.
_RECOVERY_INTS = ("step", "stages_before", "recovered_step", "steps_to_recover")
_PREFIX = "recovery."


def disturbance_request(config: DisturbanceConfig | None) -> SetPerturbation.Request:
    """The ``sim/set_disturbance`` request configuring ``config`` (None: no disturbance)."""
    if config is None or config.family == C.FAMILY_NONE:
        return SetPerturbation.Request(family=C.FAMILY_NONE)
    request = SetPerturbation.Request(family=config.family, intensity=float(config.intensity),
                                      schedule=config.schedule, seed=int(config.seed))
    params = [PerturbationParameter(name="event",
                                    value=float(EVENT_CODES.index(config.event)))]
    params += [PerturbationParameter(name=n, value=float(getattr(config, n)))
               for n in DisturbanceConfig.parameter_names()]
    request.parameters = params
    return request


def disturbance_config(request: SetPerturbation.Request) -> DisturbanceConfig | None:
    """The config a ``sim/set_disturbance`` request asks for (None: no disturbance).

    Raises:
        ConfigError: another family, an unknown event code or parameter, or a value out of
            range (each named).
    """
    if request.family in ("", C.FAMILY_NONE):
        return None
    if request.family != C.FAMILY_DISTURBANCE:
        raise ConfigError("sim/set_disturbance.family", request.family,
                          f"{C.FAMILY_DISTURBANCE} or {C.FAMILY_NONE}")
    values = {p.name: p.value for p in request.parameters}
    code = values.pop("event", 0.0)
    if code != int(code) or not 0 <= int(code) < len(EVENT_CODES):
        raise ConfigError("sim/set_disturbance.parameters.event", code,
                          "an event code: " + ", ".join(f"{i} = {e}"
                                                        for i, e in enumerate(EVENT_CODES)))
    config = DisturbanceConfig(family=request.family, intensity=float(request.intensity),
                               schedule=request.schedule or PerturbationConfig.schedule,
                               seed=int(request.seed), event=EVENT_CODES[int(code)])
    return config.with_overrides(values)


def disturbance_state_msg(state: Mapping[str, float], record: Mapping[str, Any],
                          stages: Sequence[str], config: DisturbanceConfig, active: bool,
                          stamp_ns: int) -> PerturbationState:
    """The ``disturbance_state`` message of one step: the core's ``state`` and the recovery
    ``record`` (``stages``: the task's, to number the lost stage)."""
    params = [PerturbationParameter(name=k, value=float(v)) for k, v in state.items()]
    rec = {"disturbed": 1.0 if record.get("disturbed") else 0.0,
           "event": float(EVENTS.index(record["event"])) if record.get("event") in EVENTS
           else -1.0}
    if record.get("disturbed"):
        lost = record.get("lost_stage", "")
        rec["time_s"] = float(record["time_s"])
        rec["lost_stage"] = float(list(stages).index(lost)) if lost else -1.0
        for key in _RECOVERY_INTS:
            value = record.get(key)
            rec[key] = -1.0 if value is None else float(value)
    params += [PerturbationParameter(name=_PREFIX + k, value=v) for k, v in rec.items()]
    msg = PerturbationState(family=config.family, intensity=float(config.intensity),
                            schedule=config.schedule, seed=int(config.seed),
                            active=bool(active), parameters=params)
    msg.header.stamp.sec = int(stamp_ns) // 1_000_000_000
    msg.header.stamp.nanosec = int(stamp_ns) % 1_000_000_000
    return msg


def disturbance_state_values(msg: PerturbationState, stages: Sequence[str]
                             ) -> tuple[dict[str, float], dict[str, Any]]:
    """(core state, recovery record) of a ``disturbance_state`` message: the inverse of
    :func:`disturbance_state_msg` (the record as the in-process wrapper reports it).

    Raises:
        ConfigError: a lost stage or event code out of range.
    """
    state: dict[str, float] = {}
    rec: dict[str, float] = {}
    for p in msg.parameters:
        if p.name.startswith(_PREFIX):
            rec[p.name[len(_PREFIX):]] = float(p.value)
        else:
            state[p.name] = float(p.value)
    code = int(rec.get("event", -1.0))
    if not -1 <= code < len(EVENTS):
        raise ConfigError("disturbance_state.recovery.event", code,
                          f"-1 or an index of {', '.join(EVENTS)}")
    record: dict[str, Any] = {"disturbed": rec.get("disturbed", 0.0) == 1.0,
                              "event": EVENTS[code] if code >= 0 else ""}
    if not record["disturbed"]:
        return state, record
    lost = int(rec.get("lost_stage", -1.0))
    if not -1 <= lost < len(stages):
        raise ConfigError("disturbance_state.recovery.lost_stage", lost,
                          f"-1 or an index of the task's {len(stages)} stages")
    record.update(step=int(rec["step"]), time_s=rec["time_s"],
                  stages_before=int(rec["stages_before"]),
                  lost_stage=stages[lost] if lost >= 0 else "")
    for key in ("recovered_step", "steps_to_recover"):
        record[key] = None if rec[key] < 0 else int(rec[key])
    return state, record
