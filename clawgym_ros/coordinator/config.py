"""The closed loop's config: what to synthesize, train and evaluate, and how to steer (pure).

YAML form (``config/loop/<name>.yaml``; a mapping with one key ``loop``)::

    loop:
      name: pick_place
      seed: 0
      iterations: 3                  # iterations at most (budget)
      episodes_per_iteration: 40     # synthesized episodes per iteration
      train_steps: 400               # training steps per iteration
      eval_suite: loop_pick_place.yaml   # suite name (config/suites/) or a path (relative
                                         # paths are resolved against this file's folder)
      mixture:                       # initial cells; family cells get their intensities from
        - {task: pick_place, family: none, weight: 2}          # the family's range below
        - {task: pick_place, family: lighting, weight: 1}
      ranges: {lighting: [0.0, 0.4]} # initial ADR intensity range [low, high] per family
      targets: {functional: 0.9, robustness: 0.85}   # stop when every target is met
      stop_at_targets: true          # false: the targets still steer, the loop runs on
      budget: {episodes: 0, train_steps: 0}          # 0 = iterations x per-iteration amount
      mixture_floor: 0.05            # every cell keeps at least this share
      adr: {widen_threshold: 0.8, narrow_threshold: 0.5, step: 0.1, min_high: 0.1, levels: 2}
      policy: mlp                    # mlp, cnn or a registered type (docs/extending.md)
      policy_options: {}             # that type's options, e.g. {relative_base: command}
      rl: {share: 0.3, plateau_iterations: 1, plateau_delta: 0.02, workers: 1,
           options: {}}              # RL fine-tuning when success plateaus (0 share = off)
      transfer: {threshold: 0.8, initial_width: 0.1, step: 0.1, max_width: 1.0, gain: 2.0,
                 min_in_distribution: 0.5}
                                     # template-family cells (template: proc:<family>) widen
                                     # when held-out/in-distribution < threshold (0 = off)
                                     # and in-distribution success >= min_in_distribution
      synthesis_options: {timing: optimal, acceleration_scale: 2.0}
                                     # expert options of every synthesized episode (as
                                     # clawgym synth --option); {} = the experts' defaults
      calibration: 3f2a...           # a calibration artifact the simulators run at
      distill: {logs: robot_logs/, params: [damping_scale, joint_friction], starts: 3}
                                     # online distillation: a new robot log in that folder
                                     # (relative to this file) recalibrates between iterations

Every error names the file, the field path, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import (
    check_choice,
    check_int,
    check_option_names,
    check_range,
    from_dict,
    load_yaml,
)
from clawgym_ros.coordinator.transfer import TransferConfig
from clawgym_ros.coordinator.transfer import check_cells as check_transfer_cells
from clawgym_ros.errors import ConfigError
from clawgym_ros.training.config import MAX_STEPS
from clawgym_ros.training.registry import check_policy_name, check_policy_options

#: Loop modes: ``closed`` steers from each report; ``open`` keeps the initial mixture with
#: uniform weights and fixed ranges (the ablation's baseline at equal budget).
MODE_CLOSED = "closed"
MODE_OPEN = "open"
MODES = (MODE_CLOSED, MODE_OPEN)
SEED_LIMIT = 2**31 - 1
#: Most episodes synthesized per iteration (as `clawgym synth --episodes`).
MAX_EPISODES = 10_000_000


@dataclasses.dataclass(frozen=True)
class AdrConfig:
    """Automatic domain randomization of each family's synthesis intensity range.

    Attributes:
        widen_threshold: stability (success at the range's upper end / nominal success) at or
            above which the range is widened by ``step``.
        narrow_threshold: stability below which the range is narrowed by ``step``.
        step: change of the upper end per decision.
        min_high: the upper end never goes below this.
        levels: synthesis intensities per family, evenly spaced over (low, high].
        min_nominal: nominal success below which every range is kept: a policy that rarely
            succeeds unperturbed gives no usable stability (at 1 success in 6 nominal
            episodes, one lucky perturbed episode reads as stability 1.0 and widened a range).
    """

    widen_threshold: float = 0.8
    narrow_threshold: float = 0.5
    step: float = 0.1
    min_high: float = 0.1
    levels: int = 2
    min_nominal: float = 0.0

    def __post_init__(self) -> None:
        check_range("adr.widen_threshold", self.widen_threshold, 0.0, 2.0)
        check_range("adr.narrow_threshold", self.narrow_threshold, 0.0, self.widen_threshold)
        check_range("adr.step", self.step, 0.0, 1.0, low_open=True)
        check_range("adr.min_high", self.min_high, 0.0, 1.0, low_open=True)
        check_int("adr.levels", self.levels, 1, 10)
        check_range("adr.min_nominal", self.min_nominal, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    """Totals the loop may spend; 0 = iterations x the per-iteration amount."""

    episodes: int = 0
    train_steps: int = 0

    def __post_init__(self) -> None:
        check_int("budget.episodes", self.episodes, 0)
        check_int("budget.train_steps", self.train_steps, 0)


@dataclasses.dataclass(frozen=True)
class RlLeverConfig:
    """RL fine-tuning as a lever of the closed loop.

    When functional success has plateaued (it rose by at most ``plateau_delta`` over the last
    ``plateau_iterations`` reports) and is below its target, ``share`` of the next iteration's
    episodes are not synthesized: their simulated steps (that many episodes times the mean
    length of the iteration's demonstrations) go to residual RL fine-tuning of the iteration's
    behaviour-cloning checkpoint (:mod:`clawgym_ros.training.rl`) on the weakest task, and the
    fine-tuned checkpoint is evaluated. The open loop never does: it synthesizes every episode
    (equal simulated steps).

    Attributes:
        share: share of the iteration's episodes given to RL when the lever fires; 0 = off.
        plateau_iterations: reports compared (the last one and this many before it).
        plateau_delta: functional gain over them at or below which success has plateaued.
        workers: RL environment worker processes.
        options: :class:`~clawgym_ros.training.rl.FinetuneConfig` settings (as
            ``clawgym train --finetune rl --rl-option NAME=VALUE``).
    """

    share: float = 0.0
    plateau_iterations: int = 1
    plateau_delta: float = 0.02
    workers: int = 1
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_range("rl.share", self.share, 0.0, 0.9)
        check_int("rl.plateau_iterations", self.plateau_iterations, 1, 100)
        check_range("rl.plateau_delta", self.plateau_delta, 0.0, 1.0)
        check_int("rl.workers", self.workers, 1, 64)
        if not isinstance(self.options, Mapping):
            raise ConfigError("rl.options", self.options, "a mapping of fine-tuning settings")
        if self.options:
            from clawgym_ros.training.rl import FinetuneConfig

            check_option_names(self.options, FinetuneConfig.option_names(), "rl.options.")
            try:   # the settings' own checks (ConfigError names the field)
                FinetuneConfig(base_checkpoint="-", steps=1, seed=0, **self.options)
            except ConfigError as err:
                raise ConfigError(f"rl.options.{err.field}", err.value, err.allowed) from None
        object.__setattr__(self, "options", dict(sorted(self.options.items())))

    @property
    def enabled(self) -> bool:
        return self.share > 0


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """Online distillation: robot logs that arrive in a watched folder recalibrate the
    simulator between iterations.

    Before each iteration the coordinator lists ``logs`` (``.mcap`` files and rosbag2
    folders); when there are logs it has not seen, it fits the newest one (the same job as
    ``clawgym calibrate --bag``, through calibration_node in a ROS loop, seeded by the loop
    seed) and the iteration's synthesis, RL fine-tuning and evaluation run at the new
    calibration. The decision (the log and its sha256, the previous and new calibration, each
    parameter's shift) goes to decisions.jsonl; a log that cannot be read is recorded as
    refused and the calibration stays.

    Attributes:
        logs: the watched folder ("" = off); relative paths against the config file's folder.
        params: parameters to fit (``clawgym calibrate --params`` names); empty = all.
        bounds: ``{name: [low, high]}`` replacing default bounds.
        starts: optimizer starts per fit.
    """

    logs: str = ""
    params: tuple[str, ...] = ()
    bounds: dict = dataclasses.field(default_factory=dict)
    starts: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.logs, str):
            raise ConfigError("distill.logs", self.logs, "a folder of robot logs")
        if isinstance(self.params, str) or not all(isinstance(p, str) for p in self.params):
            raise ConfigError("distill.params", self.params, "a list of parameter names")
        object.__setattr__(self, "params", tuple(self.params))
        self.request("-")                  # names, bounds and starts checked

    def request(self, bag: str, seed: int = 0):
        """The :class:`~clawgym_ros.calibration.job.CalibrateRequest` of one log (errors name
        ``distill.<field>``)."""
        from clawgym_ros.calibration.job import MAX_STARTS, CalibrateRequest

        check_int("distill.starts", self.starts, 1, MAX_STARTS)
        if not isinstance(self.bounds, Mapping):
            raise ConfigError("distill.bounds", self.bounds, "a mapping name: [low, high]")
        request = CalibrateRequest(bag=bag, params=self.params, bounds=dict(self.bounds),
                                   seed=seed, starts=self.starts)
        try:
            request.fit_config()
        except ConfigError as err:
            field = "distill.params" if err.field == "--params" else f"distill.{err.field}"
            raise ConfigError(field, err.value, err.allowed) from None
        return request

    @property
    def enabled(self) -> bool:
        return bool(self.logs)


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """One closed-loop run (see the module docstring for the YAML form).

    Attributes:
        name: a label for status lines and reports.
        seed: the loop seed; every synthesis, training and evaluation seed derives from it.
        iterations: maximum iterations.
        episodes_per_iteration: synthesized episodes per iteration.
        train_steps: training steps per iteration.
        eval_suite: evaluation suite name or path (absolute after loading from a file).
        mixture: initial cells: ``{task, template, family, difficulty, weight}``.
        ranges: initial intensity range ``[low, high]`` per perturbing family.
        targets: score per dimension that stops the loop when all are met (and steers it:
            functional shortfall, recovery share, freezing).
        stop_at_targets: stop when every target is met (default). ``false`` keeps the
            targets' steering but spends every iteration, so that both arms of an ablation
            train on exactly the budget (a loop report has few episodes per cell: targets met
            on one can be luck).
        budget: total episodes / training steps.
        mode: ``closed`` (steer) or ``open`` (uniform fixed mixture: ablation baseline).
        mixture_floor: minimum share of every cell.
        mixture_gain: weight multiplier per unit of deviation: ``w *= 1 + gain * deviation``.
        group_weight_gain: training loss weight of a group = ``1 + gain * deviation``.
        max_group_weight: cap of a training loss weight.
        freeze_when_functional_met: parameter groups frozen while the functional target is
            met and the policy is warm-started (keeps the nominal skill while adapting).
        warm_start: train each iteration from the previous checkpoint.
        accumulate: train on every dataset synthesized so far (else on the newest only).
        policy: policy type: ``mlp``, ``cnn`` or one registered by a plugin
            (:mod:`clawgym_ros.training.registry`).
        policy_options: the policy type's options (its ``Options`` class; ``mlp``:
            ``relative_base``, ``cnn`` also its image augmentation), sent with every Train
            goal. Checked when the config is built: a plugin type, or any options, loads the
            type (torch).
        hardening_share: share of each batch with perturbed observations (the open loop's
            fixed share; the closed loop's share before any gap).
        hardening_gain: closed loop: hardening share added per unit of deviation of the worst
            gap under an observation perturbation (sensor noise, GPS dropout); 0 = fixed.
        max_hardening_share: cap of the closed loop's hardening share.
        recovery_gain: closed loop: share of each iteration's episodes synthesized as recovery
            demonstrations from the last report's failure states, per unit of functional
            shortfall (target minus nominal success); 0 = off. The open loop never does.
        max_recovery_share: cap of that share.
        recovery_min_nominal: nominal success below which no recovery episode is synthesized
            (a competence gate like ``adr.min_nominal``: a policy that rarely succeeds needs
            the expert's own demonstrations first, and recovery from its early failure states
            is often refused by the sign-off); 0 = no gate.
        rl: RL fine-tuning lever (:class:`RlLeverConfig`; off by default).
        eval_mode: ``in_process`` or ``ros``.
        workers: synthesis / rollout worker processes (0 = one per core).
        record_images: ask synthesis for camera frames.
        adr: range adaptation settings.
        calibration: id of a calibration artifact in the run directory that the loop's
            simulators run at (synthesis, RL fine-tuning, evaluation; ``clawgym loop``
            activates it before starting the nodes); it joins their artifacts' ids. "" = the
            nominal simulator.
        transfer: the transfer-template lever (:mod:`clawgym_ros.coordinator.transfer`).
        distill: online distillation from new robot logs (:class:`DistillConfig`; off by
            default).
        synthesis_options: expert options of every synthesized episode (``timing``,
            ``acceleration_scale``, ``velocity_scale``, ``planning``; as ``clawgym synth
            --option``); part of the datasets' ids. Recovery synthesis uses them too.
    """

    name: str = "loop"
    seed: int = 0
    iterations: int = 3
    episodes_per_iteration: int = 40
    train_steps: int = 400
    eval_suite: str = "smoke"
    mixture: tuple[dict, ...] = ()
    ranges: dict = dataclasses.field(default_factory=dict)
    targets: dict = dataclasses.field(default_factory=dict)
    stop_at_targets: bool = True
    budget: BudgetConfig = dataclasses.field(default_factory=BudgetConfig)
    mode: str = MODE_CLOSED
    mixture_floor: float = 0.05
    mixture_gain: float = 2.0
    group_weight_gain: float = 2.0
    max_group_weight: float = 4.0
    freeze_when_functional_met: tuple[str, ...] = ()
    warm_start: bool = True
    accumulate: bool = True
    policy: str = C.POLICY_MLP
    policy_options: dict = dataclasses.field(default_factory=dict)
    hardening_share: float = 0.0
    hardening_gain: float = 0.0
    max_hardening_share: float = 0.5
    recovery_gain: float = 0.0
    max_recovery_share: float = 0.5
    recovery_min_nominal: float = 0.0
    rl: RlLeverConfig = dataclasses.field(default_factory=RlLeverConfig)
    eval_mode: str = C.EVAL_MODES[0]
    workers: int = 0
    record_images: bool = False
    adr: AdrConfig = dataclasses.field(default_factory=AdrConfig)
    calibration: str = ""
    transfer: TransferConfig = dataclasses.field(default_factory=TransferConfig)
    distill: DistillConfig = dataclasses.field(default_factory=DistillConfig)
    synthesis_options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.calibration, str):
            raise ConfigError("calibration", self.calibration, "a calibration artifact id")
        from clawgym_ros.tasks.expert import check_expert_options

        object.__setattr__(self, "synthesis_options",
                           check_expert_options(self.synthesis_options, "synthesis_options."))
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", self.name, "a non-empty string")
        check_int("seed", self.seed, 0, SEED_LIMIT)
        check_int("iterations", self.iterations, 1, 1000)
        check_int("episodes_per_iteration", self.episodes_per_iteration, 1, MAX_EPISODES)
        check_int("train_steps", self.train_steps, 1, MAX_STEPS)
        if not isinstance(self.eval_suite, str) or not self.eval_suite:
            raise ConfigError("eval_suite", self.eval_suite, "a suite name or path")
        check_choice("mode", self.mode, MODES)
        check_range("mixture_gain", self.mixture_gain, 0.0, 100.0)
        check_range("group_weight_gain", self.group_weight_gain, 0.0, 100.0)
        check_range("max_group_weight", self.max_group_weight, 1.0, 1000.0)
        check_policy_name(self.policy)
        for name in ("warm_start", "accumulate", "record_images", "stop_at_targets"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "true or false")
        from clawgym_ros.coordinator.visual import check_record_images

        check_record_images(self.policy, self.record_images)   # before any synthesis runs
        object.__setattr__(self, "policy_options",
                           check_policy_options(self.policy, self.policy_options))
        check_range("hardening_share", self.hardening_share, 0.0, 1.0)
        check_range("hardening_gain", self.hardening_gain, 0.0, 100.0)
        check_range("max_hardening_share", self.max_hardening_share, self.hardening_share, 1.0)
        check_range("recovery_gain", self.recovery_gain, 0.0, 100.0)
        check_range("max_recovery_share", self.max_recovery_share, 0.0, 0.9)
        check_range("recovery_min_nominal", self.recovery_min_nominal, 0.0, 1.0)
        check_choice("eval_mode", self.eval_mode, C.EVAL_MODES)
        check_int("workers", self.workers, 0, 256)
        for obj, cls in (("budget", BudgetConfig), ("adr", AdrConfig), ("rl", RlLeverConfig),
                         ("transfer", TransferConfig)):
            value = getattr(self, obj)
            if isinstance(value, Mapping):
                object.__setattr__(self, obj, from_dict(cls, value))
            elif not isinstance(value, cls):
                raise ConfigError(obj, value, f"a mapping of {cls.__name__} fields")
        self._check_rl_base()
        self._check_mixture()
        check_transfer_cells(self.mixture, self.transfer)
        self._check_ranges()
        self._check_targets()
        if not isinstance(self.freeze_when_functional_met, (list, tuple)):
            raise ConfigError("freeze_when_functional_met", self.freeze_when_functional_met,
                              "a list of parameter groups")
        groups = tuple(self.freeze_when_functional_met)
        for i, group in enumerate(groups):
            check_choice(f"freeze_when_functional_met[{i}]", group,
                         (C.PARAM_GROUP_ENCODER, C.PARAM_GROUP_TRUNK, C.PARAM_GROUP_HEAD))
        object.__setattr__(self, "freeze_when_functional_met", groups)

    def _check_rl_base(self) -> None:
        """The RL lever's mode must fit the loop's policy (training.rl refuses the others):
        direct mode (the default) takes over an ``mlp`` network only, residual mode cannot
        fine-tune a command-relative policy. Said when the config is read, not at the
        iteration the lever first fires."""
        from clawgym_ros.training.options import RELATIVE_BASE_COMMAND
        from clawgym_ros.training.registry import policy_class
        from clawgym_ros.training.rl import DEFAULT_MODE, MODE_DIRECT, MODE_RESIDUAL

        if not self.rl.enabled:
            return
        if policy_class(self.policy).uses_image:
            raise ConfigError("rl.share", self.rl.share, f"0 for a {self.policy} policy (RL "
                              "fine-tuning takes policies that read the state, no images)")
        mode = self.rl.options.get("mode", DEFAULT_MODE)
        if mode == MODE_DIRECT and self.policy != C.POLICY_MLP:
            raise ConfigError("rl.options.mode", mode, f"{MODE_RESIDUAL} for a {self.policy} "
                              f"policy (direct mode fine-tunes an {C.POLICY_MLP} network only)")
        if mode != MODE_DIRECT and \
                self.policy_options.get("relative_base") == RELATIVE_BASE_COMMAND:
            raise ConfigError("rl.options.mode", mode, f"{MODE_DIRECT} for a policy with "
                              "policy_options relative_base: command (residual RL rebases on "
                              "the observation)")

    def _check_mixture(self) -> None:
        if not isinstance(self.mixture, (list, tuple)) or not self.mixture:
            raise ConfigError("mixture", self.mixture, "a non-empty list of cells")
        cells = []
        seen = set()
        for i, raw in enumerate(self.mixture):
            if not isinstance(raw, Mapping):
                raise ConfigError(f"mixture[{i}]", raw, "a mapping {task, template, family, "
                                  "difficulty, weight}")
            extra = sorted(set(raw) - {"task", "template", "family", "difficulty", "weight"})
            if extra:
                raise ConfigError(f"mixture[{i}].{extra[0]}", raw[extra[0]], "one of task, "
                                  "template, family, difficulty, weight (intensities come from "
                                  "ranges)")
            cell = {"task": check_choice(f"mixture[{i}].task", raw.get("task"), C.TASKS),
                    "template": raw.get("template", "") or "",
                    "family": check_choice(f"mixture[{i}].family",
                                           raw.get("family", C.FAMILY_NONE),
                                           C.PERTURBATION_FAMILIES),
                    "difficulty": check_choice(f"mixture[{i}].difficulty",
                                               raw.get("difficulty", C.DEFAULT_DIFFICULTY),
                                               C.DIFFICULTIES),
                    "weight": float(check_range(f"mixture[{i}].weight", raw.get("weight", 1.0),
                                                0.0, None, low_open=True))}
            if not isinstance(cell["template"], str):
                raise ConfigError(f"mixture[{i}].template", cell["template"], "a string")
            key = cell_key(cell)
            if key in seen:
                raise ConfigError(f"mixture[{i}]", key, "a cell not listed before")
            seen.add(key)
            cells.append(cell)
        check_range("mixture_floor", self.mixture_floor, 0.0, 1.0)
        if self.mixture_floor * len(cells) > 1.0 + 1e-12:
            raise ConfigError("mixture_floor", self.mixture_floor,
                              f"at most 1/{len(cells)} (one share per cell must fit)")
        object.__setattr__(self, "mixture", tuple(cells))

    def _check_ranges(self) -> None:
        if not isinstance(self.ranges, Mapping):
            raise ConfigError("ranges", self.ranges, "a mapping family: [low, high]")
        ranges = {}
        for family, pair in self.ranges.items():
            check_choice(f"ranges.{family}", family, C.PERTURBATION_FAMILIES[1:])
            if (not isinstance(pair, (list, tuple)) or len(pair) != 2):
                raise ConfigError(f"ranges.{family}", pair, "[low, high] in [0, 1]")
            low = check_range(f"ranges.{family}[0]", pair[0], 0.0, 1.0)
            high = check_range(f"ranges.{family}[1]", pair[1], max(low, 0.0), 1.0,
                               low_open=True)
            ranges[family] = (float(low), float(high))
        for i, cell in enumerate(self.mixture):
            family = cell["family"]
            if family != C.FAMILY_NONE and family not in ranges:
                raise ConfigError(f"mixture[{i}].family", family,
                                  f"a family with a range (add ranges.{family}: [low, high])")
        object.__setattr__(self, "ranges", dict(sorted(ranges.items())))

    def _check_targets(self) -> None:
        if not isinstance(self.targets, Mapping):
            raise ConfigError("targets", self.targets, "a mapping dimension: score")
        for dim, value in self.targets.items():
            check_choice(f"targets.{dim}", dim, C.DIMENSIONS)
            check_range(f"targets.{dim}", value, 0.0, 2.0)
        object.__setattr__(self, "targets", {d: float(self.targets[d]) for d in C.DIMENSIONS
                                             if d in self.targets})

    @property
    def tasks(self) -> list[str]:
        """Distinct tasks of the mixture, in first-appearance order."""
        return list(dict.fromkeys(c["task"] for c in self.mixture))

    @property
    def episode_budget(self) -> int:
        """Total synthesized episodes the loop may spend."""
        return self.budget.episodes or self.iterations * self.episodes_per_iteration

    @property
    def step_budget(self) -> int:
        """Total training steps the loop may spend."""
        return self.budget.train_steps or self.iterations * self.train_steps

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what :func:`loop_config_from_dict` reads back); ``policy_options``,
        ``rl``, ``calibration``, ``transfer`` (and its ``min_in_distribution``), ``distill``,
        ``synthesis_options``, ``stop_at_targets`` and ``recovery_min_nominal`` only when set
        (a loop without them has the config artifact id it had before they existed, so its
        run directory still resumes)."""
        from clawgym_ros.config import to_dict

        data = to_dict(self)
        data["ranges"] = {f: list(r) for f, r in self.ranges.items()}
        if not data["policy_options"]:
            del data["policy_options"]
        if data["rl"] == to_dict(RlLeverConfig()):
            del data["rl"]
        if not data["calibration"]:
            del data["calibration"]
        if data["transfer"] == to_dict(TransferConfig()):
            del data["transfer"]
        elif not data["transfer"]["min_in_distribution"]:
            del data["transfer"]["min_in_distribution"]
        if data["distill"] == to_dict(DistillConfig()):
            del data["distill"]
        if not data["synthesis_options"]:
            del data["synthesis_options"]
        if data["stop_at_targets"]:
            del data["stop_at_targets"]
        if not data["recovery_min_nominal"]:
            del data["recovery_min_nominal"]
        return data


def cell_key(cell: Mapping[str, Any]) -> str:
    """Stable key of a mixture cell: ``task/template/family/difficulty`` (``*`` = any)."""
    return "/".join((cell["task"], cell.get("template") or "*", cell["family"],
                     cell.get("difficulty") or C.DEFAULT_DIFFICULTY))


def loop_config_from_dict(data: Mapping[str, Any], source: str | None = None,
                          base_dir: Path | None = None) -> LoopConfig:
    """Build a :class:`LoopConfig` from a mapping (the ``loop`` block of a YAML file).

    Args:
        data: the fields.
        source: file name for error messages.
        base_dir: folder against which a relative ``eval_suite`` path (one ending in
            ``.yaml``/``.yml`` or containing ``/``) is resolved.

    Raises:
        ConfigError: naming the file, field, value and what is allowed.
    """
    data = dict(data)
    suite = data.get("eval_suite")
    if (base_dir is not None and isinstance(suite, str)
            and (suite.endswith((".yaml", ".yml")) or "/" in suite)
            and not Path(suite).is_absolute()):
        data["eval_suite"] = str((base_dir / suite).resolve())
    distill = data.get("distill")
    if (base_dir is not None and isinstance(distill, Mapping)
            and isinstance(distill.get("logs"), str) and distill["logs"]
            and not Path(distill["logs"]).is_absolute()):
        data["distill"] = {**distill, "logs": str((base_dir / distill["logs"]).resolve())}
    return from_dict(LoopConfig, data, source=source)


def load_loop_config(path: str | Path, **overrides: Any) -> LoopConfig:
    """Read ``config/loop/<name>.yaml``; ``overrides`` (e.g. ``iterations=5``) win if not None.

    Raises:
        ConfigError: unreadable file, wrong layout or invalid fields.
    """
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, Mapping) or set(data) != {"loop"}:
        raise ConfigError("loop", data if not isinstance(data, Mapping) else sorted(data),
                          "a mapping with the single key 'loop'", str(path))
    if not isinstance(data["loop"] or {}, Mapping):
        raise ConfigError("loop", data["loop"], "a mapping of loop fields", str(path))
    fields = dict(data["loop"] or {})
    fields.update({k: v for k, v in overrides.items() if v is not None})
    cfg = loop_config_from_dict(fields, str(path), path.resolve().parent)
    check_loop_inputs(cfg, str(path))
    return cfg


def check_loop_inputs(cfg: LoopConfig, source: str | None = None) -> None:
    """Check what a loop reads later, before anything starts: the evaluation suite loads and
    every mixture cell's template exists (both failed only after synthesis and training).

    Raises:
        ConfigError: naming ``source``, the field and what is allowed.
    """
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.tasks.registry import get_task

    try:
        load_suite(cfg.eval_suite)
    except ConfigError as err:
        if err.source and err.field not in ("path", "suite"):
            raise                       # the suite file itself is bad: the error names it
        raise ConfigError("eval_suite", err.value, err.allowed, source) from None
    if cfg.distill.enabled:
        from clawgym_ros.calibration.job import list_logs

        try:
            list_logs(cfg.distill.logs)
        except ConfigError as err:
            raise ConfigError("distill.logs", err.value, err.allowed, source) from None
    for i, cell in enumerate(cfg.mixture):
        if cell["template"]:
            try:
                get_task(cell["task"]).synthesis_template(cell["template"])  # not held out
            except ConfigError as err:
                raise ConfigError(f"mixture[{i}].template", err.value, err.allowed,
                                  source) from None
