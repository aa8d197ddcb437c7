"""Lighting: diffuse / ambient / headlight level, light direction and position, sudden changes
and flicker, producing :class:`~clawgym_ros.sim.backend.LightingSettings` over time.

Model (``s`` = episode intensity; parameters at intensity 1):

- a *level* is drawn at the start of an episode and at each sudden change: with probability
  ``bright_probability`` the scene brightens, otherwise it dims; the diffuse, ambient and
  headlight scales are ``1 + boost_fraction * s * m`` (brighten) or
  ``1 - dim_fraction * s * m`` (dim), with an independent magnitude ``m ~ U(0.5, 1)`` each;
- the light direction is ``base_direction`` tilted by ``direction_tilt_rad * s * m`` towards a
  uniformly random azimuth; the light position is ``base_position`` shifted by a random
  horizontal offset of length ``position_shift_m * s * m`` (off when ``position_shift_m`` = 0);
- sudden changes arrive as a Poisson process of rate ``change_rate_hz * s`` per second of
  simulation time; each redraws the level;
- flicker: a square wave of ``flicker_hz`` that multiplies the diffuse scale by
  ``1 - flicker_depth * s`` during its off half-periods (off when ``flicker_hz`` = 0).

Time is simulation time relative to the episode start (the first :meth:`settings_at` call after
reset), so the same seed gives the same lighting whatever the query times.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig, _help
from clawgym_ros.sim.backend import LightingSettings

Vec3 = tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class LightingConfig(PerturbationConfig):
    """Lighting parameters (fractions, angles, distances and rates at intensity 1)."""

    family: str = dataclasses.field(
        default=C.FAMILY_LIGHTING, metadata=_help("lighting, or 'none' to disable"))
    light_name: str = dataclasses.field(
        default="", metadata=_help("light to perturb; empty = every light"))
    dim_fraction: float = dataclasses.field(
        default=0.85, metadata=_help("largest fraction of light removed when dimming, [0, 1]"))
    boost_fraction: float = dataclasses.field(
        default=1.5, metadata=_help("largest fraction of light added when brightening, [0, 9]"))
    bright_probability: float = dataclasses.field(
        default=0.5, metadata=_help("probability that a level brightens rather than dims"))
    direction_tilt_rad: float = dataclasses.field(
        default=0.5, metadata=_help("largest tilt of the light direction, rad, [0, pi/2]"))
    base_direction: tuple[float, float, float] = dataclasses.field(
        default=(0.0, 0.0, -1.0), metadata=_help("direction tilted from, world frame"))
    position_shift_m: float = dataclasses.field(
        default=0.0, metadata=_help("largest horizontal shift of the light position, m"))
    base_position: tuple[float, float, float] = dataclasses.field(
        default=(0.0, 0.0, 2.5), metadata=_help("light position shifted from, world, m"))
    change_rate_hz: float = dataclasses.field(
        default=0.1, metadata=_help("sudden lighting changes per second of sim time"))
    flicker_hz: float = dataclasses.field(
        default=0.0, metadata=_help("flicker frequency, Hz (not scaled; 0 = off)"))
    flicker_depth: float = dataclasses.field(
        default=0.5, metadata=_help("fraction of diffuse light lost in flicker, [0, 1]"))

    FAMILY = C.FAMILY_LIGHTING

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("dim_fraction", self.dim_fraction, 0.0, 1.0)
        check_range("boost_fraction", self.boost_fraction, 0.0, 9.0)
        check_range("bright_probability", self.bright_probability, 0.0, 1.0)
        check_range("direction_tilt_rad", self.direction_tilt_rad, 0.0, math.pi / 2)
        check_range("position_shift_m", self.position_shift_m, 0.0, 100.0)
        check_range("change_rate_hz", self.change_rate_hz, 0.0, 1000.0)
        check_range("flicker_hz", self.flicker_hz, 0.0, 1000.0)
        check_range("flicker_depth", self.flicker_depth, 0.0, 1.0)
        for name in ("base_direction", "base_position"):
            value = getattr(self, name)
            if len(value) != 3:
                raise ConfigError(name, value, "three numbers (x, y, z)")
            for i, v in enumerate(value):
                check_range(f"{name}[{i}]", float(v))
        if math.hypot(*self.base_direction) < 1e-9:
            raise ConfigError("base_direction", self.base_direction, "a non-zero vector")


@dataclasses.dataclass(frozen=True)
class LightingLevel:
    """One drawn lighting level (held until the next sudden change)."""

    diffuse_scale: float = 1.0
    ambient_scale: float = 1.0
    headlight_scale: float = 1.0
    direction: Vec3 | None = None
    position: Vec3 | None = None
    tilt_rad: float = 0.0
    shift_m: float = 0.0


def tilt(direction: Vec3, angle: float, azimuth: float) -> Vec3:
    """``direction`` rotated by ``angle`` towards the horizontal heading ``azimuth`` (rad)."""
    d = np.asarray(direction, dtype=float)
    d /= np.linalg.norm(d)
    # A unit vector perpendicular to d: the horizontal heading projected off d.
    h = np.array([math.cos(azimuth), math.sin(azimuth), 0.0])
    p = h - d * float(h @ d)
    if np.linalg.norm(p) < 1e-9:
        p = np.array([0.0, 0.0, 1.0]) - d * d[2]
    p /= np.linalg.norm(p)
    out = d * math.cos(angle) + p * math.sin(angle)
    return tuple(float(v) for v in out)


class Lighting(Perturbation):
    """Lighting changes over time; see the module docstring for the model."""

    config_cls = LightingConfig

    def _restore(self) -> None:
        self.level = LightingLevel()
        self.changes: list[float] = []
        self._next_change: float | None = None
        self._t0: float | None = None
        self._last: LightingSettings | None = None
        self._flicker_off = False

    def _draw_level(self, rng: np.random.Generator) -> LightingLevel:
        c = self.config
        s = self.intensity
        bright = rng.random() < c.bright_probability
        mags = rng.uniform(0.5, 1.0, 5)
        azimuth = rng.uniform(0.0, 2 * math.pi)
        heading = rng.uniform(0.0, 2 * math.pi)

        def scale(m: float) -> float:
            if bright:
                return float(1.0 + c.boost_fraction * s * m)
            return float(max(0.0, 1.0 - c.dim_fraction * s * m))

        tilt_rad = c.direction_tilt_rad * s * mags[3]
        shift = c.position_shift_m * s * mags[4]
        direction = tilt(c.base_direction, tilt_rad, azimuth) if tilt_rad > 0 else None
        position = None
        if shift > 0:
            bx, by, bz = c.base_position
            position = (bx + shift * math.cos(heading), by + shift * math.sin(heading), bz)
        return LightingLevel(scale(mags[0]), scale(mags[1]), scale(mags[2]), direction,
                             position, tilt_rad, shift)

    def _sample_episode(self, rng: np.random.Generator) -> None:
        self.level = self._draw_level(self.stream("levels"))

    @property
    def change_rate(self) -> float:
        """Sudden changes per second in this episode."""
        return self.config.change_rate_hz * self.intensity

    def _advance(self, t: float) -> None:
        if self._t0 is None:
            self._t0 = t
        rate = self.change_rate
        if rate <= 0:
            return
        events = self.stream("changes")
        if self._next_change is None:
            self._next_change = self._t0 + float(events.exponential(1.0 / rate))
        while self._next_change <= t:
            self.changes.append(self._next_change)
            self.level = self._draw_level(self.stream("levels"))
            self._next_change += float(events.exponential(1.0 / rate))

    def settings_at(self, t: float) -> LightingSettings:
        """The lighting at simulation time ``t`` (s); call with non-decreasing times."""
        if not self.enabled:
            return LightingSettings(light_name=self.config.light_name)
        self._advance(t)
        lv = self.level
        diffuse = lv.diffuse_scale
        c = self.config
        self._flicker_off = False
        if c.flicker_hz > 0 and c.flicker_depth > 0:
            phase = ((t - (self._t0 or 0.0)) * c.flicker_hz) % 1.0
            if phase >= 0.5:
                self._flicker_off = True
                diffuse *= 1.0 - c.flicker_depth * self.intensity
        return LightingSettings(
            light_name=c.light_name, diffuse_scale=min(diffuse, 10.0),
            ambient_scale=min(lv.ambient_scale, 10.0), specular_scale=1.0,
            headlight_scale=min(lv.headlight_scale, 10.0), direction=lv.direction,
            position=lv.position)

    def update(self, t: float) -> LightingSettings | None:
        """The settings at ``t`` if they differ from the last ones returned, else None."""
        settings = self.settings_at(t)
        if settings == self._last:
            return None
        self._last = settings
        return settings

    @property
    def active(self) -> bool:
        """Whether the flicker is in its dark half-period."""
        return self._flicker_off

    def _parameters(self) -> dict[str, float]:
        lv = self.level
        c = self.config
        out = {
            "diffuse_scale": lv.diffuse_scale,
            "ambient_scale": lv.ambient_scale,
            "headlight_scale": lv.headlight_scale,
            "direction_tilt_rad": lv.tilt_rad,
            "position_shift_m": lv.shift_m,
            "change_rate_hz": self.change_rate,
            "changes": float(len(self.changes)),
            "flicker_hz": c.flicker_hz if self.enabled else 0.0,
            "flicker_depth": c.flicker_depth * self.intensity,
        }
        for prefix, vec in (("direction", lv.direction), ("position", lv.position)):
            if vec is not None:
                out.update({f"{prefix}_{a}": v for a, v in zip("xyz", vec, strict=True)})
        return out
