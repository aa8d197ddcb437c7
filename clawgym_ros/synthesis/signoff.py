"""Dual sign-off of synthesized episodes: task semantics and physical feasibility.

Two independent checks look at an :class:`~clawgym_ros.synthesis.episode.EpisodeRecord`; an
episode is kept only if both return no :class:`Rejection`. Reason codes are stable strings from
``constants.REJECTION_REASONS`` (they name rejection counters in summaries and messages):

semantic (:class:`SemanticValidator`)
    ``stage_order``, ``illegal_skill_sequence``, ``goal_inconsistent``, ``not_successful``
physical (:class:`FeasibilityCheck`)
    ``joint_position_limit``, ``joint_velocity_limit``, ``effort_limit``, ``contact_force``,
    ``unintended_collision``, ``unstable_physics``

Episodes with a mid-episode disturbance (``disturbance`` family) are signed off as usual, with
two allowances for the event itself and nothing else: the skill interrupted by it (a call that
ended failed with detail ``disturbed: ...``) may end a legal prefix of the task's grammar, the
expert's restart from there must follow the task's resume grammar
(:attr:`SemanticValidator.resume_grammar`: its recovery segment, then further placements);
and the gripper fingers may exceed their speed limit on the one control step the event fired
at (the object vanishing from a closed gripper lets the fingers snap shut:
:class:`DisturbanceExcuse`). Everything else (success, stage order, goal, every other joint
and step, contacts) is checked unchanged.

Everything here is picklable (no lambdas) so that sign-off runs inside worker processes.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.synthesis.episode import EpisodeRecord
from clawgym_ros.synthesis.grammar import SkillGrammar

INF = math.inf
#: Detail prefix of a skill call the expert ended because a disturbance changed the scene.
DISTURBED_DETAIL = "disturbed:"


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why an episode was rejected: a stable ``code`` and a human-readable ``detail``."""

    code: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


def reason_codes(rejections: Sequence[Rejection]) -> list[str]:
    """Distinct codes of ``rejections`` in first-appearance order."""
    return list(dict.fromkeys(r.code for r in rejections))


# --- semantic validation --------------------------------------------------------------------

#: A goal check: returns None when the achieved state is consistent with the goal, else why not.
GoalCheck = Callable[[EpisodeRecord], "str | None"]


