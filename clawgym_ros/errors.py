"""Errors that reach users: each names what is wrong, where, and what is allowed."""

from __future__ import annotations

#: Longest echo of a value in an error message (a 50 MB value must not make a 50 MB line).
MAX_ECHO_CHARS = 200


def shorten(value: object, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, saying how long it was.

    Long strings are cut before ``repr`` so that a huge value costs nothing to shorten.
    """
    if isinstance(value, (str, bytes)) and len(value) > limit:
        unit = "chars" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value)} {unit})"
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}... ({len(text)} chars)"
    return text


def _cut(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def one_line(text: str, limit: int = 10 * MAX_ECHO_CHARS) -> str:
    """A message as one line of at most about ``limit`` characters (newlines escaped)."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    if len(text) > limit:
        return f"{text[:limit]}... ({len(text)} chars)"
    return text


class ClawgymError(Exception):
    """Base class of errors shown to users as one clear line (no traceback)."""


class ActionError(ClawgymError, ValueError):
    """An env was given an action it cannot apply (wrong shape, NaN); the message is one line
    naming the expected shape and layout."""

    def __init__(self, message: object) -> None:
        # str(): a vector env's worker error comes back as ``type(error)(error)``
        super().__init__(one_line(str(message)))


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
        where = f"{_cut(str(source), 2 * MAX_ECHO_CHARS)}: " if source else ""
        super().__init__(f"{where}{_cut(str(field))}={shorten(value)} is invalid; allowed: "
                         f"{_cut(str(allowed), 4 * MAX_ECHO_CHARS)}")

    def __reduce__(self) -> tuple:
        # Rebuilt from its fields, so it crosses process boundaries (an evaluation worker's
        # error reaches the caller as itself, not as a broken pool).
        return type(self), (self.field, self.value, self.allowed, self.source)


class ArtifactError(ClawgymError):
    """An artifact id is unknown, malformed, ambiguous or unsafe, or an artifact is corrupt."""


class CheckpointError(ClawgymError):
    """A checkpoint is tampered with, malformed, or does not match what the caller expects."""
