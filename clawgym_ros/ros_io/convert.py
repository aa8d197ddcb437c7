"""Conversions between messages and plain Python values used by the cores."""

from __future__ import annotations

from builtin_interfaces.msg import Time


def time_msg(seconds: float) -> Time:
    """A builtin_interfaces/Time for ``seconds`` (rounded to the nanosecond)."""
    nanos = int(round(seconds * 1e9))
    return Time(sec=nanos // 1_000_000_000, nanosec=nanos % 1_000_000_000)


def time_seconds(stamp: Time) -> float:
    """Seconds of a builtin_interfaces/Time."""
    return stamp.sec + stamp.nanosec * 1e-9
