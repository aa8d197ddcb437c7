"""GPS dropout: outages with a start probability per second and a duration range, plus jitter.

Driven only by the fixes' timestamps (never wall time), so the same stream and seed give the
same outages in the Gymnasium wrapper and in ``gps_dropout_node``:

- between two fixes ``dt`` seconds apart (outside an outage, after ``warmup_s`` seconds of the
  episode's stream), an outage starts with probability ``1 - (1 - p) ** dt``, where
  ``p = intensity * start_probability`` is the probability per second; it starts at the stamp of
  the fix that triggered it and lasts ``uniform(min_duration_s, max_duration_s)`` seconds
  (durations are not scaled by intensity, so 8 s and longer outages are always expressible);
- during an outage (stamps in ``[start, start + duration)``) no fix is delivered in ``drop``
  mode; in ``degraded`` mode a fix with status NO_FIX (-1) is delivered, holding the last good
  position (a consumer must ignore it because of the status);
- every delivered good fix gets horizontal and vertical gaussian jitter (metres, scaled by
  intensity), converted to degrees for geodetic fixes.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range
from clawgym_ros.errors import ConfigError
from clawgym_ros.perturbations.base import (
    Perturbation,
    PerturbationConfig,
    _help,
    canonical_stamp,
)

#: sensor_msgs/NavSatStatus values (kept here so the core needs no message import).
STATUS_NO_FIX = -1
STATUS_FIX = 0
EARTH_RADIUS_M = 6378137.0
MODES = ("drop", "degraded")


@dataclasses.dataclass(frozen=True)
class GpsDropoutConfig(PerturbationConfig):
    """GPS outage and jitter parameters (probability and jitter at intensity 1)."""

    family: str = dataclasses.field(
        default=C.FAMILY_GPS_DROPOUT, metadata=_help("gps_dropout, or 'none' to disable"))
    start_probability: float = dataclasses.field(
        default=0.05, metadata=_help("probability per second that an outage starts, [0, 1]"))
    min_duration_s: float = dataclasses.field(
        default=8.0, metadata=_help("shortest outage, s (not scaled by intensity)"))
    max_duration_s: float = dataclasses.field(
        default=15.0, metadata=_help("longest outage, s (not scaled by intensity)"))
    max_outages: int = dataclasses.field(
        default=0, metadata=_help("outages per episode at most; 0 = unlimited"))
    warmup_s: float = dataclasses.field(
        default=0.0, metadata=_help("no outage starts in the first warmup_s of an episode"))
    jitter_std_m: float = dataclasses.field(
        default=1.5, metadata=_help("horizontal position jitter std per axis, m"))
    jitter_vertical_std_m: float = dataclasses.field(
        default=3.0, metadata=_help("vertical position jitter std, m"))
    mode: str = dataclasses.field(
        default="drop", metadata=_help("drop: no fix in outages; degraded: status NO_FIX"))

    FAMILY = C.FAMILY_GPS_DROPOUT

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("start_probability", self.start_probability, 0.0, 1.0)
        check_range("min_duration_s", self.min_duration_s, 0.0, 3600.0)
        check_range("max_duration_s", self.max_duration_s, 0.0, 3600.0)
        if self.max_duration_s < self.min_duration_s:
            raise ConfigError("max_duration_s", self.max_duration_s,
                              f">= min_duration_s ({self.min_duration_s:g})")
        check_int("max_outages", self.max_outages, 0, 1_000_000)
        check_range("warmup_s", self.warmup_s, 0.0)
        check_range("jitter_std_m", self.jitter_std_m, 0.0, 1000.0)
        check_range("jitter_vertical_std_m", self.jitter_vertical_std_m, 0.0, 1000.0)
        check_choice("mode", self.mode, MODES)


@dataclasses.dataclass(frozen=True)
class GpsFix:
    """A geodetic fix (degrees, metres) with its stamp in seconds and NavSatStatus status."""

    latitude: float
    longitude: float
    altitude: float
    stamp: float
    status: int = STATUS_FIX


@dataclasses.dataclass(frozen=True)
class Outage:
    """One outage: start stamp and duration in seconds."""

    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclasses.dataclass(frozen=True)
class GpsDecision:
    """What happens to one fix: delivered or not, degraded or not, and its jitter (E, N, U)."""

    deliver: bool
    degraded: bool
    jitter_enu: tuple[float, float, float]


class GpsDropout(Perturbation):
    """GPS outages and jitter; see the module docstring for the model."""

    config_cls = GpsDropoutConfig

    def _restore(self) -> None:
        self.outages: list[Outage] = []
        self._first_stamp: float | None = None
        self._last_stamp: float | None = None
        self._last_good: GpsFix | None = None
        self._last_local: np.ndarray | None = None
        self._now: float | None = None

    def _sample_episode(self, rng: np.random.Generator) -> None:
        pass

    @property
    def start_probability(self) -> float:
        """Effective probability per second that an outage starts."""
        return self.intensity * self.config.start_probability

    def _parameters(self) -> dict[str, float]:
        c = self.config
        s = self.intensity
        return {
            "start_probability": self.start_probability,
            "min_duration_s": c.min_duration_s if s > 0 else 0.0,
            "max_duration_s": c.max_duration_s if s > 0 else 0.0,
            "max_outages": float(c.max_outages),
            "warmup_s": c.warmup_s,
            "jitter_std_m": c.jitter_std_m * s,
            "jitter_vertical_std_m": c.jitter_vertical_std_m * s,
            "degraded_mode": 1.0 if c.mode == "degraded" else 0.0,
            "outages": float(len(self.outages)),
        }

    @property
    def active(self) -> bool:
        """Whether the latest fix fell into an outage."""
        return bool(self.outages) and self._now is not None and \
            self.outages[-1].start <= self._now < self.outages[-1].end

    def decide(self, stamp: float) -> GpsDecision:
        """Advance to a fix stamped ``stamp`` (seconds) and decide its fate."""
        stamp = canonical_stamp(stamp)
        if not self.enabled:
            self._now = stamp
            return GpsDecision(True, False, (0.0, 0.0, 0.0))
        c = self.config
        rng = self.stream("gps")
        u_start = rng.random()
        jitter = rng.normal(0.0, 1.0, 3) * (c.jitter_std_m, c.jitter_std_m,
                                             c.jitter_vertical_std_m) * self.intensity
        if self._first_stamp is None:
            self._first_stamp = stamp
        prev = self._last_stamp
        self._last_stamp = stamp
        self._now = stamp
        if self.outages and stamp < self.outages[-1].end:
            in_outage = stamp >= self.outages[-1].start
        else:
            in_outage = False
            can_start = (prev is not None and stamp >= self._first_stamp + c.warmup_s
                         and (c.max_outages == 0 or len(self.outages) < c.max_outages))
            if can_start:
                since = prev if not self.outages else max(prev, self.outages[-1].end)
                since = max(since, self._first_stamp + c.warmup_s) if c.warmup_s > 0 else since
                dt = max(0.0, stamp - since)
                p = self.start_probability
                hazard = 1.0 if p >= 1.0 and dt > 0 else 1.0 - (1.0 - p) ** dt
                if u_start < hazard:
                    duration = float(self.stream("durations").uniform(
                        c.min_duration_s, c.max_duration_s))
                    self.outages.append(Outage(stamp, duration))
                    in_outage = duration > 0
        if in_outage:
            return GpsDecision(c.mode == "degraded", True, (0.0, 0.0, 0.0))
        return GpsDecision(True, False, tuple(float(v) for v in jitter))

    def apply(self, fix: GpsFix) -> GpsFix | None:
        """Perturb one geodetic fix; None when it is not delivered (drop mode outage)."""
        decision = self.decide(fix.stamp)
        if not decision.deliver:
            return None
        if decision.degraded:
            held = self._last_good or fix
            return GpsFix(held.latitude, held.longitude, held.altitude, fix.stamp,
                          STATUS_NO_FIX)
        east, north, up = decision.jitter_enu
        lat = fix.latitude + math.degrees(north / EARTH_RADIUS_M)
        coslat = max(math.cos(math.radians(fix.latitude)), 1e-9)
        lon = fix.longitude + math.degrees(east / (EARTH_RADIUS_M * coslat))
        out = GpsFix(lat, lon, fix.altitude + up, fix.stamp, fix.status)
        self._last_good = out
        return out

    def apply_local(self, position: np.ndarray, stamp: float) -> tuple[np.ndarray, int] | None:
        """Perturb a local ENU position (m, first three components used).

        Returns:
            (position, status), or None when not delivered (drop mode outage).
        """
        decision = self.decide(stamp)
        if not decision.deliver:
            return None
        position = np.asarray(position, dtype=float)
        if decision.degraded:
            held = self._last_local if self._last_local is not None else position
            return held.copy(), STATUS_NO_FIX
        out = position.copy()
        out[:3] += decision.jitter_enu
        self._last_local = out.copy()
        return out, STATUS_FIX
