"""Evaluation suites: which tasks, templates and perturbation cells to run, and with which seeds.

A suite file (``config/suites/<name>.yaml``) lists tasks with their training and held-out
templates, and the perturbation cells: the nominal (unperturbed) cell, sweeps of one family over
an intensity grid, and combinations of families over a shared grid. :func:`expand` turns a
suite into a deterministic list of :class:`EpisodeSpec`. A ``disturbance`` sweep may name its
``event`` (``object_drop`` by default, ``any`` = one of the task's per episode); every task of
the suite must support it (checked on load).

Episode counts: every (task, split, cell) gets ``episodes_per_cell`` episodes, cycling through
that split's templates; held-out templates run in the nominal cell only, with
``held_out_episodes_per_cell`` episodes when the suite sets it (a rate near 0 needs more
episodes than the in-distribution cells to be compared; the first ``episodes_per_cell`` of them
are the episodes the suite without the key runs, seeds included). Seeds: the environment
seed of repetition ``r`` on template ``t`` of task ``k`` is drawn from
``SeedSequence(suite_seed, spawn_key=(crc32(k), crc32(t), r))``, so it is the same in every cell
(a paired design: the nominal and the perturbed episodes start from the same scenes, which makes
stability estimates much less noisy) and adding a cell or a task never changes the seeds of
the others. The perturbation seed adds the cell label and intensity to the key, so each cell
draws its own perturbation stream.

Episode length: an optional ``max_steps`` (control steps per episode, 0 = the env's own limit)
belongs to the suite, so every evaluation of it (CLI, evaluator_node, the loop) uses the same
horizon; an explicit rollout option (``--max-steps``) still wins.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range, load_yaml
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.records import SEED_MAX
from clawgym_ros.safe_load import is_file

SUITE_KEYS = ("name", "description", "seed", "episodes_per_cell", "held_out_episodes_per_cell",
              "schedule", "max_steps", "tasks", "cells")
TASK_KEYS = ("task", "templates", "held_out_templates")
CELL_KEYS = ("nominal", "sweeps", "combinations")
SWEEP_KEYS = ("family", "intensities", "event")
COMBINATION_KEYS = ("families", "intensities")


def perturbing_families() -> tuple[str, ...]:
    """Every registered family (read when a suite is parsed: a family registered after this
    module was imported is accepted too)."""
    return tuple(f for f in C.PERTURBATION_FAMILIES if f != C.FAMILY_NONE)


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    """A task of a suite with its in-distribution and held-out templates."""

    task: str
    templates: tuple[str, ...]
    held_out_templates: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Cell:
    """One perturbation condition: the families applied together and their intensity."""

    families: tuple[str, ...]
    intensity: float
    #: the disturbance event of a ``disturbance`` sweep ("" = the family's default)
    event: str = ""

    @property
    def label(self) -> str:
        """``none``, a family name, or family names joined by ``+``."""
        return "+".join(self.families) if self.families else C.FAMILY_NONE


@dataclasses.dataclass(frozen=True)
class Suite:
    """A validated evaluation suite (see the module docstring and config/suites/)."""

    name: str
    seed: int
    episodes_per_cell: int
    tasks: tuple[TaskEntry, ...]
    cells: tuple[Cell, ...]
    schedule: str = "constant"
    description: str = ""
    source: str = ""
    #: Control steps per episode (0 = the env's own limit); rollout options may override it.
    max_steps: int = 0
    #: Episodes of each held-out template cell (0 = ``episodes_per_cell``).
    held_out_episodes_per_cell: int = 0

    @property
    def held_out_episodes(self) -> int:
        """Episodes of each held-out (task, cell)."""
        return self.held_out_episodes_per_cell or self.episodes_per_cell

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description (recorded in the report)."""
        out = {
            "name": self.name, "seed": self.seed, "episodes_per_cell": self.episodes_per_cell,
            "schedule": self.schedule, "description": self.description,
            "tasks": [dataclasses.asdict(t) for t in self.tasks],
            "cells": [{"family": c.label, "families": list(c.families),
                       "intensity": c.intensity, **({"event": c.event} if c.event else {})}
                      for c in self.cells],
        }
        if self.max_steps:  # only when set: reports of suites without it keep their ids
            out["max_steps"] = self.max_steps
        if self.held_out_episodes_per_cell:   # likewise
            out["held_out_episodes_per_cell"] = self.held_out_episodes_per_cell
        return out


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """What a rollout worker must run; the worker copies these fields into its EpisodeResult."""

    index: int
    task: str
    template: str
    split: str
    family: str
    families: tuple[str, ...]
    intensity: float
    schedule: str
    seed: int
    perturbation_seed: int
    #: the cell's disturbance event ("" = the family's default; see :class:`Cell`)
    event: str = ""


