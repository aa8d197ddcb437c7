"""JSON Schema of ``report.json`` (versioned) and its validation.

Bump :data:`REPORT_SCHEMA_VERSION` on any change a reader could notice, and keep readers
(coordinator, ``clawgym report``) accepting the versions they know.
"""

from __future__ import annotations

from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError

#: 2: per-episode ``failure_states`` and the top-level ``failure_frames`` (optional; version 1
#: reports stay valid).
REPORT_SCHEMA_VERSION = 2
REPORT_SCHEMA_VERSIONS = (1, 2)
REPORT_KIND = "clawgym.eval_report"

_NUM = {"type": ["number", "null"]}
_ESTIMATE = {
    "type": "object",
    "required": ["value", "ci", "n"],
    "additionalProperties": False,
    "properties": {
        "value": _NUM,
        "ci": {"type": "array", "items": _NUM, "minItems": 2, "maxItems": 2},
        "n": {"type": "integer", "minimum": 0},
    },
}
_STR_LIST = {"type": "array", "items": {"type": "string"}}

_EPISODE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["index", "seed", "perturbation_seed", "task", "template", "split", "family",
                 "families", "intensity", "perturbation", "stages", "stages_reached",
                 "failed_stage", "success", "duration_s", "skill_calls", "skill_calls_legal",
                 "violations", "goal_consistent", "metrics"],
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "seed": {"type": "integer", "minimum": 0},
        "perturbation_seed": {"type": "integer", "minimum": 0},
        "task": {"type": "string", "minLength": 1},
        "template": {"type": "string", "minLength": 1},
        "split": {"enum": list(C.SPLITS)},
        "family": {"type": "string"},
        "families": {"type": "array",
                     "items": {"enum": [f for f in C.PERTURBATION_FAMILIES
                                        if f != C.FAMILY_NONE]}},
        "intensity": {"type": "number", "minimum": 0, "maximum": 1},
        "perturbation": {"type": "object", "additionalProperties": {"type": "number"}},
        "stages": _STR_LIST,
        "stages_reached": _STR_LIST,
        "failed_stage": {"type": ["string", "null"]},
        "success": {"type": "boolean"},
        "duration_s": {"type": "number", "minimum": 0},
        "skill_calls": {"type": "integer", "minimum": 0},
        "skill_calls_legal": {"type": "integer", "minimum": 0},
        "violations": {"type": "object", "additionalProperties": {"type": "integer",
                                                                  "minimum": 0}},
        "goal_consistent": {"type": ["boolean", "null"]},
        "metrics": {"type": "object"},
        "failure_states": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "kind", "time", "stage", "reached", "seed", "task", "template",
                         "family", "intensity", "perturbation_seed", "signature", "size",
                         "sha256"],
            "properties": {"name": {"type": "string", "pattern": "^ep[0-9]{5,}_[a-z]+$"},
                           "kind": {"enum": ["stage", "stall", "end"]},
                           "size": {"type": "integer", "minimum": 1},
                           "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}},
        # disturbance cells only (EpisodeResult.recovery)
        "recovery": {"type": "object", "required": ["disturbed", "event", "delivered"],
                     "properties": {"disturbed": {"type": "boolean"},
                                    "event": {"type": "string"},
                                    "delivered": {"type": "boolean"},
                                    "step": {"type": "integer", "minimum": 0},
                                    "steps_to_recover": {"type": ["integer", "null"],
                                                         "minimum": 0}}},
    },
}

_FRAME = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "task", "stage", "name", "episode", "template", "family", "intensity",
                 "time", "failed_here", "file"],
    "properties": {"key": {"type": "string"}, "task": {"type": "string"},
                   "stage": {"type": "string"}, "name": {"type": "string"},
                   "episode": {"type": "integer", "minimum": 0},
                   "template": {"type": "string"}, "family": {"type": "string"},
                   "intensity": {"type": "number"}, "time": {"type": "number"},
                   "failed_here": {"type": "integer", "minimum": 1},
                   "file": {"type": ["string", "null"]}},
}

_GAP = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rank", "kind", "condition", "capability", "deviation", "evidence", "family",
                 "families", "intensity_min", "task", "template", "success", "reference",
                 "failure_share", "significant"],
    "properties": {
        "rank": {"type": "integer", "minimum": 1},
        "kind": {"enum": ["perturbation", "generalization"]},
        "condition": {"type": "string", "minLength": 1},
        "capability": {"type": "string", "minLength": 1},
        "deviation": {"type": "number"},
        "evidence": {"type": "string", "minLength": 1},
        "family": {"type": "string"},
        "families": _STR_LIST,
        "intensity_min": _NUM,
        "task": {"type": ["string", "null"]},
        "template": {"type": ["string", "null"]},
        "success": _ESTIMATE,
        "reference": _ESTIMATE,
        "failure_share": _NUM,
        "significant": {"type": "boolean"},
    },
}

