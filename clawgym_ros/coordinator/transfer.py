"""The transfer-template lever: when generalization is low, widen the sampled template family
and shift synthesis toward it (pure).

A loop mixture cell whose template is a family reference ``proc:<family>`` (no width, e.g.
``{task: pick_place, template: "proc:objects", family: none}``) synthesizes templates sampled
from that family (:mod:`clawgym_ros.tasks.families`) at a width the loop steers: the width
lives in the loop state's ``ranges`` under ``<task>/proc:<family>`` as ``[0, width]`` (so a
crashed loop resumes it) and each plan's mixture names ``proc:<family>@<width>``.

The rule (:func:`steer`, closed loop only): for each family cell, the report's generalization
ratio of its task (held-out / in-distribution nominal success; pooled over tasks when the
task's own is not measured) below ``transfer.threshold`` widens the width by
``transfer.step`` (ADR over template parameters, up to ``transfer.max_width``) and multiplies
the cell's share by ``1 + transfer.gain * (threshold - ratio)`` (the shares are floored and
renormalized again). At or above the threshold, or unmeasured (no held-out template in the
suite, no in-distribution success), width and share are kept. They are also kept while the
task's in-distribution success is below ``transfer.min_in_distribution``: a ratio over one or
two in-distribution successes is too weak a reference to spend budget on breadth, and the
policy needs the core task first. The held-out templates themselves are never synthesized:
family samples keep their declared distance from them. Every change, and every keep, has its
reason in the decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.errors import ConfigError

#: Prefix of template family references (``tasks.families.PROC_PREFIX``; not imported: the
#: coordinator's config stays free of the task modules).
PROC = "proc:"
_ROUND = 6


@dataclasses.dataclass(frozen=True)
class TransferConfig:
    """The transfer-template lever of a loop (``transfer:`` in the loop YAML).

    Attributes:
        threshold: generalization ratio (held-out / in-distribution success) below which the
            lever widens the family and raises its share; 0 = off (widths stay at
            ``initial_width``).
        initial_width: width of every family cell in the first iteration (and the open loop).
        step: width added per firing.
        max_width: the width never exceeds this.
        gain: share multiplier per unit of shortfall: ``1 + gain * (threshold - ratio)``.
        min_in_distribution: the task's in-distribution success below which width and share
            are kept (a competence gate like ``adr.min_nominal``); 0 = no gate.
    """

    threshold: float = 0.0
    initial_width: float = 0.1
    step: float = 0.1
    max_width: float = 1.0
    gain: float = 2.0
    min_in_distribution: float = 0.0

    def __post_init__(self) -> None:
        check_range("transfer.threshold", self.threshold, 0.0, 2.0)
        check_range("transfer.max_width", self.max_width, 0.0, 1.0, low_open=True)
        check_range("transfer.initial_width", self.initial_width, 0.0, self.max_width)
        check_range("transfer.step", self.step, 0.0, 1.0, low_open=True)
        check_range("transfer.gain", self.gain, 0.0, 100.0)
        check_range("transfer.min_in_distribution", self.min_in_distribution, 0.0, 1.0)

    @property
    def enabled(self) -> bool:
        return self.threshold > 0


def is_family_cell(cell: Mapping[str, Any]) -> bool:
    """Whether a loop mixture cell names a template family (``proc:<family>``)."""
    return str(cell.get("template") or "").startswith(PROC)


def width_key(cell: Mapping[str, Any]) -> str:
    """Key of a family cell's width in the loop state's ranges: ``<task>/proc:<family>``."""
    return f"{cell['task']}/{cell['template']}"


def is_width_key(key: str) -> bool:
    """Whether a ranges key holds a family width (not a perturbation family's range)."""
    return "/" in key


def check_cells(mixture: Sequence[Mapping[str, Any]], transfer: TransferConfig) -> None:
    """A loop's family cells name the family only (the loop renders the width) and are
    nominal; a lever that is on needs one.

    Raises:
        ConfigError: naming ``mixture[i].template``, ``mixture[i].family`` or
            ``transfer.threshold``.
    """
    found = False
    for i, cell in enumerate(mixture):
        if not is_family_cell(cell):
            continue
        found = True
        body = cell["template"][len(PROC):]
        if not body or any(ch in body for ch in "@:=,"):
            raise ConfigError(f"mixture[{i}].template", cell["template"], "proc:<family> "
                              "(no width or parameters: the loop steers the width from "
                              "transfer.initial_width)")
        if cell["family"] != C.FAMILY_NONE:
            raise ConfigError(f"mixture[{i}].family", cell["family"], "none for a template "
                              "family cell (perturbations have their own cells)")
    if transfer.enabled and not found:
        raise ConfigError("transfer.threshold", transfer.threshold, "0 (off) unless a mixture "
                          "cell names a template family (template: proc:<family>)")


def initial_widths(cells: Sequence[Mapping[str, Any]], transfer: TransferConfig
                   ) -> dict[str, tuple[float, float]]:
    """``{width_key: (0, initial_width)}`` for the family cells (the loop state's ranges)."""
    return {width_key(c): (0.0, float(transfer.initial_width))
            for c in cells if is_family_cell(c)}


def render_template(cell: Mapping[str, Any], ranges: Mapping[str, Sequence[float]]) -> str:
    """The template a plan's mixture entry names: ``proc:<family>@<width>`` for a family
    cell, the cell's own template otherwise."""
    if not is_family_cell(cell):
        return cell["template"]
    width = float(ranges.get(width_key(cell), (0.0, 0.0))[1])
    return f"{cell['template']}@{round(width, 4):g}"


def group_template(cell: Mapping[str, Any]) -> str:
    """The template part of a cell's training-group pattern (``task/template/family``):
    ``proc:<family>:*`` matches every template sampled from a family, ``*`` any template."""
    if is_family_cell(cell):
        return f"{cell['template']}:*"
    return cell["template"] or "*"


def _task_generalization(report: Mapping[str, Any], task: str
                         ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The report's generalization block and ``task``'s entry in it (``{}`` when absent)."""
    gen = report.get("aggregated", {}).get(C.DIM_GENERALIZATION, {})
    return gen, (gen.get("tasks") or {}).get(task) or {}


def _value(entry: Mapping[str, Any], key: str) -> float | None:
    return (entry.get(key) or {}).get("value")


def in_distribution_success(report: Mapping[str, Any], task: str) -> float | None:
    """The report's in-distribution nominal success of ``task`` (None: not measured)."""
    value = _value(_task_generalization(report, task)[1], "in_distribution")
    return None if value is None else float(value)


def generalization_ratio(report: Mapping[str, Any], task: str) -> tuple[float | None, str]:
    """The report's held-out / in-distribution success ratio of ``task`` (the pooled one
    when the task's own is not measured), and where it came from."""
    gen, entry = _task_generalization(report, task)
    if entry:
        value, held, ind = (_value(entry, k) for k in ("ratio", "held_out", "in_distribution"))
        if value is not None:
            return float(value), (f"{task}: held-out {held:.3f} / in-distribution "
                                  f"{ind:.3f}")
        return None, (f"{task}: not measurable (in-distribution success "
                      f"{'n/a' if ind is None else f'{ind:.3f}'})")
    pooled = (gen.get("pooled") or {}).get("value")
    if pooled is not None:
        return float(pooled), "pooled over tasks"
    return None, "not measured (no held-out template in the suite)"


def steer(cells: Sequence[Mapping[str, Any]], report: Mapping[str, Any], transfer: Any,
          weights: Mapping[str, float], ranges: Mapping[str, Sequence[float]],
          floor: float) -> tuple[dict[str, float], dict[str, tuple], list[str], dict]:
    """Apply the rule (module docstring) to a closed-loop plan's shares and ranges.

    Args:
        cells: the loop's cells (``task, template, family, difficulty``) in config order.
        report: the last report.
        transfer: the loop's :class:`TransferConfig`.
        weights: share per cell key after the plan's other steering.
        ranges: the plan's ranges (family widths under :func:`width_key`).
        floor: the loop's mixture floor.

    Returns:
        ``(weights, ranges, reasons, record)``: the new shares and ranges, one reason per
        family cell, and the decision's ``transfer`` record (``{}`` without family cells).
    """
    from clawgym_ros.coordinator.config import cell_key
    from clawgym_ros.coordinator.plan import apply_floor

    weights, ranges = dict(weights), {k: tuple(v) for k, v in ranges.items()}
    family_cells = [c for c in cells if is_family_cell(c)]
    if not family_cells:
        return weights, ranges, [], {}
    keys = [cell_key(c) for c in cells]
    raw = [weights[k] for k in keys]
    reasons: list[str] = []
    record: dict[str, Any] = {"threshold": transfer.threshold, "cells": {}}
    for cell in family_cells:
        key, wkey = cell_key(cell), width_key(cell)
        low, width = ranges.get(wkey, (0.0, transfer.initial_width))
        ratio, source = generalization_ratio(report, cell["task"])
        ind = in_distribution_success(report, cell["task"])
        entry = {"ratio": ratio, "source": source, "width_before": width}
        if not transfer.enabled:
            action, why = "keep", "lever off (transfer.threshold 0)"
        elif ratio is None:
            action, why = "keep", f"generalization {source}"
        elif transfer.min_in_distribution > 0 and (ind is None
                                                   or ind < transfer.min_in_distribution):
            action, why = "keep", (
                f"in-distribution success {'n/a' if ind is None else f'{ind:.3f}'} < "
                f"transfer.min_in_distribution {transfer.min_in_distribution:g}: too weak a "
                "reference to steer the family")
        elif ratio >= transfer.threshold:
            action, why = "keep", (f"generalization {ratio:.3f} ({source}) >= threshold "
                                   f"{transfer.threshold:g}")
        else:
            action = "widen"
            shortfall = round(transfer.threshold - ratio, _ROUND)
            width = round(min(transfer.max_width, width + transfer.step), 4)
            raw[keys.index(key)] *= 1.0 + transfer.gain * shortfall
            why = (f"generalization {ratio:.3f} ({source}) < threshold "
                   f"{transfer.threshold:g}: width + {transfer.step:g} (max "
                   f"{transfer.max_width:g}), share x (1 + {transfer.gain:g} x {shortfall:g})")
        ranges[wkey] = (low, width)
        entry.update(action=action, width_after=width)
        record["cells"][key] = entry
        reasons.append(f"template family {key}: {action} width {entry['width_before']:g} -> "
                       f"{width:g} ({why})")
    shares = apply_floor(raw, floor)
    for key, share in zip(keys, shares):
        if key in record["cells"]:
            record["cells"][key].update(share_before=weights[key], share_after=share)
            if abs(share - weights[key]) > 1e-9:
                reasons.append(f"mixture {key}: {weights[key]:.3f} -> {share:.3f} (template "
                               "family lever)")
    return dict(zip(keys, shares)), ranges, reasons, record