def _keys(data: Any, field: str, allowed: Sequence[str], source: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(field or "suite", data, "a mapping with keys " + ", ".join(allowed),
                          source)
    for key in data:
        if key not in allowed:
            prefix = f"{field}." if field else ""
            raise ConfigError(f"{prefix}{key}", data[key], "one of the keys " + ", ".join(allowed),
                              source)
    return data


def _list(data: Any, field: str, source: str, allow_empty: bool = False) -> list[Any]:
    if not isinstance(data, list) or (not data and not allow_empty):
        raise ConfigError(field, data, "a non-empty list" if not allow_empty else "a list", source)
    return data


def _names(data: Any, field: str, source: str, allow_empty: bool = False) -> tuple[str, ...]:
    items = _list(data, field, source, allow_empty)
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{field}[{i}]", item, "a non-empty string", source)
        if item in seen:
            raise ConfigError(f"{field}[{i}]", item, "a name not listed before", source)
        seen.add(item)
    return tuple(items)


def _grid(data: Any, field: str, source: str) -> tuple[float, ...]:
    items = _list(data, field, source)
    out: list[float] = []
    for i, item in enumerate(items):
        check_range(f"{field}[{i}]", item, 0.0, 1.0, low_open=True, source=source)
        if out and item <= out[-1]:
            raise ConfigError(f"{field}[{i}]", item, f"a value > {out[-1]:g} (strictly "
                              "increasing grid)", source)
        out.append(float(item))
    return tuple(out)


def parse_suite(data: Any, source: str) -> Suite:
    """Validate suite data (as loaded from YAML) and build a :class:`Suite`.

    Raises:
        ConfigError: naming the file, the field path, the value and what is allowed.
    """
    data = _keys(data, "", SUITE_KEYS, source)
    for key in ("name", "seed", "episodes_per_cell", "tasks", "cells"):
        if key not in data:
            raise ConfigError(key, None, "a value (required key)", source)
    name = data["name"]
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("name", name, "a non-empty string", source)
    seed = check_int("seed", data["seed"], 0, SEED_MAX, source)
    episodes = check_int("episodes_per_cell", data["episodes_per_cell"], 1, 100_000, source)
    held_out_episodes = 0 if "held_out_episodes_per_cell" not in data else check_int(
        "held_out_episodes_per_cell", data["held_out_episodes_per_cell"], 1, 100_000, source)
    schedule = check_choice("schedule", data.get("schedule", "constant"), C.SCHEDULES, source)
    max_steps = check_int("max_steps", data.get("max_steps", 0), 0, 1_000_000, source)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError("description", description, "a string", source)

    tasks = []
    seen_tasks: set[str] = set()
    for i, raw in enumerate(_list(data["tasks"], "tasks", source)):
        field = f"tasks[{i}]"
        raw = _keys(raw, field, TASK_KEYS, source)
        task = check_choice(f"{field}.task", raw.get("task"), C.TASKS, source)
        if task in seen_tasks:
            raise ConfigError(f"{field}.task", task, "a task not listed before", source)
        seen_tasks.add(task)
        train = _names(raw.get("templates"), f"{field}.templates", source)
        held = _names(raw.get("held_out_templates", []), f"{field}.held_out_templates", source,
                      allow_empty=True)
        for j, template in enumerate(held):
            if template in train:
                raise ConfigError(f"{field}.held_out_templates[{j}]", template,
                                  "a template not in the training templates", source)
        tasks.append(TaskEntry(task, train, held))

    cells_raw = _keys(data["cells"], "cells", CELL_KEYS, source)
    cells: list[Cell] = []
    nominal = cells_raw.get("nominal", True)
    if not isinstance(nominal, bool):
        raise ConfigError("cells.nominal", nominal, "true or false", source)
    if nominal:
        cells.append(Cell((), 0.0))
    seen_labels: set[str] = set()
    for i, raw in enumerate(_list(cells_raw.get("sweeps", []), "cells.sweeps", source, True)):
        field = f"cells.sweeps[{i}]"
        raw = _keys(raw, field, SWEEP_KEYS, source)
        family = check_choice(f"{field}.family", raw.get("family"), perturbing_families(),
                              source)
        if family in seen_labels:
            raise ConfigError(f"{field}.family", family, "a family not swept before", source)
        seen_labels.add(family)
        event = raw.get("event", "")
        if "event" in raw:
            if family != C.FAMILY_DISTURBANCE:
                raise ConfigError(f"{field}.event", event,
                                  f"no event for family {family} (only {C.FAMILY_DISTURBANCE})",
                                  source)
            from clawgym_ros.perturbations.disturbance import EVENT_ANY, EVENTS

            event = check_choice(f"{field}.event", event, (*EVENTS, EVENT_ANY), source)
        cells += [Cell((family,), x, event) for x in _grid(raw.get("intensities"),
                                                            f"{field}.intensities", source)]
    combos = _list(cells_raw.get("combinations", []), "cells.combinations", source, True)
    for i, raw in enumerate(combos):
        field = f"cells.combinations[{i}]"
        raw = _keys(raw, field, COMBINATION_KEYS, source)
        families = _names(raw.get("families"), f"{field}.families", source)
        for j, family in enumerate(families):
            check_choice(f"{field}.families[{j}]", family, perturbing_families(), source)
        if len(families) < 2:
            raise ConfigError(f"{field}.families", list(families), "two or more families",
                              source)
        families = tuple(sorted(families))
        label = "+".join(families)
        if label in seen_labels:
            raise ConfigError(f"{field}.families", list(families),
                              "a combination not listed before", source)
        seen_labels.add(label)
        cells += [Cell(families, x) for x in _grid(raw.get("intensities"),
                                                    f"{field}.intensities", source)]
    if not cells:
        raise ConfigError("cells", dict(cells_raw), "at least one cell (nominal, a sweep or a "
                          "combination)", source)
    return Suite(name=name, seed=seed, episodes_per_cell=episodes, tasks=tuple(tasks),
                 cells=tuple(cells), schedule=schedule, description=description, source=source,
                 max_steps=max_steps, held_out_episodes_per_cell=held_out_episodes)


def suite_dirs() -> list[Path]:
    """Folders searched for suites by name: config/ of the source tree, else of the installed
    share folder (:func:`clawgym_ros.config.data_root`)."""
    from clawgym_ros.config import data_root

    return [data_root() / "config" / C.DIR_SUITES]


def available_suites() -> list[str]:
    """Names of the suites found in :func:`suite_dirs`."""
    names = set()
    for folder in suite_dirs():
        if folder.is_dir():
            names |= {p.stem for p in folder.glob("*.yaml")}
    return sorted(names)


def suite_ref(name_or_path: str | Path) -> str:
    """How a report names the suite it ran: a suite name as given, a suite file by its file
    name. The report holds the suite's whole content; the folder the file was read from (a
    checkout's location, a working directory) is not part of the result, so it stays out of
    the report and its content id (the artifact's manifest records the path as given)."""
    path = Path(name_or_path)
    return path.name if path.suffix in (".yaml", ".yml") else str(name_or_path)


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a suite by name (``nominal``) or by path to a YAML file.

    Raises:
        ConfigError: unknown name (listing the known ones), or invalid content.
    """
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        for folder in suite_dirs():
            candidate = folder / f"{name_or_path}.yaml"
            if is_file(candidate):  # a name too long for a file is unknown, not an OSError
                path = candidate
                break
        else:
            raise ConfigError("suite", str(name_or_path),
                              "a suite file or one of " + ", ".join(available_suites()))
    suite = parse_suite(load_yaml(path), str(path))
    check_templates(suite)
    check_disturbances(suite)
    return suite


def check_disturbances(suite: Suite) -> None:
    """Every task of a suite with a ``disturbance`` cell supports that cell's event (declared
    by the task: ``Task.disturbances``).

    Raises:
        ConfigError: naming the suite file, the cell's field, the event and the events the
            task supports.
    """
    from clawgym_ros.perturbations.disturbance import DisturbanceConfig, check_event
    from clawgym_ros.tasks.registry import get_task

    for c in suite.cells:
        if C.FAMILY_DISTURBANCE not in c.families:
            continue
        event = c.event or DisturbanceConfig().event
        for entry in suite.tasks:
            check_event(event, get_task(entry.task),
                        f"cells.sweeps[{c.label}].event",
                        suite.source or None)


def check_templates(suite: Suite) -> None:
    """Every template a suite names exists in its task (checked when the suite is loaded; an
    unknown one failed after the first episodes, without the file).

    Raises:
        ConfigError: naming the suite file, ``tasks[i].templates`` and the known templates.
    """
    from clawgym_ros.tasks.registry import get_task

    for i, entry in enumerate(suite.tasks):
        task = None
        for field in ("templates", "held_out_templates"):
            for name in getattr(entry, field):
                task = task or get_task(entry.task)
                known = [t.name for t in task.templates]
                if name not in known:
                    raise ConfigError(f"tasks[{i}].{field}", name, "one of " + ", ".join(known),
                                      suite.source or None)


def _crc(name: str) -> int:
    return zlib.crc32(name.encode())


def derive_seed(suite_seed: int, *key: int) -> int:
    """A 63-bit seed from the suite seed and an integer key (SeedSequence spawn key)."""
    words = np.random.SeedSequence(suite_seed, spawn_key=tuple(key)).generate_state(
        2, np.uint32)
    return int((int(words[0]) << 32 | int(words[1])) & SEED_MAX)


def expand(suite: Suite, seed: int | None = None) -> list[EpisodeSpec]:
    """All episodes of ``suite`` in a fixed order (task, split, cell, repetition).

    Args:
        suite: the validated suite.
        seed: overrides the suite's seed (``clawgym eval --seed``).

    Returns:
        Episode specs with ``index`` 0..N-1; the same inputs always give the same list.
    """
    suite_seed = suite.seed if seed is None else check_int("seed", seed, 0, SEED_MAX)
    specs: list[EpisodeSpec] = []
    for entry in suite.tasks:
        groups = [(C.SPLIT_TRAIN, entry.templates), (C.SPLIT_HELD_OUT, entry.held_out_templates)]
        for split, templates in groups:
            if not templates:
                continue
            # Held-out templates run in the nominal cell only: generalization is measured
            # without perturbation (metrics.generalization), so perturbed held-out episodes
            # would be spent without being scored.
            cells = suite.cells if split == C.SPLIT_TRAIN else [
                c for c in suite.cells if not c.families]
            reps = suite.episodes_per_cell if split == C.SPLIT_TRAIN else \
                suite.held_out_episodes
            for cell in cells:
                for rep in range(reps):
                    template = templates[rep % len(templates)]
                    key = (_crc(entry.task), _crc(template), rep)
                    cell_key = (_crc(cell.label), int(round(cell.intensity * 1e6)))
                    specs.append(EpisodeSpec(
                        index=len(specs), task=entry.task, template=template, split=split,
                        family=cell.label, families=cell.families, intensity=cell.intensity,
                        schedule=suite.schedule, seed=derive_seed(suite_seed, *key),
                        perturbation_seed=derive_seed(suite_seed, *key, *cell_key),
                        event=cell.event))
    return specs
