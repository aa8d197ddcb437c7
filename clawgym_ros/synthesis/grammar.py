"""Skill grammars: regular languages over skill names, compiled to a finite automaton.

A task states which skill sequences are legal with a small regular expression whose symbols are
skill names (whitespace = sequence)::

    reach grasp lift transport+ place release        # pick_place
    reach (grasp | regrasp)+ lift transport place release
    move_to* insert

Operators: ``|`` (alternative), ``*`` (zero or more), ``+`` (one or more), ``?`` (optional),
``( )`` (grouping), ``.`` (any one skill). Compiled by Thompson's construction to an NFA whose
state sets are tracked while reading a sequence, so the first illegal call can be named.
Counted repetition (``{2}``) is not supported: write the group out twice (e.g. ``stack``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from clawgym_ros.errors import ConfigError

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|([()|*+?.]))")
ANY = "."


@dataclasses.dataclass
class _Frag:
    start: int
    accept: int


class SkillGrammar:
    """A compiled skill grammar (picklable: it keeps only the pattern and transition tables).

    Args:
        pattern: the regular expression over skill names.

    Raises:
        ConfigError: field ``grammar`` naming the pattern and the syntax problem.
    """

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._eps: list[list[int]] = []
        self._edges: list[list[tuple[str, int]]] = []
        self._tokens = self._tokenize(pattern)
        self._pos = 0
        frag = self._alternation()
        if self._pos != len(self._tokens):
            self._fail(f"unexpected {self._tokens[self._pos][1]!r}")
        self._start, self._accept = frag.start, frag.accept
        self.alphabet = frozenset(t for kind, t in self._tokens if kind == "name")
        del self._tokens

    # --- parsing (recursive descent) + Thompson construction -------------------------------
    def _tokenize(self, pattern: str) -> list[tuple[str, str]]:
        tokens, pos = [], 0
        stripped = pattern.rstrip()
        while pos < len(stripped):
            match = _TOKEN.match(stripped, pos)
            if not match:
                self._fail(f"unexpected character {stripped[pos:].lstrip()[:1]!r}")
            tokens.append(("name", match.group(1)) if match.group(1) else ("op", match.group(2)))
            pos = match.end()
        if not tokens:
            self._fail("empty pattern")
        return tokens

    def _fail(self, why: str) -> None:
        raise ConfigError("grammar", self.pattern, f"a skill regular expression ({why})")

    def _state(self) -> int:
        self._eps.append([])
        self._edges.append([])
        return len(self._eps) - 1

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _alternation(self) -> _Frag:
        frags = [self._sequence()]
        while self._peek() == ("op", "|"):
            self._pos += 1
            frags.append(self._sequence())
        if len(frags) == 1:
            return frags[0]
        start, accept = self._state(), self._state()
        for frag in frags:
            self._eps[start].append(frag.start)
            self._eps[frag.accept].append(accept)
        return _Frag(start, accept)

    def _sequence(self) -> _Frag:
        frags = []
        while (tok := self._peek()) is not None and tok not in (("op", "|"), ("op", ")")):
            frags.append(self._repeat())
        if not frags:
            self._fail("empty alternative or group")
        for left, right in zip(frags, frags[1:]):
            self._eps[left.accept].append(right.start)
        return _Frag(frags[0].start, frags[-1].accept)

    def _repeat(self) -> _Frag:
        frag = self._atom()
        while (tok := self._peek()) in (("op", "*"), ("op", "+"), ("op", "?")):
            self._pos += 1
            start, accept = self._state(), self._state()
            self._eps[start].append(frag.start)
            self._eps[frag.accept].append(accept)
            if tok[1] in "*?":
                self._eps[start].append(accept)
            if tok[1] in "*+":
                self._eps[frag.accept].append(frag.start)
            frag = _Frag(start, accept)
        return frag

    def _atom(self) -> _Frag:
        tok = self._peek()
        if tok is None:
            self._fail("pattern ends early")
        self._pos += 1
        kind, text = tok
        if kind == "name" or text == ANY:
            start, accept = self._state(), self._state()
            self._edges[start].append((text, accept))
            return _Frag(start, accept)
        if text == "(":
            frag = self._alternation()
            if self._peek() != ("op", ")"):
                self._fail("missing ')'")
            self._pos += 1
            return frag
        self._fail(f"unexpected {text!r}")
        raise AssertionError("unreachable")

    # --- matching ----------------------------------------------------------------------------
    def _closure(self, states: set[int]) -> frozenset[int]:
        stack, seen = list(states), set(states)
        while stack:
            for nxt in self._eps[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    def first_illegal(self, skills: Sequence[str], *, complete: bool = True) -> int | None:
        """Where a skill sequence leaves the language.

        Args:
            skills: skill names in call order.
            complete: True = the sequence must be a whole word of the language; False = it
                only needs to be a prefix of one (an episode that stopped early).

        Returns:
            None if legal; else the index of the first skill no legal sequence continues with,
            or ``len(skills)`` when the sequence is a legal prefix that is not complete.
        """
        current = self._closure({self._start})
        for i, name in enumerate(skills):
            nxt = {dst for s in current for sym, dst in self._edges[s]
                   if sym == name or sym == ANY}
            if not nxt:
                return i
            current = self._closure(nxt)
        if complete and self._accept not in current:
            return len(skills)
        return None

    def accepts(self, skills: Sequence[str]) -> bool:
        """True if ``skills`` is a complete legal sequence."""
        return self.first_illegal(skills) is None

    def __repr__(self) -> str:
        return f"SkillGrammar({self.pattern!r})"