_CELL = {
    "type": "object",
    "required": ["family", "families", "intensity", "successes", "success", "stability",
                 "failure_stages", "dominant_failure_stage", "dominant_failure_share"],
    "properties": {
        "family": {"type": "string"},
        "intensity": {"type": "number"},
        "success": _ESTIMATE,
        "stability": {"oneOf": [_ESTIMATE, {"type": "null"}]},
    },
}

_RECOVERY_ROW = {
    "type": "object",
    "required": ["task", "family", "intensity", "event", "episodes", "disturbed",
                 "recovery_rate", "regained", "steps_to_recover"],
    "properties": {"recovery_rate": _ESTIMATE, "regained": _ESTIMATE,
                   "steps_to_recover": _ESTIMATE},
}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ClawGym evaluation report",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "kind", "suite", "config", "n_episodes", "per_episode",
                 "aggregated", "scores", "gaps", "diagnosis", "history"],
    "properties": {
        "schema_version": {"enum": list(REPORT_SCHEMA_VERSIONS)},
        "failure_frames": {"type": "array", "items": _FRAME},
        "kind": {"const": REPORT_KIND},
        "suite": {"type": "object", "required": ["name", "seed", "cells", "tasks"]},
        "config": {"type": "object"},
        "n_episodes": {"type": "integer", "minimum": 0},
        "per_episode": {"type": "array", "items": _EPISODE},
        "aggregated": {
            "type": "object",
            "additionalProperties": False,
            "required": list(C.DIMENSIONS),
            "properties": {
                C.DIM_FUNCTIONAL: {
                    "type": "object",
                    "required": ["scope", "success", "funnel", "failure_stages",
                                 "skill_legality", "violations", "goal_consistency"],
                    "properties": {"success": _ESTIMATE, "skill_legality": _ESTIMATE,
                                   "goal_consistency": _ESTIMATE},
                },
                C.DIM_ROBUSTNESS: {
                    "type": "object",
                    "required": ["nominal", "cells", "families", "stability", "gps_recovery"],
                    "properties": {"nominal": _ESTIMATE, "stability": _ESTIMATE,
                                   "cells": {"type": "array", "items": _CELL},
                                   "disturbance_recovery": {"type": "array",
                                                            "items": _RECOVERY_ROW}},
                },
                C.DIM_GENERALIZATION: {
                    "type": "object",
                    "required": ["pooled", "tasks", "templates"],
                    "properties": {"pooled": _ESTIMATE},
                },
                C.DIM_PREFERENCE: {
                    "type": "object",
                    "required": ["episodes", "motion", "comfort", "recovery", "judgments"],
                    "properties": {
                        "comfort": _ESTIMATE,
                        "policy": {"type": "object",
                                   "required": ["item", "judged", "weight", "score"],
                                   "properties": {"judged": _ESTIMATE, "score": _ESTIMATE}},
                    },
                },
            },
        },
        "scores": {
            "type": "object",
            "additionalProperties": False,
            "required": list(C.DIMENSIONS),
            "properties": {d: _ESTIMATE for d in C.DIMENSIONS},
        },
        "gaps": {"type": "array", "items": _GAP},
        "diagnosis": _STR_LIST,
        "history": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["iteration", "scores"],
                "properties": {
                    "iteration": {"type": "integer", "minimum": 0},
                    "report_id": {"type": "string"},
                    "scores": {"type": "object",
                               "additionalProperties": _ESTIMATE},
                },
            },
        },
    },
}


class ReportSchemaError(ClawgymError):
    """A report does not match the report schema."""


def validate_report(report: Any, source: str = "report.json") -> None:
    """Validate a report against :data:`REPORT_SCHEMA`.

    Raises:
        ReportSchemaError: one line naming the JSON path, the problem and the schema version.
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(REPORT_SCHEMA)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        path = "/".join(str(p) for p in err.absolute_path) or "(root)"
        message = err.message if len(err.message) <= 300 else err.message[:297] + "..."
        raise ReportSchemaError(
            f"{source}: {path}: {message} (report schema v{REPORT_SCHEMA_VERSION}; "
            f"{len(errors)} error(s))")
