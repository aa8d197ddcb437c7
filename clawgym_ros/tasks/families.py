"""Procedural template families: parametric distributions over a task's templates (transfer
templates), so that synthesis can produce more diverse data on demand.

A task declares its families (``Task.template_families``). A family has named parameters,
each with a declared range (continuous, rounded to a quantum so that names are canonical) or
a set of choices, and two task functions: ``describe`` (the parameter values of one of the
task's declared templates) and ``build`` (a concrete template's ``params`` from values).

Names (strings only, so they travel through mixtures, MixtureEntry messages, episode specs and
dataset indexes unchanged and resolve in any process):

- ``proc:<family>:<name>=<value>,...`` is one concrete template, derived from its parameter
  values (every parameter, in declaration order). :meth:`TemplateFamily.parse` rebuilds it;
  a value outside its declared range is a :class:`~clawgym_ros.errors.ConfigError` naming it.
- ``proc:<family>@<width>`` is the family sampled at ``width`` in [0, 1] (an ADR range over
  every parameter, centred on the training templates' values): per sample, one training
  template is drawn as the base, each continuous parameter moves uniformly within
  ``+- width x half its declared span`` of the base's value (clipped to the range), each
  categorical one switches to a uniform choice with probability ``width``. Width 0 gives the
  training templates' own values. ``proc:<family>`` alone (no width) names the family in loop
  configs; the loop renders the width it steers (:mod:`clawgym_ros.coordinator.transfer`).

Held-out templates stay held out: every sampled or parsed template is at least the family's
``min_distance`` from every held-out template's parameter values (:meth:`distance`:
Euclidean over continuous parameters normalized by their declared spans, plus 1 per
categorical parameter that differs; a held-out template of another structure, e.g. a torus
among boxes and cylinders, is at distance >= 1). Samples closer than that are redrawn; a
parsed one is refused.

Pure: no rclpy, no simulator.
"""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

if TYPE_CHECKING:
    from clawgym_ros.tasks.base import Task, Template

#: Prefix of procedural template names and family references.
PROC_PREFIX = "proc:"
#: Draws before a sampler gives up finding a template far enough from the held-out ones.
MAX_DRAWS = 200
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def is_procedural(name: str) -> bool:
    """Whether ``name`` is a procedural template name or a family reference."""
    return isinstance(name, str) and name.startswith(PROC_PREFIX)


def split_ref(name: str) -> tuple[str, float | None, str]:
    """Parse a procedural name into (family, width or None, values text).

    ``proc:objects@0.3`` -> ("objects", 0.3, ""); ``proc:objects`` -> ("objects", None, "");
    ``proc:objects:shape=box,...`` -> ("objects", None, "shape=box,...").

    Raises:
        ConfigError: not of one of these forms, or a width that is not a number in [0, 1].
    """
    body = name[len(PROC_PREFIX):]
    family, sep, values = body.partition(":")
    width: float | None = None
    if "@" in family:
        family, _, text = family.partition("@")
        try:
            width = float(text)
        except ValueError:
            raise ConfigError(f"template {name} width", text, "a number in [0, 1]") from None
        if not 0.0 <= width <= 1.0:
            raise ConfigError(f"template {name} width", width, "[0, 1]")
        if sep:
            raise ConfigError("template", name, "proc:<family>@<width> or "
                              "proc:<family>:<param>=<value>,... (not both)")
    if not _NAME.match(family or "") or (sep and not values):
        raise ConfigError("template", name, "proc:<family>, proc:<family>@<width> or "
                          "proc:<family>:<param>=<value>,...")
    return family, width, values


@dataclasses.dataclass(frozen=True)
class TemplateParam:
    """One parameter of a family.

    Attributes:
        name: parameter name (lower case, ``[a-z0-9_]``).
        low, high: declared range of a continuous parameter.
        quantum: continuous values are rounded to multiples of it (canonical names).
        choices: the allowed values of a categorical parameter (then low/high are unused).
        unit: unit of a continuous parameter (messages).
    """

    name: str
    low: float = 0.0
    high: float = 0.0
    quantum: float = 0.001
    choices: tuple[str, ...] = ()
    unit: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError("template param", self.name, "a name of [a-z0-9_]")
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices and not (self.high > self.low and self.quantum > 0):
            raise ConfigError(f"template param {self.name}", (self.low, self.high),
                              "low < high and a quantum > 0")

    @property
    def categorical(self) -> bool:
        return bool(self.choices)

    @property
    def span(self) -> float:
        return self.high - self.low

    def allowed(self) -> str:
        """The declared range or choices, for messages."""
        if self.categorical:
            return "one of " + ", ".join(self.choices)
        unit = f" {self.unit}" if self.unit else ""
        return f"[{self.low:g}, {self.high:g}]{unit}"

    def quantize(self, value: float) -> float:
        """``value`` rounded to the quantum (and to 9 decimals, so names are canonical)."""
        return round(round(float(value) / self.quantum) * self.quantum, 9)

    def check(self, value: Any, field: str) -> Any:
        """``value`` if inside the declared range (or a declared choice).

        Raises:
            ConfigError: naming ``field``, the value and the declared range.
        """
        if self.categorical:
            if value not in self.choices:
                raise ConfigError(field, value, self.allowed())
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ConfigError(field, value, f"a number in {self.allowed()}")
        if value < self.low - 1e-9 or value > self.high + 1e-9:
            raise ConfigError(field, value, self.allowed())
        return float(value)

    def text(self, value: Any) -> str:
        return value if self.categorical else format(self.quantize(value), "g")

    def parse(self, text: str, field: str) -> Any:
        if self.categorical:
            return self.check(text, field)
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(field, text, f"a number in {self.allowed()}") from None
        return self.check(value, field)


