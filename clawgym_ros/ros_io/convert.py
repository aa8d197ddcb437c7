"""Conversions between messages and plain Python values used by the cores."""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time

_NS = 1_000_000_000


def nanos(seconds: float) -> int:
    """``seconds`` as integer nanoseconds (rounded), the resolution messages carry."""
    return int(round(seconds * 1e9))


def stamp_nanos(stamp: Time | Duration) -> int:
    """A builtin_interfaces Time or Duration as integer nanoseconds (exact comparisons)."""
    return stamp.sec * _NS + stamp.nanosec


def time_msg(seconds: float) -> Time:
    """A builtin_interfaces/Time for ``seconds`` (rounded to the nanosecond)."""
    ns = nanos(seconds)
    return Time(sec=ns // _NS, nanosec=ns % _NS)


def duration_msg_ns(ns: int) -> Duration:
    """A builtin_interfaces/Duration of ``ns`` nanoseconds."""
    return Duration(sec=ns // _NS, nanosec=ns % _NS)


def duration_msg(seconds: float) -> Duration:
    """A builtin_interfaces/Duration for ``seconds`` (rounded to the nanosecond)."""
    return duration_msg_ns(nanos(seconds))


def time_seconds(stamp: Time) -> float:
    """Seconds of a builtin_interfaces/Time."""
    return stamp.sec + stamp.nanosec * 1e-9