@dataclasses.dataclass(frozen=True)
class SemanticValidator:
    """Task-semantic sign-off of one task (or template).

    Args:
        stages: the task's stages in the order they must be reached (repeat names for composed
            tasks, e.g. two placements for ``stack``).
        grammar: legal skill sequences (a :class:`SkillGrammar` or its pattern string).
        goal_check: optional module-level function ``(record) -> None | reason``; when None,
            :func:`default_goal_check` compares ``record.goal`` with ``record.achieved``.
        goal_tolerance: absolute tolerance of the default goal check for numbers.
        ignore_failed_skills: drop calls whose outcome is not ``ok`` before the grammar check
            (for grammars that describe only the successful calls of retried skills).
        resume_grammar: legal skill sequences after a skill a disturbance interrupted (a call
            ended failed with detail ``disturbed: ...``); None = such episodes are checked
            against ``grammar`` alone (and rejected).

    A successful episode must reach all stages in order, with a complete legal skill sequence
    and a consistent goal. A failed episode is rejected as ``not_successful``; its stages and
    skills need only be a legal prefix (otherwise they are reported too). With disturbed
    calls, the calls up to the first one must be a legal prefix under ``grammar``, those
    between two a legal prefix under ``resume_grammar``, and the rest a legal (complete when
    successful) sequence under ``resume_grammar``.
    """

    stages: tuple[str, ...]
    grammar: SkillGrammar | str
    goal_check: GoalCheck | None = None
    goal_tolerance: float = 0.01
    ignore_failed_skills: bool = False
    resume_grammar: SkillGrammar | str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        if isinstance(self.grammar, str):
            object.__setattr__(self, "grammar", SkillGrammar(self.grammar))
        if isinstance(self.resume_grammar, str):
            object.__setattr__(self, "resume_grammar", SkillGrammar(self.resume_grammar))
        check_range("goal_tolerance", self.goal_tolerance, 0.0, None)

    def check(self, record: EpisodeRecord) -> list[Rejection]:
        """All semantic rejections of ``record`` (empty = signed off)."""
        success = bool(record.outcome.success)
        out: list[Rejection] = []
        if not success:
            why = record.outcome.reason or "the task's success condition was not met"
            out.append(Rejection(C.REJECT_NOT_SUCCESSFUL, why))
        stage_problem = self._stage_problem(record, complete=success)
        if stage_problem:
            out.append(Rejection(C.REJECT_STAGE_ORDER, stage_problem))
        cuts = [i for i, c in enumerate(record.skill_calls) if c.outcome != C.SKILL_OK
                and c.detail.startswith(DISTURBED_DETAIL)]
        if cuts and self.resume_grammar is not None:
            detail = self._resumed_problem(list(record.skill_calls), cuts, success)
        else:
            calls = [c for c in record.skill_calls
                     if not self.ignore_failed_skills or c.outcome == C.SKILL_OK]
            assert isinstance(self.grammar, SkillGrammar)
            detail = _grammar_problem(self.grammar, calls, success)
        if detail:
            out.append(Rejection(C.REJECT_SKILL_SEQUENCE, detail))
        if success:
            problem = (self.goal_check(record) if self.goal_check is not None
                       else default_goal_check(record, self.goal_tolerance))
            if problem:
                out.append(Rejection(C.REJECT_GOAL, problem))
        return out

    def _resumed_problem(self, calls: list[Any], cuts: list[int], success: bool) -> str | None:
        """The grammar problem of a disturbed episode's calls, segment by segment (each
        segment ends at a disturbed call; the last runs to the end)."""
        bounds = [0, *(i + 1 for i in cuts), len(calls)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            grammar = self.grammar if k == 0 else self.resume_grammar
            assert isinstance(grammar, SkillGrammar)
            last = k == len(bounds) - 2
            problem = _grammar_problem(grammar, calls[a:b], success and last, offset=a)
            if problem:
                where = "before the first disturbance" if k == 0 else \
                    f"after disturbance {k} (t={calls[a - 1].end:.3f} s)"
                return f"{where}: {problem}"
        return None

    def _stage_problem(self, record: EpisodeRecord, complete: bool) -> str | None:
        names = [s.name for s in record.stages]
        expected = list(self.stages)
        if complete and names != expected:
            return f"stages reached {names}, expected {expected}"
        if not complete and names != expected[:len(names)]:
            return f"stages reached {names} are not a prefix of {expected}"
        times = [s.time for s in record.stages]
        if any(b < a for a, b in zip(times, times[1:])):
            return f"stage times {times} go backwards"
        if record.num_steps and times and (times[0] < record.time[0] - 1e-9
                                           or times[-1] > record.time[-1] + 1e-9):
            return (f"stage times {times} lie outside the episode "
                    f"[{record.time[0]:.3f}, {record.time[-1]:.3f}] s")
        return None


def _grammar_problem(grammar: SkillGrammar, calls: Sequence[Any], complete: bool,
                     offset: int = 0) -> str | None:
    """Why ``calls`` are not a legal (``complete``) sequence under ``grammar``, or None."""
    names = [c.name for c in calls]
    bad = grammar.first_illegal(names, complete=complete)
    if bad is None:
        return None
    if bad < len(names):
        return (f"skill {names[bad]!r} (call {offset + bad}, t={calls[bad].start:.3f} s) "
                f"cannot follow {names[:bad]} under {grammar.pattern!r}")
    return f"sequence {names} is incomplete under {grammar.pattern!r}"


def default_goal_check(record: EpisodeRecord, tolerance: float = 0.01) -> str | None:
    """Compare every ``record.goal`` entry with ``record.achieved``.

    Strings and booleans must be equal; numbers and number lists must agree within
    ``tolerance`` (absolute). Keys only in ``achieved`` are ignored.

    Returns:
        None when consistent, else the first mismatch described.
    """
    for key, want in record.goal.items():
        if key not in record.achieved:
            return f"goal {key!r} has no achieved value"
        got = record.achieved[key]
        if isinstance(want, (str, bool)) or want is None:
            if got != want:
                return f"goal {key!r}={want!r} but achieved {got!r}"
            continue
        try:
            want_arr = np.asarray(want, dtype=np.float64)
            got_arr = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            return f"goal {key!r}={want!r} is not comparable with achieved {got!r}"
        if want_arr.shape != got_arr.shape:
            return f"goal {key!r} has shape {want_arr.shape}, achieved {got_arr.shape}"
        if not np.all(np.abs(want_arr - got_arr) <= tolerance):
            err = float(np.max(np.abs(want_arr - got_arr)))
            return f"goal {key!r} missed by {err:.4g} (> tolerance {tolerance:g})"
    return None


# --- physical feasibility ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JointLimit:
    """Limits of one joint (rad or m; rad/s or m/s; N m or N). inf = unlimited."""

    lower: float = -INF
    upper: float = INF
    velocity: float = INF
    effort: float = INF

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "velocity", "effort"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ConfigError(name, value, "a number (inf allowed)")
        if self.lower > self.upper:
            raise ConfigError("lower", self.lower, f"<= upper ({self.upper})")
        if self.velocity <= 0 or self.effort <= 0:
            raise ConfigError("velocity/effort", (self.velocity, self.effort), "> 0")


@dataclasses.dataclass(frozen=True)
class PhysicalLimits:
    """The limits table and thresholds of the feasibility check.

    Args:
        joints: joint name -> limits. Joints of a record that are not listed are not limited.
        max_contact_force: largest allowed contact force magnitude (N).
        position_tolerance: allowed excursion beyond position limits (rad or m; soft limits).
        velocity_tolerance: allowed relative excess over velocity limits (0.05 = 5 %).
        effort_tolerance: allowed relative excess over effort limits.
        blowup_velocity: any joint speed above this (rad/s or m/s) is unstable physics.
        max_energy_jump: largest allowed increase of total energy between steps (J).
    """

    joints: Mapping[str, JointLimit] = dataclasses.field(default_factory=dict)
    max_contact_force: float = 200.0
    position_tolerance: float = 1e-3
    velocity_tolerance: float = 0.05
    effort_tolerance: float = 0.05
    blowup_velocity: float = 100.0
    max_energy_jump: float = 50.0

    def __post_init__(self) -> None:
        check_range("max_contact_force", self.max_contact_force, 0.0, None, low_open=True)
        check_range("position_tolerance", self.position_tolerance, 0.0, None)
        check_range("velocity_tolerance", self.velocity_tolerance, 0.0, None)
        check_range("effort_tolerance", self.effort_tolerance, 0.0, None)
        check_range("blowup_velocity", self.blowup_velocity, 0.0, None, low_open=True)
        check_range("max_energy_jump", self.max_energy_jump, 0.0, None, low_open=True)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str | None = None) -> PhysicalLimits:
        """Build from YAML-like data: thresholds plus ``joints: {name: {lower: .., ...}}``.

        Raises:
            ConfigError: naming ``joints.<name>.<field>`` or the threshold field.
        """
        data = dict(data)
        joints = {}
        for name, spec in dict(data.pop("joints", {}) or {}).items():
            if not isinstance(spec, Mapping):
                raise ConfigError(f"joints.{name}", spec, "a mapping of limit fields", source)
            unknown = sorted(set(spec) - {"lower", "upper", "velocity", "effort"})
            if unknown:
                raise ConfigError(f"joints.{name}.{unknown[0]}", spec[unknown[0]],
                                  "one of lower, upper, velocity, effort", source)
            try:
                joints[str(name)] = JointLimit(**{k: float(v) for k, v in spec.items()})
            except (ConfigError, TypeError, ValueError) as err:
                field = getattr(err, "field", "value")
                raise ConfigError(f"joints.{name}.{field}", getattr(err, "value", spec),
                                  getattr(err, "allowed", "numbers"), source) from None
        fields = {f.name for f in dataclasses.fields(cls)} - {"joints"}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ConfigError(unknown[0], data[unknown[0]], "one of " + ", ".join(sorted(fields))
                              + ", joints", source)
        try:
            return cls(joints=joints, **data)
        except ConfigError as err:
            raise ConfigError(err.field, err.value, err.allowed, source) from None


