"""What one evaluated episode produced: the :class:`EpisodeResult` record.

The rollout side (in-process workers or the ROS evaluator) fills one record per episode; the
metrics, the report and the coordinator read nothing else. Records are plain frozen dataclasses
with a JSON round trip (:meth:`EpisodeResult.to_dict` / :meth:`EpisodeResult.from_dict`) so that
workers can send them across processes and the ROS path can rebuild them from messages.

Time series are sampled at one fixed rate (``EpisodeSeries.rate_hz``) so that derivatives and
durations computed from them mean the same thing for every backend. See
``docs/notes/evaluation_api.md`` for the field-by-field contract.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError

SEED_MAX = 2**63 - 1


def _floats(field: str, values: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    for i, v in enumerate(out):
        if not math.isfinite(v):
            raise ConfigError(f"{field}[{i}]", v, "a finite number")
    return out


@dataclasses.dataclass(frozen=True)
class SkillCall:
    """One skill call the policy made (e.g. ``grasp``), its outcome and its legality.

    Attributes:
        name: skill name from the task's skill vocabulary.
        outcome: ``ok`` or ``failed`` (the skill ran and did / did not achieve its effect) or
            ``skipped`` (it was not executed, e.g. rejected by the grammar).
        legal: whether the call was allowed by the task's skill grammar at that point.
    """

    name: str
    outcome: str = C.SKILL_OK
    legal: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("skill_calls.name", self.name, "a non-empty string")
        check_choice("skill_calls.outcome", self.outcome, C.SKILL_OUTCOMES)
        if not isinstance(self.legal, bool):
            raise ConfigError("skill_calls.legal", self.legal, "true or false")


@dataclasses.dataclass(frozen=True)
class Disturbance:
    """An external disturbance during the episode (a push, a slip, a hand that moved away).

    Attributes:
        time_s: when it happened, seconds from episode start.
        size: its size in the task's documented unit (metres of displacement by default).
        recovery_s: seconds until the tool was back on its nominal path; None if it never was.
    """

    time_s: float
    size: float
    recovery_s: float | None = None

    def __post_init__(self) -> None:
        check_range("disturbances.time_s", self.time_s, 0.0)
        check_range("disturbances.size", self.size, 0.0)
        if self.recovery_s is not None:
            check_range("disturbances.recovery_s", self.recovery_s, 0.0)


@dataclasses.dataclass(frozen=True)
class GpsOutage:
    """A GPS outage (gps_nav): when it ended and when navigation recovered.

    Attributes:
        start_s: outage start, seconds from episode start.
        end_s: outage end (first fix delivered again).
        recovered_s: first time after ``end_s`` at which the position error fell back under the
            task's tolerance; None if it never did before the episode ended.
    """

    start_s: float
    end_s: float
    recovered_s: float | None = None

    def __post_init__(self) -> None:
        check_range("gps_outages.start_s", self.start_s, 0.0)
        check_range("gps_outages.end_s", self.end_s, self.start_s)
        if self.recovered_s is not None:
            check_range("gps_outages.recovered_s", self.recovered_s, self.end_s)

    @property
    def recovery_time(self) -> float | None:
        """Seconds from the end of the outage to recovery (None when not recovered)."""
        return None if self.recovered_s is None else self.recovered_s - self.end_s


@dataclasses.dataclass(frozen=True)
class EpisodeSeries:
    """Time series the human-preference metrics need, all sampled at ``rate_hz``.

    Attributes:
        rate_hz: the fixed sampling rate of every series below.
        tool_speed: tool (end effector or base) speed in m/s, one sample per tick.
        tool_position: optional tool position (x, y, z) in metres per tick; when given, jerk
            is computed from it (third derivative), otherwise from the speed (second
            derivative of speed).
        hand_distance: distance from the tool to the human hand in metres per tick (handover
            tasks; empty otherwise).
        disturbances: disturbance events with their sizes and recovery times.
        gps_outages: GPS outages with their end and recovery times (gps_nav).
    """

    rate_hz: float = 20.0
    tool_speed: tuple[float, ...] = ()
    tool_position: tuple[tuple[float, float, float], ...] = ()
    hand_distance: tuple[float, ...] = ()
    disturbances: tuple[Disturbance, ...] = ()
    gps_outages: tuple[GpsOutage, ...] = ()

    def __post_init__(self) -> None:
        check_range("series.rate_hz", self.rate_hz, 0.0, 10000.0, low_open=True)
        object.__setattr__(self, "tool_speed", _floats("series.tool_speed", self.tool_speed))
        if any(v < 0 for v in self.tool_speed):
            raise ConfigError("series.tool_speed", min(self.tool_speed), "speeds >= 0")
        position = tuple(_floats(f"series.tool_position[{i}]", p)
                         for i, p in enumerate(self.tool_position))
        for i, p in enumerate(position):
            if len(p) != 3:
                raise ConfigError(f"series.tool_position[{i}]", list(p), "three numbers x, y, z")
        object.__setattr__(self, "tool_position", position)
        object.__setattr__(self, "hand_distance",
                           _floats("series.hand_distance", self.hand_distance))
        for name in ("tool_position", "hand_distance"):
            value = getattr(self, name)
            if value and len(value) != len(self.tool_speed):
                raise ConfigError(f"series.{name}", f"{len(value)} samples",
                                  f"empty or as many samples as tool_speed "
                                  f"({len(self.tool_speed)})")
        object.__setattr__(self, "disturbances", tuple(
            d if isinstance(d, Disturbance) else Disturbance(**d) for d in self.disturbances))
        object.__setattr__(self, "gps_outages", tuple(
            g if isinstance(g, GpsOutage) else GpsOutage(**g) for g in self.gps_outages))


@dataclasses.dataclass(frozen=True)
class EpisodeResult:
    """Everything the evaluator scores about one episode.

    Identity and condition (copied from the :class:`~clawgym_ros.evaluation.suites.EpisodeSpec`
    the rollout ran): ``index``, ``seed``, ``perturbation_seed``, ``task``, ``template``,
    ``split`` (``train`` or ``held_out``), ``family`` (cell label: a FAMILY_* name, or
    family names joined by ``+`` for a combination), ``families`` (the components),
    ``intensity`` (the cell's nominal intensity in [0, 1]), and ``perturbation`` (the active
    parameters the perturbations reported for this episode, name -> value, e.g. the merged
    ``Perturbation.state()`` of each family prefixed by the family name).

    Outcome: ``stages`` (the task's ordered stage list), ``stages_reached`` (the prefix of
    ``stages`` whose validators passed, in order), ``skill_calls``, ``violations`` (feasibility
    violations by kind -> count), ``goal_consistent`` (the final state matches the instructed
    goal, e.g. the right object in the right bin; None when the task has no such notion),
    ``success``, ``duration_s`` and ``series``.
    """

    index: int
    seed: int
    task: str
    template: str
    success: bool
    stages: tuple[str, ...]
    stages_reached: tuple[str, ...] = ()
    split: str = C.SPLIT_TRAIN
    family: str = C.FAMILY_NONE
    families: tuple[str, ...] = ()
    intensity: float = 0.0
    perturbation_seed: int = 0
    perturbation: Mapping[str, float] = dataclasses.field(default_factory=dict)
    skill_calls: tuple[SkillCall, ...] = ()
    violations: Mapping[str, int] = dataclasses.field(default_factory=dict)
    goal_consistent: bool | None = None
    duration_s: float = 0.0
    series: EpisodeSeries = dataclasses.field(default_factory=EpisodeSeries)
    #: Restorable snapshots of where a failed episode failed
    #: (:class:`~clawgym_ros.evaluation.failure_states.FailureState`; in-process rollouts in
    #: task worlds). Not part of the record's identity: equal records may differ here (the ROS
    #: path records none), and :meth:`to_dict` leaves them out (the report stores them).
    failure_states: tuple[Any, ...] = dataclasses.field(default=(), compare=False, repr=False)
    #: Episodes of a ``disturbance`` cell only (:data:`RECOVERY_KEYS`): whether the event
    #: fired (``disturbed``), ``event``, ``step`` (the control step it began, 1-based),
    #: ``time_s``, ``stages_before`` (stages reached then), ``lost_stage``, ``recovered_step``
    #: and ``steps_to_recover`` (null when never recovered), ``delivered`` (the episode's
    #: success). None elsewhere, and then left out of :meth:`to_dict` (records of other
    #: episodes, and the reports holding them, keep their ids).
    recovery: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_int("index", self.index, 0)
        check_int("seed", self.seed, 0, SEED_MAX)
        check_int("perturbation_seed", self.perturbation_seed, 0, SEED_MAX)
        for name in ("task", "template"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(name, getattr(self, name), "a non-empty string")
        check_choice("split", self.split, C.SPLITS)
        if not isinstance(self.success, bool):
            raise ConfigError("success", self.success, "true or false")
        families = tuple(self.families)
        for f in families:
            check_choice("families", f, C.PERTURBATION_FAMILIES[1:])
        object.__setattr__(self, "families", families)
        expected = "+".join(families) if families else C.FAMILY_NONE
        if self.family != expected:
            raise ConfigError("family", self.family, f"{expected!r} (the joined families)")
        check_range("intensity", self.intensity, 0.0, 1.0)
        if not families and self.intensity != 0.0:
            raise ConfigError("intensity", self.intensity, "0 for the unperturbed cell")
        stages = tuple(self.stages)
        reached = tuple(self.stages_reached)
        if not stages:
            raise ConfigError("stages", list(stages), "the task's non-empty stage list")
        if reached != stages[: len(reached)]:
            raise ConfigError("stages_reached", list(reached),
                              f"a prefix of the stage list {list(stages)}")
        object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "stages_reached", reached)
        perturbation = {str(k): float(v) for k, v in dict(self.perturbation).items()}
        _floats("perturbation", perturbation.values())
        object.__setattr__(self, "perturbation", dict(sorted(perturbation.items())))
        violations = {}
        for kind, count in sorted(dict(self.violations).items()):
            violations[str(kind)] = check_int(f"violations.{kind}", count, 0)
        object.__setattr__(self, "violations", violations)
        object.__setattr__(self, "skill_calls", tuple(
            s if isinstance(s, SkillCall) else SkillCall(**s) for s in self.skill_calls))
        if self.goal_consistent is not None and not isinstance(self.goal_consistent, bool):
            raise ConfigError("goal_consistent", self.goal_consistent, "true, false or null")
        check_range("duration_s", self.duration_s, 0.0)
        if self.recovery is not None:
            object.__setattr__(self, "recovery", _recovery(self.recovery, self.success))
        if isinstance(self.series, Mapping):
            object.__setattr__(self, "series", EpisodeSeries(**_series_kwargs(self.series)))

    @property
    def failed_stage(self) -> str | None:
        """Where a failed episode stopped: the first stage not reached, or ``final_check``
        when every stage passed but the success conditions did not; None on success."""
        if self.success:
            return None
        if len(self.stages_reached) < len(self.stages):
            return self.stages[len(self.stages_reached)]
        return C.STAGE_FINAL_CHECK

    @property
    def nominal(self) -> bool:
        """Whether the episode ran without perturbation."""
        return not self.families

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (lists instead of tuples); inverse of :meth:`from_dict`."""
        data = dataclasses.asdict(dataclasses.replace(self, failure_states=()))
        del data["failure_states"]
        if data["recovery"] is None:
            del data["recovery"]
        return _plain(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | None = None) -> EpisodeResult:
        """Build and validate a record from :meth:`to_dict` output.

        Raises:
            ConfigError: unknown or invalid fields (naming the source, e.g. a file).
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ConfigError(unknown[0], data[unknown[0]], "one of " + ", ".join(sorted(fields)),
                              source)
        kwargs = dict(data)
        if "series" in kwargs and isinstance(kwargs["series"], Mapping):
            kwargs["series"] = EpisodeSeries(**_series_kwargs(kwargs["series"]))
        try:
            return cls(**kwargs)
        except TypeError as err:
            raise ConfigError("EpisodeResult", sorted(data), str(err), source) from None
        except ConfigError as err:
            if source and not err.source:
                raise ConfigError(err.field, err.value, err.allowed, source) from None
            raise


#: Keys of :attr:`EpisodeResult.recovery` (all present when ``disturbed``; else only the
#: first three: the family was on but its trigger stage was never reached).
RECOVERY_KEYS = ("disturbed", "event", "delivered", "step", "time_s", "stages_before",
                 "lost_stage", "recovered_step", "steps_to_recover")


def _recovery(data: Mapping[str, Any], success: bool) -> dict[str, Any]:
    """A validated recovery entry (``delivered`` set from the episode's success)."""
    if not isinstance(data, Mapping):
        raise ConfigError("recovery", data, "a mapping with keys " + ", ".join(RECOVERY_KEYS))
    unknown = sorted(set(data) - set(RECOVERY_KEYS))
    if unknown:
        raise ConfigError(f"recovery.{unknown[0]}", data[unknown[0]],
                          "one of " + ", ".join(RECOVERY_KEYS))
    out = {k: data[k] for k in RECOVERY_KEYS if k in data}
    out["delivered"] = bool(success)
    if not isinstance(out.get("disturbed"), bool):
        raise ConfigError("recovery.disturbed", out.get("disturbed"), "true or false")
    if not isinstance(out.get("event", ""), str):
        raise ConfigError("recovery.event", out.get("event"), "a string")
    out.setdefault("event", "")
    if not out["disturbed"]:
        return {k: out[k] for k in ("disturbed", "event", "delivered")}
    for key in ("step", "stages_before"):
        out[key] = check_int(f"recovery.{key}", out.get(key), 0)
    out["time_s"] = check_range("recovery.time_s", out.get("time_s"), 0.0)
    out["lost_stage"] = str(out.get("lost_stage", ""))
    for key in ("recovered_step", "steps_to_recover"):
        if out.get(key) is not None:
            out[key] = check_int(f"recovery.{key}", out[key], 0)
        else:
            out[key] = None
    return {k: out[k] for k in RECOVERY_KEYS}


def _series_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
    fields = {f.name for f in dataclasses.fields(EpisodeSeries)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(f"series.{unknown[0]}", data[unknown[0]],
                          "one of " + ", ".join(sorted(fields)))
    return dict(data)


def _plain(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj
