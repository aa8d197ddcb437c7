"""The task framework: :class:`Task` (stages, skills, grammar, templates, env id, sign-off,
expert) and :class:`StageTracker` (stage validators over true state, shared by the expert and
the evaluator).

A task is a subclass of :class:`Task` whose docstring has the headings Task Description,
Randomizations, Success Conditions and Stages; it is registered by name in
:mod:`clawgym_ros.tasks.registry`. Everything here is pure (no rclpy, no MuJoCo import).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeSpec
from clawgym_ros.synthesis.signoff import (
    DualSignoff,
    FeasibilityCheck,
    JointLimit,
    PhysicalLimits,
    SemanticValidator,
    limits_from_urdf,
)


@dataclasses.dataclass(frozen=True)
class Template:
    """A parameterized variant of a task.

    Attributes:
        name: template name (what suites and mixtures use, e.g. ``cube``).
        split: ``train`` or ``held_out`` (``constants.SPLITS``).
        params: task-specific parameters (shape, size, layout, ...); JSON-able.
        description: one line for docs and reports.
    """

    name: str
    split: str = C.SPLIT_TRAIN
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("template.name", self.name, "a non-empty name")
        if self.split not in C.SPLITS:
            raise ConfigError(f"template {self.name}.split", self.split, " or ".join(C.SPLITS))


class StageTracker(abc.ABC):
    """Ordered stage validators over the true state of an episode.

    The same tracker serves the expert while it generates (live) and the evaluator on policy
    rollouts: both feed it the unperturbed state after every control step. Stages are reached
    strictly in the order of :attr:`stages`; each validator is checked only once all earlier
    stages have been reached.

    Args:
        stages: the expected stage order (repeated names allowed, e.g. two placements).
    """

    def __init__(self, stages: Sequence[str]) -> None:
        self.stages = tuple(stages)
        self.reached: list[tuple[str, float]] = []

    def reset(self) -> None:
        """Forget the stages reached (called by the env on reset)."""
        self.reached = []

    @property
    def next_index(self) -> int:
        """Index in :attr:`stages` of the next stage to reach (``len(stages)`` when done)."""
        return len(self.reached)

    @property
    def reached_names(self) -> list[str]:
        """Names of the stages reached, in order."""
        return [name for name, _ in self.reached]

    def update(self, time: float, state: Mapping[str, np.ndarray]) -> list[str]:
        """Check the next stages on ``state`` (several may pass in one step).

        Args:
            time: simulation time of the state (s).
            state: the true observation dict (``tool_pose``, ``gripper_width``, ...).

        Returns:
            The stages newly reached at this step, in order.
        """
        new: list[str] = []
        self.observe(time, state)
        while self.next_index < len(self.stages) and self.check(self.next_index, state):
            name = self.stages[self.next_index]
            self.reached.append((name, float(time)))
            new.append(name)
        return new

    def observe(self, time: float, state: Mapping[str, np.ndarray]) -> None:  # noqa: B027
        """Hook called on every state before the stage checks (e.g. to remember maxima)."""

    @abc.abstractmethod
    def check(self, index: int, state: Mapping[str, np.ndarray]) -> bool:
        """Whether stage ``index`` holds on ``state`` (all earlier stages are reached)."""

    def stage_distance(self, index: int, state: Mapping[str, np.ndarray]) -> float:
        """How far (m) ``state`` is from stage ``index`` holding (all earlier stages reached):
        the distances the stage's validator cares about, summed; 0 = no shaping declared.

        The RL interface's dense reward (:meth:`progress`) turns it into progress within the
        stage; the experts and the evaluator never read it.
        """
        return 0.0

    def progress(self, state: Mapping[str, np.ndarray], scale: float) -> float:
        """Dense task progress in [0, 1]: ``(k + 1 - tanh(d / scale)) / n`` with ``k`` stages
        reached of ``n`` and ``d`` the :meth:`stage_distance` of the next one; 1.0 once every
        stage is reached.

        Args:
            state: the true state after the step.
            scale: the distance (m) at which in-stage progress is ``1 - tanh(1)`` (0.24).
        """
        n, k = len(self.stages), self.next_index
        if n == 0 or k >= n:
            return 1.0
        d = max(0.0, float(self.stage_distance(k, state)))
        return (k + 1.0 - math.tanh(d / scale)) / n

    @abc.abstractmethod
    def success(self, state: Mapping[str, np.ndarray]) -> tuple[bool, str]:
        """The task's success condition on the final state: (success, reason if not)."""

    @abc.abstractmethod
    def achieved(self, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Measured values with the same keys as the goal (``record.achieved``)."""


#: Key suffix of a task's recovery-segment validator (``<task>/recovery``).
RECOVERY_KEY = "recovery"


class Task:
    """Base class of tasks. Subclasses set the class attributes below and document
    themselves with the headings Task Description, Randomizations, Success Conditions, Stages.

    Attributes:
        name: task id (``constants.TASKS``).
        env_id: Gymnasium id of the task env.
        scene: the simulator scene the task is built on.
        stages: ordered stage names.
        skills: the skill vocabulary.
        grammar: the legal skill sequences (``synthesis.grammar`` syntax).
        recovery_grammar: the legal skill sequences of a recovery segment (an episode that
            starts from an evaluated failure state, :mod:`.recovery`); empty = the task has no
            recovery expert.
        templates: training and held-out templates.
        expert: ``"module:function"`` of the expert, ``generate(spec) -> EpisodeRecord``.
        goal_tolerance: tolerance of the default goal check for numbers.
        max_contact_force: feasibility threshold on the largest contact force (N).
        arm_expert: the expert is an :class:`~clawgym_ros.tasks.expert.ArmExpert` (replay
            goes through it; otherwise through the task env, see :mod:`.replay`).
    """

    name: ClassVar[str] = ""
    env_id: ClassVar[str] = ""
    scene: ClassVar[str] = C.SCENE_TABLETOP
    stages: ClassVar[tuple[str, ...]] = ()
    skills: ClassVar[tuple[str, ...]] = ()
    grammar: ClassVar[str] = ""
    recovery_grammar: ClassVar[str] = ""
    templates: ClassVar[tuple[Template, ...]] = ()
    expert: ClassVar[str] = ""
    goal_tolerance: ClassVar[float] = 0.01
    max_contact_force: ClassVar[float] = 200.0
    arm_expert: ClassVar[bool] = False
    #: Procedural template families (:mod:`clawgym_ros.tasks.families`): ``proc:`` names.
    template_families: ClassVar[tuple[Any, ...]] = ()

    # ------------------------------------------------------------------ templates
    @property
    def training_templates(self) -> tuple[str, ...]:
        """Names of the training templates, in declaration order."""
        return tuple(t.name for t in self.templates if t.split == C.SPLIT_TRAIN)

    @property
    def held_out_templates(self) -> tuple[str, ...]:
        """Names of the held-out templates, in declaration order."""
        return tuple(t.name for t in self.templates if t.split == C.SPLIT_HELD_OUT)

    def template(self, name: str) -> Template:
        """The template called ``name``: a declared one, or a concrete procedural one
        (``proc:<family>:<param>=<value>,...``, rebuilt from its name).

        Raises:
            ConfigError: unknown template (the message lists the known ones), a procedural
                name with a parameter outside its declared range, or a family reference
                (``proc:<family>@<width>``: :meth:`resolve_template` samples it).
        """
        for t in self.templates:
            if t.name == name:
                return t
        from clawgym_ros.tasks import families as F

        if F.is_procedural(name):
            family = F.family_of(self, name, f"{self.name}.template")
            if not F.split_ref(name)[2]:
                raise ConfigError(f"{self.name}.template", name, "a concrete template (a "
                                  "family reference is sampled per episode by synthesis)")
            return family.parse(self, name)
        procs = [f.ref() + "@<width>" for f in self.template_families]
        raise ConfigError(f"{self.name}.template", name,
                          "one of " + ", ".join([t.name for t in self.templates] + procs))

    def synthesis_template(self, name: str, field: str = "template") -> str:
        """Check that synthesis may generate ``name``: empty (a training template), a
        training template, a concrete procedural one or a family reference
        (``proc:<family>`` / ``proc:<family>@<width>``). Returns ``name``.

        Raises:
            ConfigError: naming ``field``: an unknown template, a held-out one (held-out
                templates are never synthesized), a procedural one outside its family's
                declared ranges or within its declared distance of a held-out template.
        """
        from clawgym_ros.tasks import families as F

        try:
            if F.is_procedural(name) and not F.split_ref(name)[2]:
                F.family_of(self, name, field)
                return name
            if name and self.template(name).split != C.SPLIT_TRAIN:
                raise ConfigError(field, name, "a training template or a template family of "
                                  f"{self.name} (held-out templates are never synthesized: "
                                  "generalization is measured on templates no data shows)")
        except ConfigError as err:
            where = field if err.field in (field, f"{self.name}.template") else \
                f"{field} ({err.field})"
            raise ConfigError(where, err.value, err.allowed) from None
        return name

    def choose_template(self, rng: np.random.Generator) -> Template:
        """A training template drawn from ``rng`` (for an empty ``spec.template``)."""
        names = self.training_templates
        return self.template(names[int(rng.integers(len(names)))])

    def resolve_template(self, name: str, rng: np.random.Generator) -> Template:
        """``name``'s template, a training template from ``rng`` when ``name`` is empty, or
        a template of a family reference ``proc:<family>@<width>`` sampled with a seed drawn
        from ``rng`` (``proc:<family>`` alone: width 0, the training templates' values)."""
        from clawgym_ros.tasks import families as F

        if F.is_procedural(name):
            fam, width, values = F.split_ref(name)
            if not values:
                family = F.family_of(self, name, f"{self.name}.template")
                return family.sample(self, width or 0.0, int(rng.integers(2**63 - 1)))
        return self.template(name) if name else self.choose_template(rng)

    def template_stages(self, template: Template) -> tuple[str, ...]:
        """Stages of ``template`` (composed templates repeat them)."""
        return self.stages

    def template_grammar(self, template: Template) -> str:
        """Skill grammar of ``template``."""
        return self.grammar

    # ------------------------------------------------------------------ sign-off
    def goal_check(self) -> Any:
        """A module-level ``fn(record) -> None | reason`` or None for the default check."""
        return None

    def resume_grammar(self) -> str | None:
        """Legal skill sequences after a skill a disturbance interrupted: the recovery segment,
        then any further placements (tasks that support disturbances and have a recovery
        grammar; None otherwise)."""
        if not getattr(self, "disturbances", None) or not self.recovery_grammar:
            return None
        return f"({self.recovery_grammar}) ({self.grammar})*"

    def disturbance_excuse(self) -> Any:
        """The feasibility check's allowance for this task's disturbances (None without
        any)."""
        events = dict(getattr(self, "disturbances", None) or {})
        if not events:
            return None
        from clawgym_ros.perturbations.disturbance import EVENTS
        from clawgym_ros.synthesis.signoff import DisturbanceExcuse

        return DisturbanceExcuse({self.name: events}, EVENTS)

    def semantic_validators(self) -> dict[str, SemanticValidator]:
        """Validators by ``task`` (default) and ``task/template`` (where they differ)."""
        resume = self.resume_grammar()
        base = SemanticValidator(self.stages, self.grammar, goal_check=self.goal_check(),
                                 goal_tolerance=self.goal_tolerance, resume_grammar=resume)
        out = {self.name: base}
        if self.recovery_grammar:
            out[f"{self.name}/{RECOVERY_KEY}"] = SemanticValidator(
                self.stages, self.recovery_grammar, goal_check=self.goal_check(),
                goal_tolerance=self.goal_tolerance)
        for t in self.templates:
            stages, grammar = self.template_stages(t), self.template_grammar(t)
            if stages != self.stages or grammar != self.grammar:
                out[f"{self.name}/{t.name}"] = SemanticValidator(
                    stages, grammar, goal_check=self.goal_check(),
                    goal_tolerance=self.goal_tolerance, resume_grammar=resume)
        return out

    def joint_limits(self) -> dict[str, JointLimit]:
        """Limits of the scene robot's joints, from its URDF."""
        return robot_limits(self.scene)

    def limits(self) -> PhysicalLimits:
        """The feasibility check's limits table."""
        return PhysicalLimits(joints=self.joint_limits(),
                              max_contact_force=self.max_contact_force)

    def signoff(self) -> DualSignoff:
        """The dual sign-off of this task (picklable)."""
        return DualSignoff(semantic=self.semantic_validators(),
                           physical=FeasibilityCheck(self.limits(),
                                                     excuse=self.disturbance_excuse()))

    # ------------------------------------------------------------------ expert
    def generate(self, spec: EpisodeSpec) -> EpisodeRecord:
        """Run the expert on ``spec``."""
        module, func = self.expert.split(":")
        return getattr(importlib.import_module(module), func)(spec)

    def describe(self) -> dict[str, Any]:
        """JSON-able summary (docs, CLI)."""
        return {"name": self.name, "env_id": self.env_id, "scene": self.scene,
                "stages": list(self.stages), "skills": list(self.skills),
                "grammar": self.grammar,
                "templates": {C.SPLIT_TRAIN: list(self.training_templates),
                              C.SPLIT_HELD_OUT: list(self.held_out_templates)},
                **({"template_families": [f.describe_family() for f in self.template_families]}
                   if self.template_families else {})}


@functools.lru_cache(maxsize=4)
def robot_limits(scene: str) -> dict[str, JointLimit]:
    """URDF joint limits of a scene's robot (position, velocity, effort)."""
    from clawgym_ros.sim import scene_mjcf as MJ
    from clawgym_ros.sim import scene_spec as S

    spec = S.load_scene(scene)
    return limits_from_urdf(MJ.expand_xacro(spec.urdf_path))
