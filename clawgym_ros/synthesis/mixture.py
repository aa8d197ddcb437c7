"""Mixture specs: which (task, template, perturbation, intensity, difficulty) cells, how much.

A mixture is a list of weighted cells. :func:`allocate` turns weights into exact episode counts
(largest remainder), :func:`plan_episodes` lays the episodes out in a fixed interleaved order
and gives each its own seed derived from the run seed and its index only, so that the dataset
does not depend on the number of workers.

YAML form (a top-level list, or a mapping with a ``mixture`` list)::

    mixture:
      - {task: pick_place, template: cube_small, family: none, weight: 3}
      - {task: pick_place, family: lighting, intensity: 0.6, difficulty: hard, weight: 1}

``template`` empty or missing = any training template; ``difficulty`` missing = medium. The
MixtureEntry message names ``template`` and ``family`` ``task_template`` and
``perturbation_family``; both spellings are accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_range, load_yaml
from clawgym_ros.errors import ConfigError
from clawgym_ros.synthesis.episode import EpisodeSpec

#: YAML / dict aliases -> field names (the MixtureEntry message's names).
_ALIASES = {"task_template": "template", "perturbation_family": "family"}
_SEED_BITS = 63


@dataclasses.dataclass(frozen=True)
class MixtureCell:
    """One weighted cell of a mixture (mirrors clawgym_interfaces/MixtureEntry)."""

    task: str
    template: str = ""
    family: str = C.FAMILY_NONE
    intensity: float = 0.0
    difficulty: str = C.DEFAULT_DIFFICULTY
    weight: float = 1.0
    #: the disturbance event of a ``disturbance`` cell ("" = the family's default); its
    #: episodes carry it as ``options["perturbation"]["disturbance"]["event"]``.
    event: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.task, str) or not self.task:
            raise ConfigError("task", self.task, "a non-empty task name")
        if not isinstance(self.template, str):
            raise ConfigError("template", self.template, "a template name or empty (any)")
        check_choice("family", self.family, C.PERTURBATION_FAMILIES)
        check_range("intensity", self.intensity, 0.0, 1.0)
        if self.family == C.FAMILY_NONE and self.intensity != 0:
            raise ConfigError("intensity", self.intensity, "0 when family is 'none'")
        difficulty = self.difficulty or C.DEFAULT_DIFFICULTY
        object.__setattr__(self, "difficulty", difficulty)
        check_choice("difficulty", difficulty, C.DIFFICULTIES)
        check_range("weight", self.weight, 0.0, None, low_open=True)
        if not isinstance(self.event, str):
            raise ConfigError("event", self.event, "an event name")
        if self.event and self.family != C.FAMILY_DISTURBANCE:
            raise ConfigError("event", self.event, f"no event for family {self.family} (only "
                              f"{C.FAMILY_DISTURBANCE})")

    @classmethod
    def from_fields(cls, data: Mapping[str, Any] | Any) -> MixtureCell:
        """Build from a mapping or an object with MixtureEntry attributes (a message).

        Raises:
            ConfigError: unknown keys or invalid values, naming the field.
        """
        if not isinstance(data, Mapping):
            names = ("task", "task_template", "perturbation_family", "intensity", "difficulty",
                     "weight", "event")
            data = {n: getattr(data, n) for n in names if hasattr(data, n)}
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = _ALIASES.get(key, key)
            if name not in fields:
                raise ConfigError(key, value, "one of the fields " + ", ".join(
                    ["task", "template (task_template)", "family (perturbation_family)",
                     "intensity", "difficulty", "weight", "event"]))
            kwargs[name] = value
        if "task" not in kwargs:
            raise ConfigError("task", None, "a non-empty task name (required)")
        return cls(**kwargs)

    def to_msg_fields(self) -> dict[str, Any]:
        """Field values of a clawgym_interfaces/MixtureEntry message."""
        return {"task": self.task, "task_template": self.template,
                "perturbation_family": self.family, "intensity": float(self.intensity),
                "difficulty": self.difficulty, "weight": float(self.weight),
                "event": self.event}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form with this module's field names (``event`` only when set, so cells
        without one keep their form)."""
        out = dataclasses.asdict(self)
        if not self.event:
            del out["event"]
        return out

    def options(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """The generator options of this cell's episodes: ``base``, plus the event as a
        perturbation override when the cell names one."""
        out = dict(base)
        if self.event:
            overrides = {k: dict(v) for k, v in dict(out.get("perturbation", {})).items()}
            overrides.setdefault(self.family, {})["event"] = self.event
            out["perturbation"] = overrides
        return out


@dataclasses.dataclass(frozen=True)
class MixtureSpec:
    """An ordered list of cells (the order fixes the episode layout)."""

    cells: tuple[MixtureCell, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(self.cells))
        if not self.cells:
            raise ConfigError("mixture", [], "at least one entry")
        keys = [(c.task, c.template, c.family, c.intensity, c.difficulty, c.event)
                for c in self.cells]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise ConfigError(f"mixture[{i}]", dict(zip(
                    ("task", "template", "family", "intensity", "difficulty", "event"), key)),
                    "a cell not listed before (merge duplicate entries by adding weights)")

    @classmethod
    def single(cls, task: str, **cell: Any) -> MixtureSpec:
        """A one-cell mixture (what ``clawgym synth --task T`` uses without ``--mixture``)."""
        return cls((MixtureCell(task, **cell),))

    @classmethod
    def from_entries(cls, entries: Iterable[Mapping[str, Any] | Any],
                     source: str | None = None) -> MixtureSpec:
        """Build from mappings or MixtureEntry messages; errors name ``mixture[i].field``."""
        cells = []
        for i, entry in enumerate(entries):
            try:
                cells.append(MixtureCell.from_fields(entry))
            except ConfigError as err:
                raise ConfigError(f"mixture[{i}].{err.field}", err.value, err.allowed,
                                  source) from None
        try:
            return cls(tuple(cells))
        except ConfigError as err:
            raise ConfigError(err.field, err.value, err.allowed, source) from None

    def to_msg_fields(self) -> list[dict[str, Any]]:
        """Field values of the MixtureEntry messages of this mixture, in order."""
        return [c.to_msg_fields() for c in self.cells]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a mapping with a ``mixture`` list) that :func:`load_mixture` reads."""
        return {"mixture": [c.to_dict() for c in self.cells]}

    @property
    def tasks(self) -> list[str]:
        """Distinct tasks, in first-appearance order."""
        return list(dict.fromkeys(c.task for c in self.cells))


def load_mixture(path: str | Path) -> MixtureSpec:
    """Read a mixture YAML file.

    Raises:
        ConfigError: unreadable file, bad YAML, wrong layout or invalid entries; the error names
            the file, the field (``mixture[i].field``), the value and what is allowed.
    """
    source = str(path)
    data = load_yaml(path)
    if isinstance(data, Mapping):
        extra = sorted(set(data) - {"mixture"})
        if extra:
            raise ConfigError(extra[0], data[extra[0]], "only the key 'mixture'", source)
        data = data.get("mixture")
    if not isinstance(data, list):
        raise ConfigError("mixture", data, "a list of entries (task, template, family, "
                          "intensity, difficulty, weight)", source)
    for i, entry in enumerate(data):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"mixture[{i}]", entry, "a mapping of entry fields", source)
    spec = MixtureSpec.from_entries(data, source)
    for i, cell in enumerate(spec.cells):   # named here, with the file, not at synthesis
        check_choice(f"mixture[{i}].task", cell.task, C.TASKS, source)
    return spec


def allocate(weights: Sequence[float], total: int) -> list[int]:
    """Split ``total`` episodes over cells proportionally to ``weights`` (largest remainder).

    Each cell gets floor(total * w / sum(w)); the leftover episodes go to the largest fractional
    parts, ties to the earlier cell. Exact (uses fractions of integers scaled by 1e9) and
    deterministic.

    Raises:
        ConfigError: ``total`` negative or a weight not positive.
    """
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ConfigError("episodes", total, "an integer >= 0")
    for i, w in enumerate(weights):
        check_range(f"mixture[{i}].weight", w, 0.0, None, low_open=True)
    # Integer arithmetic on weights scaled to 1e-9 keeps ties exact across platforms.
    scaled = [max(1, round(w * 1_000_000_000)) for w in weights]
    norm = sum(scaled)
    counts = [total * s // norm for s in scaled]
    remainders = [total * s % norm for s in scaled]
    left = total - sum(counts)
    order = sorted(range(len(scaled)), key=lambda i: (-remainders[i], i))
    for i in order[:left]:
        counts[i] += 1
    return counts


def episode_seed(run_seed: int, index: int) -> int:
    """The seed of episode ``index``: SeedSequence(run_seed, spawn_key=(index,)), 63 bits.

    Equal to the ``index``-th child of ``SeedSequence(run_seed).spawn(...)`` and independent of
    how many episodes or workers there are.
    """
    if run_seed < 0 or index < 0:
        raise ConfigError("seed", (run_seed, index), "non-negative run seed and index")
    state = np.random.SeedSequence(run_seed, spawn_key=(index,)).generate_state(1, np.uint64)
    return int(state[0]) >> (64 - _SEED_BITS)


def plan_episodes(mixture: MixtureSpec, total: int, run_seed: int,
                  options: Mapping[str, Any] | None = None) -> list[EpisodeSpec]:
    """The run's episode plan: cells interleaved by stride scheduling, seeds by index.

    Cell i with n_i episodes places its k-th episode at position (k + 0.5) / n_i; episodes are
    sorted by position (ties by cell order), so a prefix of the plan (a cancelled run) keeps the
    mixture's proportions.

    Args:
        mixture: the cells and weights.
        total: number of episodes N.
        run_seed: the run seed.
        options: generator options copied into every spec (e.g. ``{"images": True}``).

    Returns:
        N specs with ``index`` 0..N-1.
    """
    counts = allocate([c.weight for c in mixture.cells], total)
    slots = sorted(((k + 0.5) / n, i) for i, n in enumerate(counts) for k in range(n))
    opts = dict(options or {})
    specs = []
    for index, (_, i) in enumerate(slots):
        cell = mixture.cells[i]
        specs.append(EpisodeSpec(
            index=index, seed=episode_seed(run_seed, index), task=cell.task,
            template=cell.template, family=cell.family, intensity=float(cell.intensity),
            difficulty=cell.difficulty, options=cell.options(opts),
        ))
    return specs
