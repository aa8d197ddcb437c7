"""Errors that reach users: each names what is wrong, where, and what is allowed."""

from __future__ import annotations


class ClawgymError(Exception):
    """Base class of errors shown to users as one clear line (no traceback)."""


class ConfigError(ClawgymError, ValueError):
    """A configuration value is invalid.

    Args:
        field: dotted name of the offending field (e.g. ``mixture[2].intensity``).
        value: the value that was given.
        allowed: description of the allowed values (e.g. ``"[0, 1]"``).
        source: file or component the value came from (optional).
    """

    def __init__(self, field: str, value: object, allowed: str, source: str | None = None):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}={value!r} is invalid; allowed: {allowed}")

    def __reduce__(self) -> tuple:
        # Rebuilt from its fields, so it crosses process boundaries (an evaluation worker's
        # error reaches the caller as itself, not as a broken pool).
        return type(self), (self.field, self.value, self.allowed, self.source)


class ArtifactError(ClawgymError):
    """An artifact id is unknown, malformed, ambiguous or unsafe, or an artifact is corrupt."""


class CheckpointError(ClawgymError):
    """A checkpoint is tampered with, malformed, or does not match what the caller expects."""