def limits_from_urdf(urdf_xml: str) -> dict[str, JointLimit]:
    """Joint limits from a URDF's ``<limit lower upper velocity effort>`` tags.

    Continuous joints get no position limits; fixed joints are skipped.

    Raises:
        ClawgymError: the text is not valid XML.
    """
    try:
        root = ET.fromstring(urdf_xml)
    except ET.ParseError as err:
        raise ClawgymError(f"URDF is not valid XML: {err}") from None
    limits = {}
    for joint in root.iter("joint"):
        kind = joint.get("type", "")
        limit = joint.find("limit")
        if kind in ("fixed", "floating", "planar") or limit is None:
            continue
        bounded = kind != "continuous"
        limits[joint.get("name", "")] = JointLimit(
            lower=float(limit.get("lower", -INF)) if bounded else -INF,
            upper=float(limit.get("upper", INF)) if bounded else INF,
            velocity=float(limit.get("velocity", INF)) or INF,
            effort=float(limit.get("effort", INF)) or INF,
        )
    return limits


@dataclasses.dataclass(frozen=True)
class DisturbanceExcuse:
    """The one allowance the feasibility check makes for a disturbance: speed-limit excess of
    ``joints`` on the ``steps`` control steps from the step the event fired at
    (:meth:`fired_time`, from the record).

    Args:
        events: task -> its ``{event: trigger stage}`` (``Task.disturbances``).
        codes: the event names in the order of their codes (the recorded
            ``disturbance.event`` parameter: ``perturbations.disturbance.EVENTS``).
        joints: the joints excused (the gripper fingers: they snap shut when a held object
            is knocked away).
        steps: control steps excused, from the firing step on.
    """

    events: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    codes: tuple[str, ...] = ()
    joints: tuple[str, ...] = C.GRIPPER_JOINTS
    steps: int = 1

    def fired_time(self, record: EpisodeRecord) -> float | None:
        """When the record's event fired (the simulation time its firing step began), from
        what the record keeps: its ``disturbance.event`` and ``disturbance.delay_steps``
        (drawn at reset) and the time its trigger stage was first reached (the next step arms
        the event; it fires ``delay`` steps later). None when the episode was not disturbed
        or never reached the trigger stage."""
        events = self.events.get(record.task)
        params = record.perturbation_params
        family = C.FAMILY_DISTURBANCE
        code = int(params.get(f"{family}.event", -1.0))
        if (not events or record.family != family or record.num_steps < 2
                or not 0 <= code < len(self.codes) or params.get(f"{family}.intensity", 0) <= 0):
            return None
        trigger = events.get(self.codes[code])
        reached = next((s.time for s in record.stages if s.name == trigger), None)
        if reached is None:
            return None
        return float(reached) + params.get(f"{family}.delay_steps", 0.0) * self.dt(record)

    @staticmethod
    def dt(record: EpisodeRecord) -> float:
        """Seconds per control step of ``record``."""
        return float(np.median(np.diff(record.time)))

    def window(self, record: EpisodeRecord) -> tuple[float, float] | None:
        """(after, up to) simulation times whose samples are excused, or None."""
        start = self.fired_time(record)
        if start is None:
            return None
        return start, start + self.steps * self.dt(record)