@dataclasses.dataclass(frozen=True)
class TemplateFamily:
    """A parametric distribution over a task's templates.

    Attributes:
        name: family name (``proc:<name>...``).
        params: the parameters, in name order of the template names.
        describe: ``fn(template) -> {param: value}`` for the task's declared templates (training
            ones are the sampling centres; held-out ones are kept ``min_distance`` away).
        build: ``fn(values) -> Template.params`` of a concrete template.
        min_distance: declared distance (see :meth:`distance`) below which a template counts
            as a held-out one.
        description: one line for docs.
    """

    name: str
    params: tuple[TemplateParam, ...]
    describe: Callable[[Template], dict[str, Any]]
    build: Callable[[Mapping[str, Any]], dict[str, Any]]
    min_distance: float = 0.15
    description: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError("template family", self.name, "a name of [a-z0-9_]")
        object.__setattr__(self, "params", tuple(self.params))
        names = [p.name for p in self.params]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"template family {self.name}.params", names,
                              "at least one parameter, names distinct")
        if not self.min_distance > 0:
            raise ConfigError(f"template family {self.name}.min_distance", self.min_distance,
                              "> 0")

    # ------------------------------------------------------------------ names
    def ref(self, width: float | None = None) -> str:
        """``proc:<family>`` or ``proc:<family>@<width>``."""
        return f"{PROC_PREFIX}{self.name}" + ("" if width is None else f"@{width:g}")

    def template_name(self, values: Mapping[str, Any]) -> str:
        """The canonical name of the template with ``values``."""
        body = ",".join(f"{p.name}={p.text(values[p.name])}" for p in self.params)
        return f"{PROC_PREFIX}{self.name}:{body}"

    # ------------------------------------------------------------------ geometry of templates
    def distance(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
        """Distance between two value sets: Euclidean over continuous parameters (each
        divided by its declared span) plus 1 per categorical parameter that differs."""
        total, cat = 0.0, 0.0
        for p in self.params:
            if p.categorical:
                cat += float(a[p.name] != b[p.name])
            else:
                total += ((float(a[p.name]) - float(b[p.name])) / p.span) ** 2
        return math.sqrt(total) + cat

    def centres(self, task: Task) -> list[dict[str, Any]]:
        """Parameter values of the task's training templates (the sampling centres)."""
        return [self.describe(t) for t in task.templates if t.split == C.SPLIT_TRAIN]

    def held_out(self, task: Task) -> dict[str, dict[str, Any]]:
        """Parameter values of the task's held-out templates, by name."""
        return {t.name: self.describe(t) for t in task.templates
                if t.split == C.SPLIT_HELD_OUT}

    def nearest_held_out(self, task: Task, values: Mapping[str, Any]) -> tuple[str, float]:
        """(name, distance) of the held-out template nearest ``values`` ("", inf: none)."""
        best = ("", math.inf)
        for name, held in self.held_out(task).items():
            d = self.distance(values, held)
            if d < best[1]:
                best = (name, d)
        return best

    # ------------------------------------------------------------------ templates
    def check_values(self, values: Mapping[str, Any], field: str) -> dict[str, Any]:
        """Every parameter given, each inside its declared range (continuous ones rounded)."""
        unknown = sorted(set(values) - {p.name for p in self.params})
        if unknown:
            raise ConfigError(f"{field}.{unknown[0]}", values[unknown[0]],
                              f"a parameter of family {self.name} ("
                              + ", ".join(p.name for p in self.params) + ")")
        out = {}
        for p in self.params:
            if p.name not in values:
                raise ConfigError(f"{field}.{p.name}", None, f"a value in {p.allowed()}")
            value = p.check(values[p.name], f"{field}.{p.name}")
            out[p.name] = value if p.categorical else p.quantize(value)
        return out

    def template(self, task: Task, values: Mapping[str, Any],
                 field: str = "template") -> Template:
        """The concrete (training-split) template with ``values``.

        Raises:
            ConfigError: a missing or unknown parameter, a value outside its declared range,
                or values within ``min_distance`` of a held-out template.
        """
        from clawgym_ros.tasks.base import Template

        values = self.check_values(values, field)
        name = self.template_name(values)
        held, d = self.nearest_held_out(task, values)
        if d < self.min_distance:
            raise ConfigError(field, name, f"a template at least {self.min_distance:g} from "
                              f"every held-out template (distance {d:.3f} to held-out "
                              f"{task.name}/{held}: held-out templates are never synthesized)")
        params = {**self.build(values), "family": self.name, "values": dict(values)}
        shown = ", ".join(f"{p.name} {p.text(values[p.name])}{p.unit and ' ' + p.unit}"
                          for p in self.params)
        return Template(name, C.SPLIT_TRAIN, params, f"{self.name}: {shown}")

    def parse(self, task: Task, name: str) -> Template:
        """The concrete template a ``proc:<family>:<param>=<value>,...`` name describes.

        Raises:
            ConfigError: a malformed name, an unknown / missing / repeated parameter, a value
                outside its declared range, or a template too near a held-out one.
        """
        _, _, text = split_ref(name)
        values: dict[str, Any] = {}
        by_name = {p.name: p for p in self.params}
        for item in text.split(","):
            key, eq, raw = item.partition("=")
            field = f"template {name} parameter {key}"
            if not eq or key not in by_name:
                raise ConfigError(field, item, f"<param>=<value> with a parameter of family "
                                  f"{self.name} (" + ", ".join(by_name) + ")")
            if key in values:
                raise ConfigError(field, raw, "each parameter once")
            values[key] = by_name[key].parse(raw, f"template {task.name}/proc:{self.name} "
                                                  f"parameter {key}")
        return self.template(task, values, f"template {task.name}/proc:{self.name}")

    def sample_values(self, task: Task, width: float, rng: np.random.Generator
                      ) -> dict[str, Any]:
        """One draw of parameter values at ``width`` (see the module docstring)."""
        bases = self.centres(task)
        base = bases[int(rng.integers(len(bases)))]
        out: dict[str, Any] = {}
        for p in self.params:
            if p.categorical:
                switch = rng.random() < width
                pick = p.choices[int(rng.integers(len(p.choices)))]
                out[p.name] = pick if switch else base[p.name]
            else:
                lo = max(p.low, float(base[p.name]) - width * p.span / 2)
                hi = min(p.high, float(base[p.name]) + width * p.span / 2)
                out[p.name] = p.quantize(rng.uniform(lo, hi) if hi > lo else lo)
        return out

    def sample(self, task: Task, width: float, seed: int) -> Template:
        """The template of (family, width, seed): draws until one is at least
        ``min_distance`` from every held-out template.

        Raises:
            ConfigError: width outside [0, 1], or no such template in :data:`MAX_DRAWS` draws.
        """
        if isinstance(width, bool) or not isinstance(width, (int, float)) \
                or not 0.0 <= width <= 1.0:
            raise ConfigError(f"template {self.ref()} width", width, "[0, 1]")
        rng = np.random.default_rng(np.random.SeedSequence(
            int(seed), spawn_key=(zlib.crc32(f"{task.name}/{self.name}".encode()),)))
        for _ in range(MAX_DRAWS):
            values = self.sample_values(task, float(width), rng)
            if self.nearest_held_out(task, values)[1] >= self.min_distance:
                return self.template(task, values)
        raise ConfigError(f"template {self.ref(width)}", seed, "a family whose samples are not "
                          f"all within {self.min_distance:g} of a held-out template")

    def describe_family(self) -> dict[str, Any]:
        """JSON-able summary (docs, CLI)."""
        return {"name": self.name, "ref": self.ref(), "min_distance": self.min_distance,
                "description": self.description,
                "params": {p.name: (list(p.choices) if p.categorical else
                                    {"low": p.low, "high": p.high, "unit": p.unit,
                                     "quantum": p.quantum}) for p in self.params}}


def family_of(task: Task, name: str, field: str = "template") -> TemplateFamily:
    """The family ``name`` (``proc:<family>...``) refers to, among ``task``'s.

    Raises:
        ConfigError: the task has no such family (the message lists its families).
    """
    family, _, _ = split_ref(name)
    for f in task.template_families:
        if f.name == family:
            return f
    known = ", ".join(f.ref() for f in task.template_families) or "none"
    raise ConfigError(field, name, f"a template family of {task.name} ({known})")


def families_table(tasks: Sequence[Task]) -> dict[str, list[dict[str, Any]]]:
    """task -> its families' summaries (tasks without families left out)."""
    return {t.name: [f.describe_family() for f in t.template_families]
            for t in tasks if t.template_families}
