"""Pairwise human judgments: file format, validation, Bradley-Terry fit, the run's store.

File format (CSV with a header, or JSON), one judgment per row / object:

=============  ========  ===============================================================
field          required  meaning
=============  ========  ===============================================================
``item_a``     yes       what was shown first: a checkpoint id, a policy name or an
                         episode reference (any non-empty string without newlines)
``item_b``     yes       what was shown second (must differ from ``item_a``)
``preferred``  yes       ``a``, ``b`` or ``tie`` (a tie counts half a win for each)
``rater``      no        who judged (kept for audits; not used by the fit)
``context``    no        task or episode the clips came from
``reason``     no        why, one tag of :data:`REASONS` (``rhythm``, ``fault_tolerance``,
                         ``naturalness``, ``safety``); the structured feedback protocol's
                         dimensions, kept for audits and not used by the fit
=============  ========  ===============================================================

JSON: either a list of such objects or ``{"judgments": [...]}``. Unknown columns or keys are
errors, so typos never silently drop a field.

Fit: the Bradley-Terry model P(i beats j) = sigmoid(theta_i - theta_j), maximum a posteriori
with a Gaussian ridge prior (precision ``ridge``) on theta, which keeps the estimates finite
when an item wins or loses every comparison (separation) and centres them (sum theta = 0).
Newton's method on the concave log posterior; the 95% intervals come from the inverse of the
observed Fisher information plus the prior precision, projected onto centred scores (only
differences between items are identified by the judgments).

Store: ``<run>/preferences/judgments.jsonl``, append-only: every ingest rewrites the file
atomically with the new judgments appended (readers never see half a line), each line tagged
with the sha256 of its source (a file's content, or a key the caller chooses, e.g. one judged
pair of a ``clawgym judge`` session) and the UTC time it was received; ingesting the same
source again adds nothing.

A judged policy's preference score: when the evaluated policy is an item of the fit, its
judged strength is the mean model probability that it is preferred over each other judged item
(:func:`judged_preference`, 0.5 = no better than the others), and the report's preference score
is ``(1 - JUDGMENT_WEIGHT) x comfort + JUDGMENT_WEIGHT x judged`` (bounds likewise); a policy
nobody judged keeps the comfort score. Judgments may arrive after an evaluation: the report
fits the store as it was when the report was written (count and digest in the report), and the
coordinator refits the store as it is at its decision (:func:`snapshot`,
:func:`refresh_preference`), recording which judgments it used in ``decisions.jsonl``.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import datetime as dt
import fcntl
import hashlib
import io
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.artifacts.atomic import atomic_write_text
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.stats import Estimate, _r, z_value
from clawgym_ros.safe_load import parse_json, read_text

PREFERRED = ("a", "b", "tie")
#: Most distinct items a fit (and so the store) takes: the fit solves items x items systems.
MAX_ITEMS = 500
#: Most judgments a file or the run's store holds (human judgments come in thousands; 200k
#: took 17 s and 400 MB to ingest here).
MAX_JUDGMENTS = 50_000
#: Largest judgments file read (MAX_JUDGMENTS rows of ~80 bytes).
MAX_JUDGMENTS_BYTES = 4 << 20
REQUIRED = ("item_a", "item_b", "preferred")
OPTIONAL = ("rater", "context", "reason")
#: Reason tags a judgment may carry (the design's structured feedback protocol).
REASONS = ("rhythm", "fault_tolerance", "naturalness", "safety")
FIELDS = REQUIRED + OPTIONAL
#: Store-only fields of a line (not part of a judgment).
STORE_FIELDS = ("source_sha256", "received")
#: Share of the human judgments in a judged policy's preference score (the rest is comfort).
JUDGMENT_WEIGHT = 0.5


@dataclasses.dataclass(frozen=True)
class Judgment:
    """One pairwise judgment (see the module docstring for the fields)."""

    item_a: str
    item_b: str
    preferred: str
    rater: str = ""
    context: str = ""
    reason: str = ""

    @property
    def score_a(self) -> float:
        """1 when a was preferred, 0 when b was, 0.5 for a tie."""
        return {"a": 1.0, "b": 0.0, "tie": 0.5}[self.preferred]

    def to_dict(self) -> dict[str, str]:
        """The fields as a mapping (dataclasses.asdict, without its deep copy); ``reason`` only
        when given, so judgments without one are stored as before the field existed."""
        out = {"item_a": self.item_a, "item_b": self.item_b, "preferred": self.preferred,
               "rater": self.rater, "context": self.context}
        if self.reason:
            out["reason"] = self.reason
        return out


def to_judgment(row: dict[str, Any], where: str) -> Judgment:
    """Validate one judgment given as a mapping of the fields (a CSV row, a JSON object).

    Raises:
        ConfigError: an unknown field, a missing or non-string value, a line break, equal
            items, an unknown ``preferred`` or ``reason``; names ``where``.
    """
    for key in row:
        if key not in FIELDS:
            raise ConfigError(str(key), row[key], "one of the fields " + ", ".join(FIELDS), where)
    for key in REQUIRED:
        if key not in row or row[key] is None or row[key] == "":
            raise ConfigError(key, row.get(key), "a value (required field)", where)
    for key in FIELDS:
        value = row.get(key, "")
        if not isinstance(value, str):
            raise ConfigError(key, value, "a string", where)
        if "\n" in value or "\r" in value:
            raise ConfigError(key, value, "a string without line breaks", where)
    item_a, item_b = row["item_a"].strip(), row["item_b"].strip()
    if not item_a:
        raise ConfigError("item_a", row["item_a"], "a non-empty name", where)
    if not item_b or item_b == item_a:
        raise ConfigError("item_b", row["item_b"], f"a non-empty name other than {item_a!r}",
                          where)
    preferred = row["preferred"].strip().lower()
    if preferred not in PREFERRED:
        raise ConfigError("preferred", row["preferred"], "one of " + ", ".join(PREFERRED), where)
    reason = row.get("reason", "").strip().lower()
    if reason and reason not in REASONS:
        raise ConfigError("reason", row["reason"], "empty or one of " + ", ".join(REASONS), where)
    return Judgment(item_a, item_b, preferred, row.get("rater", "").strip(),
                    row.get("context", "").strip(), reason)


def parse_judgments(text: str, source: str) -> list[Judgment]:
    """Parse and validate a judgments file's text (CSV with header, or JSON).

    The format is JSON when the first non-blank character is ``[`` or ``{``, CSV otherwise.

    Raises:
        ConfigError: one line naming the file and line (CSV) or index (JSON), the field, the
            value and what is allowed.
    """
    stripped = text.lstrip()
    if not stripped:
        raise ConfigError("file", "(empty)", "a CSV file with a header or a JSON list", source)
    if stripped[0] in "[{":
        data = parse_json(text, source)
        if isinstance(data, dict):
            if set(data) != {"judgments"}:
                raise ConfigError("keys", sorted(data), "only the key 'judgments'", source)
            data = data["judgments"]
        if not isinstance(data, list) or not data:
            raise ConfigError("judgments", data if not isinstance(data, list) else "[]",
                              "a non-empty list of objects", source)
        if len(data) > MAX_JUDGMENTS:
            raise ConfigError("judgments", f"{len(data)} entries", f"at most {MAX_JUDGMENTS}",
                              source)
        out = []
        for i, row in enumerate(data):
            where = f"{source}: judgments[{i}]"
            if not isinstance(row, dict):
                raise ConfigError("judgment", row, "an object with fields " + ", ".join(FIELDS),
                                  where)
            out.append(to_judgment(row, where))
        return out
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = reader.fieldnames or []
        for col in header:
            if col not in FIELDS:
                raise ConfigError("column", col, "one of " + ", ".join(FIELDS),
                                  f"{source}: line 1")
        for col in REQUIRED:
            if col not in header:
                raise ConfigError("column", col, f"present in the header (required; header is "
                                  f"{','.join(header)})", f"{source}: line 1")
        out = []
        for row in reader:
            where = f"{source}: line {reader.line_num}"
            if None in row:
                raise ConfigError("row", ",".join(row[None]), f"at most {len(header)} fields",
                                  where)
            out.append(to_judgment({k: (v or "") for k, v in row.items()}, where))
            if len(out) > MAX_JUDGMENTS:
                raise ConfigError("rows", f"over {MAX_JUDGMENTS}", f"at most {MAX_JUDGMENTS} "
                                  "judgments", source)
    except csv.Error as err:   # a NUL, a stray quote or carriage return
        raise ConfigError("csv", f"line {reader.line_num}", f"valid CSV ({err})",
                          source) from None
    if not out:
        raise ConfigError("rows", 0, "at least one judgment after the header", source)
    return out


def load_judgments(path: str | Path) -> list[Judgment]:
    """Read and validate a judgments file (see :func:`parse_judgments`)."""
    text = read_text(path, "CSV or JSON file", MAX_JUDGMENTS_BYTES)
    return parse_judgments(text, str(path))


@dataclasses.dataclass(frozen=True)
class BradleyTerryFit:
    """Fitted preference scores (log-strengths, centred) with intervals."""

    items: tuple[str, ...]
    scores: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    comparisons: tuple[int, ...]
    wins: tuple[float, ...]
    n: int
    ridge: float
    iterations: int

    def ranking(self) -> list[str]:
        """Items from most to least preferred (ties broken by name)."""
        order = sorted(range(len(self.items)), key=lambda i: (-self.scores[i], self.items[i]))
        return [self.items[i] for i in order]

    def to_dict(self) -> dict[str, Any]:
        rank = {item: k + 1 for k, item in enumerate(self.ranking())}
        return {
            "n": self.n, "ridge": self.ridge, "model": "bradley_terry",
            "scores": [
                {"item": it, "score": _r(s), "ci": [_r(lo), _r(hi)], "comparisons": c,
                 "wins": _r(w), "rank": rank[it]}
                for it, s, lo, hi, c, w in sorted(
                    zip(self.items, self.scores, self.low, self.high, self.comparisons,
                        self.wins), key=lambda t: rank[t[0]])
            ],
        }


def fit_bradley_terry(
    judgments: Sequence[Judgment], ridge: float = 0.01, confidence: float = 0.95,
    max_iter: int = 100, tol: float = 1e-10,
) -> BradleyTerryFit:
    """MAP Bradley-Terry fit (Newton's method) with Fisher-information intervals.

    Args:
        judgments: at least one judgment.
        ridge: Gaussian prior precision on the log-strengths (> 0).

    Returns:
        Scores of the items sorted by name.

    Raises:
        ValueError: no judgments or a non-positive ridge.
        ConfigError: more than :data:`MAX_ITEMS` distinct items.
    """
    if not judgments:
        raise ValueError("no judgments to fit")
    if ridge <= 0:
        raise ValueError(f"ridge={ridge} must be > 0")
    items = tuple(sorted({j.item_a for j in judgments} | {j.item_b for j in judgments}))
    index = {it: i for i, it in enumerate(items)}
    a = np.array([index[j.item_a] for j in judgments])
    b = np.array([index[j.item_b] for j in judgments])
    y = np.array([j.score_a for j in judgments])
    m = len(items)
    if m > MAX_ITEMS:
        raise ConfigError("items", m, f"at most {MAX_ITEMS} distinct items (the fit holds an "
                          "items x items matrix)")
    theta = np.zeros(m)
    eye = np.eye(m)

    def information(p: np.ndarray) -> np.ndarray:
        # D^T diag(w) D + ridge I for D = e_a - e_b per judgment, accumulated pair by pair
        # (a dense judgments x items D took 5 GB for 100k judgments of 3000 items).
        w = p * (1 - p)
        info = ridge * eye + np.diag(np.bincount(a, w, m) + np.bincount(b, w, m))
        np.add.at(info, (a, b), -w)
        np.add.at(info, (b, a), -w)
        return info

    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported)
        p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
        grad = np.bincount(a, y - p, m) - np.bincount(b, y - p, m) - ridge * theta
        step = np.linalg.solve(information(p), grad)
        theta = theta + step
        if float(np.max(np.abs(step))) < tol:
            break
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    info = information(p)
    # Only differences of scores are identified: the covariance of the centred scores
    # (P cov P, P the centring projection) leaves out the prior-only common shift.
    centre = eye - 1.0 / m
    se = np.sqrt(np.clip(np.diag(centre @ np.linalg.inv(info) @ centre), 0.0, None))
    z = z_value(confidence)
    comparisons = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    wins = np.bincount(a, weights=y, minlength=m) + np.bincount(b, weights=1 - y, minlength=m)
    return BradleyTerryFit(
        items=items,
        scores=tuple(float(t) for t in theta),
        low=tuple(float(t - z * s) for t, s in zip(theta, se)),
        high=tuple(float(t + z * s) for t, s in zip(theta, se)),
        comparisons=tuple(int(c) for c in comparisons),
        wins=tuple(float(w) for w in wins),
        n=len(judgments), ridge=ridge, iterations=it,
    )


# --- the run's store ---------------------------------------------------------------------------

def store_path(run_dir: str | Path) -> Path:
    """``<run>/preferences/judgments.jsonl``."""
    return Path(run_dir) / C.DIR_PREFERENCES / C.FILE_JUDGMENTS


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_store(run_dir: str | Path) -> list[Judgment]:
    """All judgments ingested into a run, in ingest order (empty when none)."""
    path = store_path(run_dir)
    if not path.is_file():
        return []
    return _judgments_of(path, read_text(path, "judgments store", 1 << 30))


def _judgments_of(path: Path, text: str) -> list[Judgment]:
    out = []
    for lineno, row in _store_rows(path, text):
        row = {k: v for k, v in row.items() if k not in STORE_FIELDS}
        out.append(to_judgment(row, f"{path}: line {lineno}"))
    return out


def judgments_digest(judgments: Sequence[Judgment]) -> str:
    """sha256 of the judgments in order (their fields, not when they arrived): which
    judgments a report or a decision used."""
    text = "".join(json.dumps(j.to_dict(), sort_keys=True) + "\n" for j in judgments)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class StoreSnapshot:
    """The run's judgments at one instant (read under the store's lock).

    Attributes:
        judgments: every judgment in the store then, in arrival order (the store is
            append-only, so they are its first ``len(judgments)`` lines from then on).
        digest: :func:`judgments_digest` of them.
        cutoff: UTC time (ISO 8601) the store was read: judgments received later are not in.
    """

    judgments: tuple[Judgment, ...]
    digest: str
    cutoff: str

    def to_dict(self) -> dict[str, Any]:
        """What a decision records: count, digest, cut-off time."""
        return {"count": len(self.judgments), "digest": self.digest, "cutoff": self.cutoff}


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def snapshot(run_dir: str | Path) -> StoreSnapshot:
    """The run's judgments as they are now (an append in progress is wholly in or out).

    Raises:
        ConfigError: a damaged store (names the file and line).
    """
    path = store_path(run_dir)
    if not path.is_file():
        return StoreSnapshot((), judgments_digest(()), _utc_now())
    with _locked(path):
        cutoff = _utc_now()
        text = read_text(path, "judgments store", 1 << 30) if path.is_file() else ""
    judgments = tuple(_judgments_of(path, text))
    return StoreSnapshot(judgments, judgments_digest(judgments), cutoff)


def _store_rows(path: Path, text: str) -> list[tuple[int, dict]]:
    """(line number, object) of each line of the store.

    Raises:
        ConfigError: a line that is not a JSON object (a half-written or edited line), naming
            the store and the line.
    """
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise ConfigError("line", line, "one complete JSON object per line (the store "
                              "is damaged: remove or repair that line)",
                              f"{path}: line {lineno}")
        rows.append((lineno, row))
    return rows


def ingest(run_dir: str | Path, path: str | Path) -> tuple[int, int]:
    """Validate a judgments file and append its judgments to the run's store.

    Returns:
        (judgments added, judgments in the store now); added is 0 when a file with the same
        content was ingested before.

    Raises:
        ConfigError: the file is invalid (nothing is added).
    """
    judgments = load_judgments(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return add_judgments(run_dir, judgments, digest, str(path))


def add_judgments(run_dir: str | Path, judgments: Sequence[Judgment], source_sha256: str,
                  source: str) -> tuple[int, int]:
    """Append validated judgments to the run's store atomically, under the store's lock.

    Args:
        judgments: validated judgments (:func:`parse_judgments`, or built by a caller that
            validated them the same way).
        source_sha256: the key of their source; a source already in the store adds nothing.
        source: what to name in errors (a file, a judging session).

    Returns:
        (judgments added, judgments in the store now).

    Raises:
        ConfigError: the store would exceed :data:`MAX_JUDGMENTS` or :data:`MAX_ITEMS`, or it
            is damaged (nothing is added).
    """
    target = store_path(run_dir)
    with _locked(target):
        existing = (read_text(target, "judgments store", 1 << 30) if target.is_file()
                    else "")
        lines = [ln for ln in existing.splitlines() if ln.strip()]
        rows = _store_rows(target, existing)
        if any(row.get("source_sha256") == source_sha256 for _, row in rows):
            return 0, len(lines)
        if len(rows) + len(judgments) > MAX_JUDGMENTS:
            raise ConfigError("judgments", len(rows) + len(judgments), f"at most "
                              f"{MAX_JUDGMENTS} in the run's store with this file", source)
        items = {str(row.get(k)) for _, row in rows for k in ("item_a", "item_b")}
        items |= {it for j in judgments for it in (j.item_a, j.item_b)}
        if len(items) > MAX_ITEMS:     # refused before it enters the store
            raise ConfigError("items", len(items), f"at most {MAX_ITEMS} distinct items in "
                              "the run's store with this file", source)
        received = _utc_now()
        for j in judgments:
            lines.append(json.dumps({**j.to_dict(), "source_sha256": source_sha256,
                                     "received": received}, sort_keys=True))
        atomic_write_text(target, "\n".join(lines) + "\n")
    return len(judgments), len(lines)


def format_scores(fit: BradleyTerryFit) -> list[str]:
    """Human-readable lines: rank, item, score and interval, wins / comparisons."""
    width = max(len(it) for it in fit.items)
    lines = [f"Bradley-Terry preference scores ({fit.n} judgments, ridge {fit.ridge:g}, 95% CI)"]
    for row in fit.to_dict()["scores"]:
        lo, hi = row["ci"]
        lines.append(f"{row['rank']:>3}. {row['item']:<{width}}  {row['score']:+.3f} "
                     f"[{lo:+.3f}, {hi:+.3f}]  wins {row['wins']:g}/{row['comparisons']}")
    return lines


def win_probability(fit: BradleyTerryFit, i: str, j: str) -> float:
    """Model probability that ``i`` is preferred over ``j``."""
    si = fit.scores[fit.items.index(i)]
    sj = fit.scores[fit.items.index(j)]
    return 1.0 / (1.0 + math.exp(-(si - sj)))


# --- a judged policy's preference score ---------------------------------------------------------

def judged_preference(fit: BradleyTerryFit, item: str) -> Estimate | None:
    """How strongly the judgments prefer ``item``: the mean model probability that it is
    preferred over each other judged item, in [0, 1] (0.5: as good as the others on average).

    The interval moves ``item``'s score over its 95% interval with the others held at their
    estimates (so it reflects the uncertainty of this item's strength only). ``n`` is the
    number of judgments that involve the item.

    Returns:
        None when ``item`` was never judged (or is the only item).
    """
    if item not in fit.items or len(fit.items) < 2:
        return None
    k = fit.items.index(item)
    others = np.array([s for i, s in enumerate(fit.scores) if i != k])

    def mean_win(score: float) -> float:
        return float(np.mean(1.0 / (1.0 + np.exp(-(score - others)))))

    return Estimate(mean_win(fit.scores[k]), mean_win(fit.low[k]), mean_win(fit.high[k]),
                    fit.comparisons[k])


def judged_section(judgments: Sequence[Judgment], policy: str, comfort: dict[str, Any],
                   ridge: float, confidence: float
                   ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The judgments' part of a report's preference metrics.

    Args:
        judgments: the judgments to fit (may be empty).
        policy: the evaluated policy's item name (a full checkpoint id, ``scripted:...``);
            "" when unknown.
        comfort: the report's comfort estimate (``{"value", "ci", "n"}``).

    Returns:
        ``(fit, policy_part)``: the Bradley-Terry fit (``to_dict`` plus the judgments'
        ``digest``) or None without judgments; ``{"item", "judged", "weight", "score"}``
        (``judged`` from :func:`judged_preference`, ``score`` the combined preference score)
        or None when the policy was not judged.
    """
    if not judgments:
        return None, None
    fit = fit_bradley_terry(judgments, ridge=ridge, confidence=confidence)
    fitted = {**fit.to_dict(), "digest": judgments_digest(judgments)}
    judged = judged_preference(fit, policy) if policy else None
    if judged is None:
        return fitted, None
    w = JUDGMENT_WEIGHT

    def mix(c: float | None, j: float) -> float | None:
        return None if c is None else (1.0 - w) * c + w * j

    value, (low, high) = comfort.get("value"), comfort.get("ci", [None, None])
    if value is None:   # no motion measured: the judgments alone
        score = judged
    else:
        score = Estimate(mix(value, judged.value), mix(low, judged.low),
                         mix(high, judged.high), int(comfort.get("n", 0)))
    return fitted, {"item": policy, "judged": judged.to_dict(), "weight": w,
                    "score": score.to_dict()}


def preference_score(section: dict[str, Any]) -> dict[str, Any]:
    """The preference dimension's score from a report's ``aggregated.preference``: the
    combined score of a judged policy, else the comfort score."""
    policy = section.get("policy")
    return copy.deepcopy(policy["score"] if policy else section["comfort"])


def refresh_preference(report: dict[str, Any], judgments: Sequence[Judgment], policy: str
                       ) -> dict[str, Any]:
    """A copy of ``report`` whose preference judgments and score are refitted on
    ``judgments`` (e.g. those that arrived after the evaluation), the motion metrics kept.

    Args:
        policy: the report's policy item ("" when it is not a checkpoint of the store).
    """
    out = copy.deepcopy(report)
    metrics = report.get("config", {}).get("metrics", {})
    section = out["aggregated"][C.DIM_PREFERENCE]
    fitted, part = judged_section(judgments, policy, section["comfort"],
                                  float(metrics.get("bt_ridge", 0.01)),
                                  float(metrics.get("confidence", 0.95)))
    section["judgments"] = fitted
    section.pop("policy", None)
    if part:
        section["policy"] = part
    out["scores"][C.DIM_PREFERENCE] = preference_score(section)
    return out


def at_decision(run_dir: str | Path, report: dict[str, Any]
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report as a decision taken now sees it, and which judgments that is.

    Judgments that arrived after the report was written (its ``judgments.digest`` differs
    from the store's now) are fitted in: the report's preference judgments and score are
    refitted on every judgment in the store at this instant (:func:`refresh_preference`, the
    policy being the report's checkpoint). The record (for ``decisions.jsonl``) holds the
    store's ``count``, ``digest`` and ``cutoff`` time, how many judgments the report had
    fitted (``in_report``), whether the preference was ``refitted`` and, then, the preference
    score in the report and at the decision.

    Raises:
        ConfigError: a damaged store.
    """
    snap = snapshot(run_dir)
    section = report.get("aggregated", {}).get(C.DIM_PREFERENCE, {})
    fitted = section.get("judgments") or {}
    record: dict[str, Any] = {**snap.to_dict(), "in_report": int(fitted.get("n", 0)),
                              "refitted": False}
    seen = fitted.get("digest") if fitted else judgments_digest(())
    if seen == snap.digest or not section:
        return report, record
    policy = str(report.get("config", {}).get("checkpoint_id") or "")
    refreshed = refresh_preference(report, snap.judgments, policy)
    record.update(refitted=True, policy=policy, preference={
        "report": report["scores"][C.DIM_PREFERENCE].get("value"),
        "decision": refreshed["scores"][C.DIM_PREFERENCE].get("value")})
    return refreshed, record