@dataclasses.dataclass(frozen=True)
class FeasibilityCheck:
    """Physical-feasibility sign-off of a record against a :class:`PhysicalLimits` table
    (``excuse``: the disturbance allowance, :class:`DisturbanceExcuse`; None = none)."""

    limits: PhysicalLimits = dataclasses.field(default_factory=PhysicalLimits)
    excuse: DisturbanceExcuse | None = None

    def check(self, record: EpisodeRecord) -> list[Rejection]:
        """All physical rejections of ``record`` (empty = signed off), one per reason code."""
        lim = self.limits
        out: list[Rejection] = []
        t = record.time
        unstable = _non_finite(record)
        if unstable is None:
            speed = np.abs(record.joint_velocity)
            if speed.size and float(speed.max()) > lim.blowup_velocity:
                step, j = np.unravel_index(int(np.argmax(speed)), speed.shape)
                unstable = (f"{record.joint_names[j]} speed {speed[step, j]:.4g} > "
                            f"{lim.blowup_velocity:g} at t={t[step]:.3f} s (velocity blow-up)")
            elif record.energy is not None and record.energy.size > 1:
                jumps = np.diff(record.energy)
                if float(jumps.max()) > lim.max_energy_jump:
                    step = int(np.argmax(jumps)) + 1
                    unstable = (f"energy rose by {jumps[step - 1]:.4g} J > "
                                f"{lim.max_energy_jump:g} J at t={t[step]:.3f} s")
        if unstable:
            out.append(Rejection(C.REJECT_UNSTABLE, unstable))
        pos, vel, eff = [], [], []
        window = self.excuse.window(record) if self.excuse is not None else None
        for j, name in enumerate(record.joint_names):
            jl = lim.joints.get(name)
            if jl is None:
                continue
            q = record.joint_position[:, j]
            over = np.flatnonzero((q < jl.lower - lim.position_tolerance)
                                  | (q > jl.upper + lim.position_tolerance))
            if over.size and not pos:
                s = int(over[0])
                pos.append(f"{name} at {q[s]:.4g} outside [{jl.lower:.4g}, {jl.upper:.4g}] "
                           f"at t={t[s]:.3f} s")
            v = np.abs(record.joint_velocity[:, j])
            if window is not None and name in self.excuse.joints:
                # the event's own physics (module docstring); tolerance for float times
                v = np.where((t > window[0] + 1e-9) & (t <= window[1] + 1e-9), 0.0, v)
            over = np.flatnonzero(v > jl.velocity * (1 + lim.velocity_tolerance))
            if over.size and not vel:
                s = int(over[0])
                vel.append(f"{name} speed {v[s]:.4g} > {jl.velocity:.4g} at t={t[s]:.3f} s")
            e = np.abs(record.joint_effort[:, j])
            over = np.flatnonzero(e > jl.effort * (1 + lim.effort_tolerance))
            if over.size and not eff:
                s = int(over[0])
                eff.append(f"{name} effort {e[s]:.4g} > {jl.effort:.4g} at t={t[s]:.3f} s")
        for code, found in ((C.REJECT_JOINT_POSITION, pos), (C.REJECT_JOINT_VELOCITY, vel),
                            (C.REJECT_EFFORT, eff)):
            if found:
                out.append(Rejection(code, found[0]))
        over = np.flatnonzero(record.contact_force > lim.max_contact_force)
        if over.size:
            s = int(over[0])
            out.append(Rejection(C.REJECT_CONTACT_FORCE,
                                 f"contact force {record.contact_force[s]:.4g} N > "
                                 f"{lim.max_contact_force:g} N at t={t[s]:.3f} s"))
        hits = np.flatnonzero(record.collision)
        if hits.size:
            out.append(Rejection(C.REJECT_COLLISION, f"{hits.size} step(s) with an unintended "
                                 f"contact, first at t={t[int(hits[0])]:.3f} s"))
        return out


