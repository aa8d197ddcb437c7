"""The common shape of every perturbation: config, schedule, seeded streams, state, reset.

A perturbation is an object with its own seeded generators (never the global ``np.random``)
that remembers the unperturbed defaults and restores them on :meth:`Perturbation.reset`.
The same object serves the in-process Gymnasium wrappers and the ROS nodes, so both paths
perturb identically for the same seed and input stream.

Intensity and schedule:
    ``intensity`` in [0, 1] scales every family parameter linearly: a parameter documented as
    "X at intensity 1" is ``X * episode_intensity`` in an episode. The per-episode intensity
    comes from the schedule:

    - ``constant``: the configured intensity in every episode;
    - ``stepped``: episode ``k`` uses ``intensity * ((k % steps) + 1) / steps`` (a ramp that
      reaches the configured intensity every ``steps`` episodes);
    - ``random``: uniform in [0, intensity], drawn from the perturbation's own generator.

Seeding:
    A configured perturbation is begun by ``reset()`` (the first reset starts episode 0).
    Episode ``k`` after configuration draws from streams keyed by ``(seed, 0, k, stream)``;
    ``reset(seed=s)`` keys them by ``(seed, 1, s, stream)`` instead, so an episode is
    reproducible from the config seed and the episode seed alone, whatever earlier episodes
    consumed. Every input stream (joint states, IMU, GPS, ...) has its own generator, so the
    interleaving of messages from different topics does not change the values.
"""

from __future__ import annotations

import abc
import dataclasses
import zlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError

SEED_MAX = 2**63 - 1


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclasses.dataclass(frozen=True)
class PerturbationConfig:
    """Fields shared by every family (subclasses add the family's parameters).

    Family parameters are given at intensity 1 and scaled by the episode intensity.
    """

    family: str = dataclasses.field(
        default=C.FAMILY_NONE, metadata=_help("perturbation family, or 'none' to disable"))
    intensity: float = dataclasses.field(
        default=0.0, metadata=_help("strength in [0, 1]; scales every family parameter"))
    schedule: str = dataclasses.field(
        default="constant", metadata=_help("constant, stepped or random (per episode)"))
    seed: int = dataclasses.field(default=0, metadata=_help("seed of the own generator"))
    steps: int = dataclasses.field(
        default=4, metadata=_help("number of levels of the stepped schedule, [1, 1000]"))

    #: The family this config class describes (subclasses set it).
    FAMILY: ClassVar[str] = C.FAMILY_NONE

    def __post_init__(self) -> None:
        check_choice("family", self.family, (self.FAMILY, C.FAMILY_NONE))
        check_range("intensity", self.intensity, 0.0, 1.0)
        check_choice("schedule", self.schedule, C.SCHEDULES)
        check_int("seed", self.seed, 0, SEED_MAX)
        check_int("steps", self.steps, 1, 1000)

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """Names of the family's numeric parameters (what SetPerturbation may override)."""
        common = {f.name for f in dataclasses.fields(PerturbationConfig)}
        return tuple(
            f.name for f in dataclasses.fields(cls)
            if f.name not in common and f.type in ("float", "int", "bool", float, int, bool)
        )

    def with_overrides(self, overrides: Mapping[str, float]) -> PerturbationConfig:
        """A copy with family parameters replaced by name (values converted to the field type).

        Raises:
            ConfigError: unknown parameter name, or a value the config rejects.
        """
        names = self.parameter_names()
        types = {f.name: f.type for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in names:
                raise ConfigError(f"parameters.{name}", value, "one of " + ", ".join(names))
            kind = types[name]
            if kind in ("int", int):
                if float(value) != int(value):
                    raise ConfigError(f"parameters.{name}", value, "an integer")
                value = int(value)
            elif kind in ("bool", bool):
                value = bool(value)
            else:
                value = float(value)
            changes[name] = value
        return dataclasses.replace(self, **changes)

    @property
    def enabled(self) -> bool:
        """Whether this config perturbs anything at all."""
        return self.family != C.FAMILY_NONE and self.intensity > 0.0


def episode_intensity(config: PerturbationConfig, episode: int, rng: np.random.Generator) -> float:
    """The intensity of episode ``episode`` under ``config.schedule`` (see module docstring)."""
    if not config.enabled:
        return 0.0
    if config.schedule == "stepped":
        return config.intensity * ((episode % config.steps) + 1) / config.steps
    if config.schedule == "random":
        return float(rng.uniform(0.0, config.intensity))
    return config.intensity


def canonical_stamp(seconds: float) -> float:
    """``seconds`` rounded to whole nanoseconds, the resolution of a ROS header stamp.

    Cores read every timestamp through this, so a simulation time (float) and the same time
    carried in a message (sec, nanosec) give bit-identical results in both front ends.
    """
    return round(float(seconds) * 1e9) / 1e9


def stream_id(name: str) -> int:
    """A stable integer for a stream name (Python's ``hash`` is salted per process)."""
    return zlib.crc32(name.encode())


class Perturbation(abc.ABC):
    """Base class: holds the config, the episode counter and the seeded streams.

    Subclasses implement :meth:`_restore` (forget everything from the previous episode, i.e.
    return to the unperturbed defaults), :meth:`_sample_episode` (draw the episode's
    parameters) and :meth:`_parameters` (the active parameters in physical units).
    """

    config_cls: ClassVar[type[PerturbationConfig]] = PerturbationConfig

    def __init__(self, config: PerturbationConfig | None = None):
        self.configure(config if config is not None else self.config_cls())

    # --- lifecycle --------------------------------------------------------------------------
    def configure(self, config: PerturbationConfig) -> None:
        """Replace the configuration and prepare episode 0 (restoring defaults).

        Like a Gymnasium env, a configured perturbation is begun by :meth:`reset`: the first
        reset after configure starts episode 0 (it does not advance), later ones advance.
        """
        if not isinstance(config, self.config_cls):
            raise ConfigError("config", type(config).__name__, self.config_cls.__name__)
        self.config = config
        self.episode = 0
        self._begin(None)
        self._fresh = True

    def reset(self, seed: int | None = None) -> None:
        """Start the next episode: restore defaults, re-seed, draw the episode's parameters.

        Args:
            seed: episode seed; None continues the configured seed's episode sequence.
        """
        if not self._fresh:
            self.episode += 1
        self._fresh = False
        self._begin(seed)

    def _begin(self, seed: int | None) -> None:
        if seed is None:
            self._key: tuple[int, ...] = (self.config.seed, 0, self.episode)
        else:
            check_int("seed", int(seed), 0, SEED_MAX)
            self._key = (self.config.seed, 1, int(seed))
        self._streams: dict[str, np.random.Generator] = {}
        self.intensity = episode_intensity(self.config, self.episode, self.stream("schedule"))
        self._restore()
        if self.intensity > 0.0:
            self._sample_episode(self.stream("episode"))

    def stream(self, name: str) -> np.random.Generator:
        """The episode's generator named ``name`` (created on first use)."""
        rng = self._streams.get(name)
        if rng is None:
            rng = np.random.default_rng([*self._key, stream_id(name)])
            self._streams[name] = rng
        return rng

    # --- records ----------------------------------------------------------------------------
    @property
    def family(self) -> str:
        return self.config.family

    @property
    def enabled(self) -> bool:
        """Whether the current episode perturbs anything."""
        return self.intensity > 0.0

    @property
    def active(self) -> bool:
        """Whether an intermittent effect (e.g. a GPS outage) is in progress right now."""
        return False

    def state(self) -> dict[str, float]:
        """Active parameters of the current episode, name -> value in documented units.

        Always includes ``intensity`` (the episode's); the family's parameters follow, all
        zero / neutral when disabled, so every episode records exactly what it saw.
        """
        out = {"intensity": float(self.intensity)}
        out.update({k: float(v) for k, v in self._parameters().items()})
        return out

    def record(self) -> dict[str, Any]:
        """Everything an episode record needs: family, config, schedule and active state."""
        return {
            "family": self.config.family,
            "configured_intensity": self.config.intensity,
            "schedule": self.config.schedule,
            "seed": self.config.seed,
            "episode": self.episode,
            "parameters": self.state(),
        }

    # --- family hooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def _restore(self) -> None:
        """Forget the previous episode's draws and internal state (defaults)."""

    @abc.abstractmethod
    def _sample_episode(self, rng: np.random.Generator) -> None:
        """Draw the episode's parameters (called only when intensity > 0)."""

    @abc.abstractmethod
    def _parameters(self) -> dict[str, float]:
        """The active parameters in physical units."""
