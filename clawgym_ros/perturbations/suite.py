"""Perturbation suites: a families x intensity grid plus combined perturbations, from YAML.

Used by synthesis mixtures and evaluation suites. Format (``config/perturbations/*.yaml``)::

    suite:
      name: robustness_default      # required
      seed: 0                       # config seed of every perturbation (default 0)
      schedule: constant            # default schedule (constant, stepped, random)
      include_baseline: true        # add an unperturbed case "none" (default true)
      families:                     # the grid: one case per family and intensity
        lighting:
          intensities: [0.25, 0.5, 1.0]
          parameters: {change_rate_hz: 0.1}     # config fields of the family (optional)
          schedule: constant                    # optional, overrides the suite's
      combined:                     # cases with several families at once
        - name: dark_and_noisy
          members:
            lighting: {intensity: 1.0}
            sensor_noise: {intensity: 0.5, parameters: {image_std: 20.0}}

Grid cases are named ``<family>@<intensity>``. Every error names the file, the field path, the
value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range, load_yaml
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations import FAMILIES, config_for
from clawgym_ros.perturbations.base import SEED_MAX, Perturbation, PerturbationConfig

BASELINE = "none"


@dataclasses.dataclass(frozen=True)
class SuiteCase:
    """One condition of a suite: a name and the configs of its perturbations (by family)."""

    name: str
    configs: Mapping[str, PerturbationConfig]

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(self.configs)

    def make(self) -> dict[str, Perturbation]:
        """Fresh perturbation objects of this case, by family."""
        return {family: FAMILIES[family](cfg) for family, cfg in self.configs.items()}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for manifests and episode records)."""
        return {"name": self.name,
                "configs": {f: dataclasses.asdict(c) for f, c in self.configs.items()}}


@dataclasses.dataclass(frozen=True)
class PerturbationSuite:
    """A named list of cases; ``source`` is the file it came from."""

    name: str
    cases: tuple[SuiteCase, ...]
    seed: int = 0
    source: str | None = None

    def case(self, name: str) -> SuiteCase:
        """The case called ``name``.

        Raises:
            ConfigError: no such case.
        """
        for case in self.cases:
            if case.name == name:
                return case
        raise ConfigError("case", name, "one of " + ", ".join(c.name for c in self.cases),
                          self.source)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cases)


def _mapping(value: Any, field: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(field, value, "a mapping", source)
    return value


def _only(data: Mapping[str, Any], allowed: tuple[str, ...], prefix: str,
          source: str | None) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{prefix}.{key}", data[key], "one of the keys " +
                              ", ".join(allowed), source)


def _config(family: str, intensity: Any, schedule: str, seed: int, params: Any, field: str,
            source: str | None) -> PerturbationConfig:
    check_choice(f"{field}.family", family, FAMILIES, source)
    check_range(f"{field}.intensity", intensity, 0.0, 1.0, source=source)
    params = dict(_mapping(params if params is not None else {}, f"{field}.parameters", source))
    for key in ("family", "intensity", "schedule", "seed"):
        if key in params:
            raise ConfigError(f"{field}.parameters.{key}", params[key],
                              "family parameters only (set it on the entry)", source)
    try:
        return config_for(family, {**params, "intensity": float(intensity),
                                   "schedule": schedule, "seed": seed})
    except ConfigError as err:
        raise ConfigError(f"{field}.parameters.{err.field}", err.value, err.allowed,
                          source) from None


def parse_suite(data: Any, source: str | None = None) -> PerturbationSuite:
    """Build a suite from parsed YAML data (see the module docstring for the format).

    Raises:
        ConfigError: naming the source, the field path, the value and what is allowed.
    """
    root = _mapping(data, "suite", source)
    _only(root, ("suite",), "", source)
    suite = _mapping(root.get("suite"), "suite", source)
    _only(suite, ("name", "seed", "schedule", "include_baseline", "families", "combined"),
          "suite", source)
    name = suite.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("suite.name", name, "a non-empty string", source)
    seed = check_int("suite.seed", suite.get("seed", 0), 0, SEED_MAX, source)
    schedule = check_choice("suite.schedule", suite.get("schedule", "constant"), C.SCHEDULES,
                            source)
    baseline = suite.get("include_baseline", True)
    if not isinstance(baseline, bool):
        raise ConfigError("suite.include_baseline", baseline, "true or false", source)
    cases: list[SuiteCase] = [SuiteCase(BASELINE, {})] if baseline else []

    families = _mapping(suite.get("families", {}) or {}, "suite.families", source)
    for family, entry in families.items():
        field = f"suite.families.{family}"
        check_choice(field, family, FAMILIES, source)
        entry = _mapping(entry, field, source)
        _only(entry, ("intensities", "parameters", "schedule"), field, source)
        intensities = entry.get("intensities")
        if not isinstance(intensities, list) or not intensities:
            raise ConfigError(f"{field}.intensities", intensities,
                              "a non-empty list of numbers in [0, 1]", source)
        fam_schedule = check_choice(f"{field}.schedule", entry.get("schedule", schedule),
                                    C.SCHEDULES, source)
        for i, intensity in enumerate(intensities):
            check_range(f"{field}.intensities[{i}]", intensity, 0.0, 1.0, source=source)
            cfg = _config(family, intensity, fam_schedule, seed, entry.get("parameters"),
                          field, source)
            cases.append(SuiteCase(f"{family}@{float(intensity):g}", {family: cfg}))

    combined = suite.get("combined", []) or []
    if not isinstance(combined, list):
        raise ConfigError("suite.combined", combined, "a list of combined cases", source)
    for i, entry in enumerate(combined):
        field = f"suite.combined[{i}]"
        entry = _mapping(entry, field, source)
        _only(entry, ("name", "members", "schedule"), field, source)
        cname = entry.get("name")
        if not isinstance(cname, str) or not cname:
            raise ConfigError(f"{field}.name", cname, "a non-empty string", source)
        members = _mapping(entry.get("members"), f"{field}.members", source)
        if len(members) < 2:
            raise ConfigError(f"{field}.members", list(members), "two or more families", source)
        c_schedule = check_choice(f"{field}.schedule", entry.get("schedule", schedule),
                                  C.SCHEDULES, source)
        configs = {}
        for family, member in members.items():
            mfield = f"{field}.members.{family}"
            check_choice(mfield, family, FAMILIES, source)
            member = _mapping(member, mfield, source)
            _only(member, ("intensity", "parameters"), mfield, source)
            configs[family] = _config(family, member.get("intensity"), c_schedule, seed,
                                      member.get("parameters"), mfield, source)
        cases.append(SuiteCase(cname, configs))

    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ConfigError("suite case name", case.name, "unique names", source)
        seen.add(case.name)
    if not cases:
        raise ConfigError("suite.families", {}, "at least one case", source)
    return PerturbationSuite(name, tuple(cases), seed, source)


def load_suite(path: str | Path) -> PerturbationSuite:
    """Load and validate a suite YAML file.

    Raises:
        ConfigError: unreadable file, bad YAML, or invalid content (naming file and field).
    """
    return parse_suite(load_yaml(path), str(path))
