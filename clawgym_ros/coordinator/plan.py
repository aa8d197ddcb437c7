"""The coordinator's decision: ``next_plan(state, report, cfg) -> Plan`` (pure, deterministic).

Given the loop state and the report of the iteration that just finished, decide:

- stop or go on: every target met, or the iteration / episode / training-step budget spent;
- the next synthesis mixture: each cell's share is multiplied by ``(1 + gain * task) *
  (1 + gain * own)``: ``task`` = the task's functional shortfall (every cell of the task),
  ``own`` = the cell's own gaps (perturbation gaps for a family's cells, generalization gaps
  for a task's nominal cells); see :func:`cell_deviation`; then shares are renormalized so
  that every cell keeps at least ``mixture_floor`` (water-filling);
- the perturbation intensity range of every family (ADR): the family's stability at the upper
  end of its range (report success there, interpolated on the suite's grid, over nominal
  success) at or above ``widen_threshold`` widens the range by ``step``; below
  ``narrow_threshold`` narrows it; otherwise (or while nominal success is below
  ``adr.min_nominal``) it is kept;
- training loss weights per group (``task/template/family``, ``*`` = any template): the same
  product with ``group_weight_gain``, capped; and the frozen parameter groups;
- the training hardening share (observations of that share of each batch perturbed):
  ``hardening_share + hardening_gain * deviation`` of the worst gap under a family that
  perturbs observations (sensor noise, GPS dropout), capped at ``max_hardening_share``;
- RL fine-tuning (``rl`` lever, off by default): when functional success has plateaued below
  its target, ``rl.share`` of the iteration's episodes are spent as RL environment steps on
  the weakest task instead of demonstrations (:func:`rl_episodes`); the open loop never does;
- the seeds of the iteration's synthesis, training and evaluation (evaluation uses one seed
  for every iteration, so successive reports are paired and comparable).

Every change carries its reason (which gap, which score, which threshold) in the plan's
``decision``; the coordinator node appends it to ``loop/decisions.jsonl``.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.coordinator import transfer as T
from clawgym_ros.coordinator.config import MODE_OPEN, SEED_LIMIT, LoopConfig, cell_key

PHASE_IDLE = "idle"
PHASE_SYNTHESIZE = "synthesize"
PHASE_TRAIN = "train"
PHASE_FINETUNE = "finetune"
PHASE_EVALUATE = "evaluate"
PHASE_DONE = "done"
PHASE_FAILED = "failed"
_ROUND = 6


def derive_seed(seed: int, stream: str, iteration: int = 0) -> int:
    """A 31-bit seed for ``stream`` (synthesize, train, evaluate) of ``iteration``."""
    state = np.random.SeedSequence(int(seed), spawn_key=(zlib.crc32(stream.encode()),
                                                          int(iteration)))
    return int(state.generate_state(1, np.uint32)[0]) & SEED_LIMIT


@dataclasses.dataclass(frozen=True)
class LoopState:
    """Everything the loop needs to continue after a crash (``loop/state.json``).

    Attributes:
        config_id: artifact id of the loop config (parent of the final report).
        iteration: number of completed iterations.
        phase: phase of the current iteration (synthesize, train, evaluate), idle or done.
        cells: the mixture cells (task, template, family, difficulty) in config order.
        weights: share of each cell (``cell_key`` -> share, sums to 1).
        ranges: intensity range ``[low, high]`` per family.
        group_weights: training loss weight per group pattern of the current plan.
        frozen_groups: parameter groups frozen in the current plan.
        iterations: one record per started iteration: its plan and artifact ids.
        history: ``{"iteration", "scores", "report_id"}`` per completed iteration.
        episodes_used / steps_used: budget spent by completed steps.
        done / stop_reason / final_report_id: set when the loop stops.
    """

    config_id: str = ""
    iteration: int = 0
    phase: str = PHASE_IDLE
    cells: tuple[dict, ...] = ()
    weights: dict = dataclasses.field(default_factory=dict)
    ranges: dict = dataclasses.field(default_factory=dict)
    group_weights: dict = dataclasses.field(default_factory=dict)
    frozen_groups: tuple[str, ...] = ()
    iterations: tuple[dict, ...] = ()
    history: tuple[dict, ...] = ()
    episodes_used: int = 0
    steps_used: int = 0
    done: bool = False
    stop_reason: str = ""
    final_report_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``loop/state.json``)."""
        data = dataclasses.asdict(self)
        for key in ("cells", "frozen_groups", "iterations", "history"):
            data[key] = list(data[key])
        data["ranges"] = {f: list(r) for f, r in self.ranges.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        """Inverse of :meth:`to_dict`."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        for key in ("cells", "frozen_groups", "iterations", "history"):
            kwargs[key] = tuple(kwargs.get(key, ()))
        kwargs["ranges"] = {f: tuple(r) for f, r in dict(kwargs.get("ranges", {})).items()}
        return cls(**kwargs)

    @property
    def current(self) -> dict | None:
        """The record of the iteration in progress (None between iterations)."""
        if self.iterations and len(self.iterations) > self.iteration:
            return self.iterations[-1]
        return None


def initial_state(cfg: LoopConfig, config_id: str = "") -> LoopState:
    """The state before the first plan: the config's cells, shares (floored) and ranges."""
    cells = tuple({k: c[k] for k in ("task", "template", "family", "difficulty")}
                  for c in cfg.mixture)
    shares = apply_floor([c["weight"] for c in cfg.mixture], cfg.mixture_floor)
    if cfg.mode == MODE_OPEN:
        shares = apply_floor([1.0] * len(cells), cfg.mixture_floor)
    return LoopState(config_id=config_id, cells=cells,
                     weights={cell_key(c): s for c, s in zip(cells, shares)},
                     ranges={**{f: tuple(r) for f, r in cfg.ranges.items()},
                             **T.initial_widths(cells, cfg.transfer)})


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the next iteration does (or that the loop stops), and why.

    Attributes:
        iteration: index of the planned iteration (0-based).
        stop: True when the loop ends instead.
        stop_reason: why it stops.
        weights: share per cell key.
        ranges: intensity range per family.
        mixture: synthesis mixture entries (MixtureSpec fields, intensities from ranges).
        episodes / train_steps: amounts of the iteration.
        group_weights: loss weight per group pattern.
        frozen_groups: parameter groups to freeze.
        hardening_share: share of each training batch with perturbed observations.
        hardening_intensity: sensor-noise intensity those rows draw up to: the top of the
            sensor-noise range (ADR-moved in the closed loop), else the trainer's default.
        seeds: ``{"synthesize", "train", "evaluate"}`` (+ ``"recover"`` with recovery).
        recovery_episodes: of the iteration's episodes, how many are recovery demonstrations
            from ``recovery_report``'s failure states (``episodes`` are the ordinary ones).
        recovery_report: the report whose failure states seed them.
        rl_episodes: of the iteration's episodes, how many are spent as RL fine-tuning steps
            (that many times the mean length of the iteration's demonstrations).
        rl_task: the task RL fine-tunes on.
        decision: the record appended to decisions.jsonl (reasons and what drove them).
    """

    iteration: int
    stop: bool
    stop_reason: str
    weights: dict
    ranges: dict
    mixture: tuple[dict, ...]
    episodes: int
    train_steps: int
    group_weights: dict
    frozen_groups: tuple[str, ...]
    hardening_share: float
    hardening_intensity: float
    seeds: dict
    decision: dict
    recovery_episodes: int = 0
    recovery_report: str = ""
    rl_episodes: int = 0
    rl_task: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        data = dataclasses.asdict(self)
        data["mixture"] = list(self.mixture)
        data["frozen_groups"] = list(self.frozen_groups)
        data["ranges"] = {f: list(r) for f, r in self.ranges.items()}
        return data


def apply_floor(weights: Sequence[float], floor: float) -> list[float]:
    """Normalize ``weights`` to shares that sum to 1 with every share >= ``floor``.

    Water-filling: cells below the floor are lifted to it and the others share the rest in
    proportion to their weights, repeated until no share is below the floor.
    """
    n = len(weights)
    if n == 0:
        return []
    w = [max(float(x), 0.0) for x in weights]
    if sum(w) <= 0:
        w = [1.0] * n
    fixed: set[int] = set()
    while True:
        free = [i for i in range(n) if i not in fixed]
        mass = 1.0 - floor * len(fixed)
        total = sum(w[i] for i in free) or 1.0
        shares = [floor if i in fixed else mass * w[i] / total for i in range(n)]
        low = [i for i in free if shares[i] < floor - 1e-12]
        if not low:
            return [round(s, _ROUND) for s in shares]
        fixed.update(low)


def intensity_levels(low: float, high: float, levels: int) -> list[float]:
    """Synthesis intensities of a family: ``levels`` points evenly spaced over (low, high]."""
    if high <= low:
        points = [high]
    else:
        points = [low + (high - low) * k / levels for k in range(1, levels + 1)]
    out = []
    for p in points:
        p = round(p, 4)
        if p > 0 and p not in out:
            out.append(p)
    return out


def _interp(points: Sequence[tuple[float, float]], x: float) -> tuple[float, bool]:
    """Linear interpolation on sorted (intensity, value) points; flat beyond the last one.

    Returns:
        (value, extrapolated).
    """
    if x >= points[-1][0]:
        return points[-1][1], x > points[-1][0] + 1e-9
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            t = 0.0 if x1 == x0 else (x - x0) / (x1 - x0)
            return y0 + t * (y1 - y0), False
    return points[0][1], False


def _value(est: Any) -> float | None:
    if isinstance(est, Mapping):
        v = est.get("value")
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return None


def _gap_ref(gap: Mapping[str, Any]) -> dict[str, Any]:
    return {"condition": gap["condition"], "deviation": gap["deviation"],
            "capability": gap.get("capability"), "kind": gap.get("kind")}


def _largest_deviation(refs: Sequence[Mapping[str, Any]]) -> float:
    """The largest non-negative ``deviation`` of gap references (0 without any)."""
    return max((max(float(r["deviation"]), 0.0) for r in refs), default=0.0)


def recovery_episodes(report: Mapping[str, Any], cfg: Any) -> tuple[int, str]:
    """How many of the next iteration's episodes restart the expert from the report's
    failure states (training templates only): ``min(max_recovery_share, recovery_gain x
    shortfall)`` of ``episodes_per_iteration``, the shortfall being the functional target
    minus nominal success. Returns (count, the reason for decisions.jsonl)."""
    states = sum(len(e.get("failure_states", ())) for e in report.get("per_episode", ())
                 if e.get("split") == C.SPLIT_TRAIN)
    nominal = nominal_success(report)
    target = cfg.targets.get(C.DIM_FUNCTIONAL, 1.0)
    if not states:
        return 0, "recovery: none (the report has no failure states on training templates)"
    if nominal is None:
        return 0, "recovery: none (no nominal success measured)"
    if nominal < cfg.recovery_min_nominal:
        return 0, (f"recovery: none (nominal success {nominal:.3f} < recovery_min_nominal "
                   f"{cfg.recovery_min_nominal:g}: the policy needs the expert's own "
                   "demonstrations first)")
    shortfall = max(0.0, float(target) - nominal)
    share = round(min(cfg.max_recovery_share, cfg.recovery_gain * shortfall), _ROUND)
    count = min(int(round(share * cfg.episodes_per_iteration)),
                cfg.episodes_per_iteration - 1)
    return count, (f"recovery episodes {count} of {cfg.episodes_per_iteration} = "
                   f"min({cfg.max_recovery_share:g}, {cfg.recovery_gain:g} x shortfall "
                   f"{shortfall:.3f}) (functional target {float(target):g}, nominal success "
                   f"{nominal:.3f}; {states} failure states)")


def rl_episodes(state: LoopState, report: Mapping[str, Any], cfg: LoopConfig,
                available: int) -> tuple[int, str, str]:
    """How many of the next iteration's ``available`` episodes go to RL fine-tuning, on which
    task, and why: ``round(rl.share x episodes_per_iteration)`` (at most ``available - 1``)
    when functional success rose by at most ``rl.plateau_delta`` over the last
    ``rl.plateau_iterations`` reports and is below its target (1.0 without one); the task is
    the one with the lowest nominal success (first in the mixture on a tie).

    Returns:
        (episodes, task, the reason for decisions.jsonl); episodes 0 when the lever rests.
    """
    lever = cfg.rl
    values = [_value(h.get("scores", {}).get(C.DIM_FUNCTIONAL)) for h in state.history]
    k = lever.plateau_iterations
    if len(values) < k + 1 or any(v is None for v in values[-k - 1:]):
        return 0, "", (f"rl: none ({len(values)} report(s); a plateau needs {k + 1} with "
                       "functional success)")
    gain = values[-1] - values[-k - 1]
    target = float(cfg.targets.get(C.DIM_FUNCTIONAL, 1.0))
    if gain > lever.plateau_delta:
        return 0, "", (f"rl: none (functional rose {gain:+.3f} over the last {k} "
                       f"iteration(s) > plateau_delta {lever.plateau_delta:g})")
    if values[-1] >= target:
        return 0, "", f"rl: none (functional {values[-1]:.3f} >= target {target:g})"
    count = min(int(round(lever.share * cfg.episodes_per_iteration)), available - 1)
    if count <= 0:
        return 0, "", f"rl: none (share {lever.share:g} of {available} episodes rounds to 0)"
    successes = [(task_success(report, t), i, t) for i, t in enumerate(cfg.tasks)]
    task = min(successes, key=lambda x: (1.0 if x[0] is None else x[0], x[1]))[2]
    return count, task, (
        f"rl: {count} of {cfg.episodes_per_iteration} episodes' simulated steps go to RL "
        f"fine-tuning on {task} (functional {values[-k - 1]:.3f} -> {values[-1]:.3f}, gain "
        f"{gain:+.3f} <= plateau_delta {lever.plateau_delta:g} over {k} iteration(s); below "
        f"target {target:g}; share {lever.share:g})")


def nominal_success(report: Mapping[str, Any]) -> float | None:
    """Nominal success the report's robustness ratios are taken against (None: unmeasured)."""
    return _value(report.get("aggregated", {}).get(C.DIM_ROBUSTNESS, {}).get("nominal"))


def task_success(report: Mapping[str, Any], task: str) -> float | None:
    """Nominal success of ``task``: the last (``success``) stage of its funnel in the report,
    else the report's functional score (all tasks pooled)."""
    functional = report.get("aggregated", {}).get(C.DIM_FUNCTIONAL, {})
    funnel = (functional.get("funnel") or {}).get(task)
    if funnel:
        return _value(funnel[-1])
    return _value(report.get("scores", {}).get(C.DIM_FUNCTIONAL))


def cell_deviation(cell: Mapping[str, Any], report: Mapping[str, Any], cfg: LoopConfig
                   ) -> tuple[float, float, list[dict[str, Any]]]:
    """How far a mixture cell's condition falls short, and the gaps/scores that say so.

    Returns:
        ``(task, own, drivers)``: ``task`` = the task's functional shortfall (functional
        target - the task's nominal success, when a target is set), which counts for every
        cell of the task, perturbed ones included (a demonstration under a perturbation is a
        whole demonstration of the task: the expert completes it); ``own`` = the cell's own
        shortfall: for a perturbed cell the largest deviation of the perturbation gaps that
        involve its family, for a nominal cell the largest of its task's generalization gaps.
        The plan multiplies a share by ``(1 + gain * task) * (1 + gain * own)``: a weak task
        gets more of all its cells, and among them the failing conditions get more still (a
        family the policy does not feel, e.g. lighting for a state policy, stays level with
        nominal); in a one-task loop the task factor cancels out.
    """
    drivers: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    family = cell["family"]
    for gap in report.get("gaps", ()):
        if family != C.FAMILY_NONE:
            if gap.get("kind") == "perturbation" and family in (gap.get("families") or ()):
                own.append(_gap_ref(gap))
        elif gap.get("kind") == "generalization" and gap.get("task") == cell["task"]:
            own.append(_gap_ref(gap))
    base = 0.0
    if C.DIM_FUNCTIONAL in cfg.targets:
        value = task_success(report, cell["task"])
        if value is not None and value < cfg.targets[C.DIM_FUNCTIONAL]:
            base = round(cfg.targets[C.DIM_FUNCTIONAL] - value, _ROUND)
            drivers.append({"condition": f"functional<target:{cell['task']}",
                            "kind": "functional", "deviation": base, "capability": None})
    drivers += own
    return base, round(_largest_deviation(own), _ROUND), drivers


def hardening_deviation(report: Mapping[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    """Largest deviation of the perturbation gaps of families that act on observations
    (sensor noise, GPS dropout: what training-time hardening emulates), and those gaps."""
    gaps = [_gap_ref(g) for g in report.get("gaps", ())
            if g.get("kind") == "perturbation"
            and set(g.get("families") or ()) & set(C.OBSERVATION_FAMILIES)]
    return _largest_deviation(gaps), gaps


def family_stability(report: Mapping[str, Any], family: str, intensity: float
                     ) -> tuple[float | None, str]:
    """Success at ``intensity`` of ``family`` over nominal success, from the report's cells.

    Returns:
        (stability or None when not measurable, a note on how it was obtained).
    """
    rob = report.get("aggregated", {}).get(C.DIM_ROBUSTNESS, {})
    nominal = nominal_success(report)
    cells = [c for c in rob.get("cells", ()) if list(c.get("families", ())) == [family]]
    if not cells:
        return None, "not measured by the evaluation suite"
    if not nominal:
        return None, "nominal success is 0 (no reference)"
    points = [(0.0, nominal)] + sorted((float(c["intensity"]), _value(c["success"]) or 0.0)
                                       for c in cells)
    success, extrapolated = _interp(points, intensity)
    note = (f"success {success:.2f} at intensity {intensity:g}"
            + (" (held flat beyond the suite's grid)" if extrapolated else "")
            + f" / nominal {nominal:.2f}")
    return success / nominal, note


def _stop(state: LoopState, report: Mapping[str, Any] | None, cfg: LoopConfig
          ) -> tuple[bool, str, list[str]]:
    reasons: list[str] = []
    if report is not None and cfg.targets:
        met = []
        for dim, target in cfg.targets.items():
            value = _value(report.get("scores", {}).get(dim))
            ok = value is not None and value >= target
            met.append(ok)
            shown = "not measured" if value is None else f"{value:.3f}"
            reasons.append(f"target {dim} >= {target:g}: {shown} ({'met' if ok else 'not met'})")
        if all(met):
            if cfg.stop_at_targets:
                return True, "targets met", reasons
            reasons.append("targets met; the loop runs on (stop_at_targets: false)")
    if state.iteration >= cfg.iterations:
        return True, f"iteration budget spent ({state.iteration}/{cfg.iterations})", reasons
    if state.episodes_used + cfg.episodes_per_iteration > cfg.episode_budget:
        return True, (f"episode budget spent ({state.episodes_used} used, "
                      f"{cfg.episodes_per_iteration} more > {cfg.episode_budget})"), reasons
    if state.steps_used + cfg.train_steps > cfg.step_budget:
        return True, (f"training-step budget spent ({state.steps_used} used, "
                      f"{cfg.train_steps} more > {cfg.step_budget})"), reasons
    return False, "", reasons


def _mixture(cells: Sequence[Mapping[str, Any]], weights: Mapping[str, float],
             ranges: Mapping[str, Sequence[float]], cfg: LoopConfig) -> tuple[dict, ...]:
    entries = []
    for cell in cells:
        share = weights[cell_key(cell)]
        base = {"task": cell["task"], "template": T.render_template(cell, ranges),
                "family": cell["family"], "difficulty": cell["difficulty"]}
        if cell["family"] == C.FAMILY_NONE:
            entries.append({**base, "intensity": 0.0, "weight": share})
            continue
        low, high = ranges[cell["family"]]
        levels = intensity_levels(low, high, cfg.adr.levels)
        for x in levels:
            entries.append({**base, "intensity": x,
                            "weight": round(share / len(levels), _ROUND + 2)})
    return tuple(entries)


def _steer_mixture(state: LoopState, report: Mapping[str, Any], cfg: LoopConfig,
                   reasons: list[str], drivers: dict[str, list[dict[str, Any]]]
                   ) -> tuple[dict[str, float], dict[str, float]]:
    """The closed loop's mixture shares and loss weights per group pattern (unfiltered) from
    the cells' deviations (:func:`cell_deviation`); appends the share changes to
    ``reasons`` and each cell's gaps to ``drivers``."""
    weights = dict(state.weights)
    group_weights: dict[str, float] = {}
    keys = [cell_key(c) for c in state.cells]
    devs = [cell_deviation(cell, report, cfg) for cell in state.cells]
    # Loss weights are relative (the trainer normalizes by their sum): the task factor counts
    # relative to the least deficient task, so a shortfall every task shares does not push
    # every group against the max_group_weight cap.
    least = min(d[0] for d in devs)
    raw = []
    for cell, key, (task_dev, own_dev, used) in zip(state.cells, keys, devs):
        if used:
            drivers[key] = used
        raw.append(weights[key] * (1.0 + cfg.mixture_gain * task_dev)
                   * (1.0 + cfg.mixture_gain * own_dev))
        pattern = f"{cell['task']}/{T.group_template(cell)}/{cell['family']}"
        task_factor = ((1.0 + cfg.group_weight_gain * task_dev)
                       / (1.0 + cfg.group_weight_gain * least))
        gw = round(min(cfg.max_group_weight,
                       task_factor * (1.0 + cfg.group_weight_gain * own_dev)), _ROUND)
        group_weights[pattern] = max(group_weights.get(pattern, 1.0), gw)
    shares = apply_floor(raw, cfg.mixture_floor)
    for key, new in zip(keys, shares):
        old = weights[key]
        if abs(new - old) > 1e-9:
            why = ", ".join(f"{d['condition']} (deviation {d['deviation']:g})"
                            for d in drivers.get(key, ())) or "no gap: relative share"
            reasons.append(f"mixture {key}: {old:.3f} -> {new:.3f} ({why})")
    return dict(zip(keys, shares)), group_weights


def _adapt_ranges(report: Mapping[str, Any], ranges: dict[str, tuple], cfg: LoopConfig,
                  reasons: list[str]) -> tuple[dict[str, tuple], dict[str, dict[str, Any]]]:
    """ADR of every perturbation family's range from its stability at the range's top (see
    the module docstring); template-family widths are left to the transfer lever. Returns
    the new ranges and the per-family record; appends one reason per family."""
    ranges = dict(ranges)
    adr: dict[str, dict[str, Any]] = {}
    nominal = nominal_success(report)
    for family, (low, high) in sorted(ranges.items()):
        if T.is_width_key(family):
            continue                 # a template family's width: the transfer lever's
        stab, note = family_stability(report, family, high)
        entry = {"before": [low, high], "stability": stab, "note": note}
        if stab is None:
            action = "keep"
        elif nominal is not None and nominal < cfg.adr.min_nominal:
            action = "keep"
            note += (f"; nominal success {nominal:.2f} < adr.min_nominal "
                     f"{cfg.adr.min_nominal:g}: too weak a reference to move the range")
            entry["note"] = note
        elif stab >= cfg.adr.widen_threshold:
            action = "widen"
            high = min(1.0, round(high + cfg.adr.step, 4))
        elif stab < cfg.adr.narrow_threshold:
            action = "narrow"
            high = max(cfg.adr.min_high, round(high - cfg.adr.step, 4), low)
        else:
            action = "keep"
        ranges[family] = (low, high)
        entry.update(after=[low, high], action=action)
        adr[family] = entry
        shown = "n/a" if stab is None else f"{stab:.2f}"
        reasons.append(f"range {family}: {action} [{entry['before'][0]:g}, "
                       f"{entry['before'][1]:g}] -> [{low:g}, {high:g}] (stability {shown}: "
                       f"{note}; widen >= {cfg.adr.widen_threshold:g}, narrow < "
                       f"{cfg.adr.narrow_threshold:g})")
    return ranges, adr


def _frozen_groups(report: Mapping[str, Any], cfg: LoopConfig, reasons: list[str]
                   ) -> tuple[str, ...]:
    """``freeze_when_functional_met`` while the functional target is met and warm-starting."""
    functional = _value(report.get("scores", {}).get(C.DIM_FUNCTIONAL))
    target = cfg.targets.get(C.DIM_FUNCTIONAL)
    if (cfg.freeze_when_functional_met and cfg.warm_start and target is not None
            and functional is not None and functional >= target):
        frozen = cfg.freeze_when_functional_met
        reasons.append(f"freeze {', '.join(frozen)}: functional {functional:.3f} >= "
                       f"target {target:g} while warm-starting (keep the nominal skill)")
        return frozen
    return ()


def _hardening_share(report: Mapping[str, Any], cfg: LoopConfig, reasons: list[str],
                     drivers: dict[str, list[dict[str, Any]]]) -> float:
    """The training hardening share from the worst observation-perturbation gap."""
    dev, hard_gaps = hardening_deviation(report)
    hardening = round(min(cfg.max_hardening_share,
                          cfg.hardening_share + cfg.hardening_gain * dev), _ROUND)
    if hard_gaps:
        drivers["hardening"] = hard_gaps
    why = ", ".join(f"{g['condition']} (deviation {g['deviation']:g})"
                    for g in hard_gaps) or "no gap under an observation perturbation"
    reasons.append(f"hardening share {hardening:g} = min({cfg.max_hardening_share:g}, "
                   f"{cfg.hardening_share:g} + {cfg.hardening_gain:g} x {dev:g}) ({why})")
    return hardening


def _seeds(cfg: LoopConfig, iteration: int, recovery: int, rl: int) -> dict[str, int]:
    """The iteration's seeds (evaluation: one seed for every iteration, paired reports)."""
    seeds = {"synthesize": derive_seed(cfg.seed, PHASE_SYNTHESIZE, iteration),
             "train": derive_seed(cfg.seed, PHASE_TRAIN, iteration),
             "evaluate": derive_seed(cfg.seed, PHASE_EVALUATE, 0)}
    if recovery:
        seeds["recover"] = derive_seed(cfg.seed, "recover", iteration)
    if rl:
        seeds[PHASE_FINETUNE] = derive_seed(cfg.seed, PHASE_FINETUNE, iteration)
    return seeds


def next_plan(state: LoopState, report: Mapping[str, Any] | None, cfg: LoopConfig) -> Plan:
    """Decide the next iteration (or stop) from the latest report.

    Args:
        state: the loop state; ``state.iteration`` iterations are complete.
        report: the last completed iteration's ``report.json`` (None before the first).
        cfg: the loop config.

    Returns:
        The plan, with its decision record (reasons and the gaps that drove them).
    """
    iteration = state.iteration
    reasons: list[str] = []
    drivers: dict[str, list[dict[str, Any]]] = {}
    weights = dict(state.weights)
    ranges = {f: tuple(r) for f, r in state.ranges.items()}
    group_weights: dict[str, float] = {}
    frozen: tuple[str, ...] = ()
    adr: dict[str, dict[str, Any]] = {}
    transfer: dict[str, Any] = {}
    hardening = cfg.hardening_share
    closed = cfg.mode != MODE_OPEN
    stop, stop_reason, target_reasons = _stop(state, report, cfg)
    reasons += target_reasons

    if report is None:
        reasons.append("first iteration: mixture shares and ranges from the config"
                       + (" (open loop: uniform shares)" if not closed else ""))
    elif not closed:
        reasons.append("open loop: mixture, ranges and loss weights stay fixed")
    else:
        weights, group_weights = _steer_mixture(state, report, cfg, reasons, drivers)
        ranges, adr = _adapt_ranges(report, ranges, cfg, reasons)
        weights, ranges, why, transfer = T.steer(state.cells, report, cfg.transfer, weights,
                                                 ranges, cfg.mixture_floor)
        reasons += why
        group_weights = {k: v for k, v in sorted(group_weights.items()) if v != 1.0}
        for pattern, value in group_weights.items():
            reasons.append(f"loss weight {pattern}: {value:g}")
        frozen = _frozen_groups(report, cfg, reasons)
        if cfg.hardening_gain > 0:
            hardening = _hardening_share(report, cfg, reasons, drivers)

    recovery, recovery_report = 0, ""
    if closed and report is not None and cfg.recovery_gain > 0:
        recovery, why = recovery_episodes(report, cfg)
        reasons.append(why)
        if recovery:
            recovery_report = state.history[-1]["report_id"]
    rl, rl_task = 0, ""
    if closed and report is not None and cfg.rl.enabled and not stop:
        rl, rl_task, why = rl_episodes(state, report, cfg,
                                       cfg.episodes_per_iteration - recovery)
        reasons.append(why)
    seeds = _seeds(cfg, iteration, recovery, rl)
    mixture = _mixture(state.cells, weights, ranges, cfg)
    intensity = float(ranges[C.FAMILY_SENSOR_NOISE][1]) if C.FAMILY_SENSOR_NOISE in ranges \
        else C.DEFAULT_HARDENING_INTENSITY
    gaps = [_gap_ref(g) for g in (report or {}).get("gaps", ())]
    decision = {
        "iteration": iteration, "mode": cfg.mode, "stop": stop, "stop_reason": stop_reason,
        "based_on": {"iterations_completed": state.iteration,
                     "report_id": state.history[-1]["report_id"] if state.history else None,
                     "scores": {d: _value(s) for d, s in (report or {}).get("scores",
                                                                           {}).items()}},
        "reasons": reasons, "gaps": gaps, "drivers": drivers, "adr": adr,
        "weights": weights, "ranges": {f: list(r) for f, r in ranges.items()},
        "group_weights": group_weights, "frozen_groups": list(frozen),
        "hardening_share": hardening, "hardening_intensity": intensity,
        **({"recovery_episodes": recovery, "recovery_report": recovery_report}
           if recovery else {}),
        **({"rl_episodes": rl, "rl_task": rl_task} if rl else {}),
        **({"transfer": transfer} if transfer else {}),
    }
    return Plan(iteration=iteration, stop=stop, stop_reason=stop_reason, weights=weights,
                ranges=ranges, mixture=mixture,
                episodes=cfg.episodes_per_iteration - recovery - rl,
                recovery_episodes=recovery, recovery_report=recovery_report,
                rl_episodes=rl, rl_task=rl_task,
                train_steps=cfg.train_steps, group_weights=group_weights,
                frozen_groups=frozen, hardening_share=hardening,
                hardening_intensity=intensity, seeds=seeds,
                decision=decision)