def _non_finite(record: EpisodeRecord) -> str | None:
    arrays: list[tuple[str, np.ndarray]] = [
        ("time", record.time), ("joint_position", record.joint_position),
        ("joint_velocity", record.joint_velocity), ("joint_effort", record.joint_effort),
        ("contact_force", record.contact_force),
    ]
    if record.energy is not None:
        arrays.append(("energy", record.energy))
    arrays += [(f"observations[{k!r}]", v) for k, v in record.observations.items()]
    arrays += [(f"actions[{k!r}]", v) for k, v in record.actions.items()]
    for name, array in arrays:
        bad = ~np.isfinite(array)
        if bad.any():
            step = int(np.argwhere(bad)[0][0])
            return f"{name} is not finite at step {step} (NaN/inf: diverged simulation)"
    return None


# --- both together ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DualSignoff:
    """Both sign-offs; callable on a record, returning all rejections (empty = accepted).

    Args:
        semantic: validators by ``"task/template"`` or by ``"task"`` (the more specific key
            wins).
        physical: the feasibility check.

    Raises (on call):
        ClawgymError: no semantic validator for the record's task (a configuration error, not a
            rejection).
    """

    semantic: Mapping[str, SemanticValidator]
    physical: FeasibilityCheck = dataclasses.field(default_factory=FeasibilityCheck)

    def validator_for(self, record: EpisodeRecord) -> SemanticValidator:
        """The semantic validator that applies to ``record`` (a recovery segment's,
        ``<task>/recovery``, for a record that started from a failure state)."""
        if record.origin.get("kind") == "recovery":
            key = f"{record.task}/recovery"
            if key not in self.semantic:
                raise ClawgymError(f"task {record.task!r} has no recovery validator; known: "
                                   f"{sorted(self.semantic)}")
            return self.semantic[key]
        for key in (f"{record.task}/{record.template}", record.task):
            if key in self.semantic:
                return self.semantic[key]
        raise ClawgymError(f"no semantic validator for task {record.task!r} template "
                           f"{record.template!r}; known: {sorted(self.semantic)}")

    def __call__(self, record: EpisodeRecord) -> list[Rejection]:
        return self.validator_for(record).check(record) + self.physical.check(record)
