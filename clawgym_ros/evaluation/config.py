"""The evaluator's config dataclass (what ``clawgym eval`` and ``evaluator_node`` take)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, from_dict
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.metrics import MetricsConfig
from clawgym_ros.evaluation.records import SEED_MAX


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """One evaluation: which suite, seed, mode and workers, and the metrics' thresholds.

    Attributes:
        suite: suite name (config/suites/<name>.yaml) or path.
        seed: overrides the suite's seed when set.
        mode: ``in_process`` (Gymnasium envs in worker processes) or ``ros`` (live topics).
        workers: rollout worker processes (in_process mode).
        checkpoint_id: artifact id of the evaluated checkpoint ("" when not from the store).
        calibration: id of the calibration the simulator ran at ("" = none; the caller
            activates it, :mod:`clawgym_ros.sim.active_calibration`).
        metrics: thresholds and constants of the metrics.
    """

    suite: str = "nominal"
    seed: int | None = None
    mode: str = C.EVAL_MODES[0]
    workers: int = 1
    checkpoint_id: str = ""
    calibration: str = ""
    metrics: MetricsConfig = dataclasses.field(default_factory=MetricsConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.suite, str) or not self.suite:
            raise ConfigError("suite", self.suite, "a suite name or path")
        if self.seed is not None:
            check_int("seed", self.seed, 0, SEED_MAX)
        check_choice("mode", self.mode, C.EVAL_MODES)
        check_int("workers", self.workers, 1, 256)
        if not isinstance(self.checkpoint_id, str):
            raise ConfigError("checkpoint_id", self.checkpoint_id, "a string")
        if not isinstance(self.calibration, str):
            raise ConfigError("calibration", self.calibration, "a calibration artifact id")
        if isinstance(self.metrics, Mapping):
            object.__setattr__(self, "metrics", from_dict(MetricsConfig, self.metrics))
        elif not isinstance(self.metrics, MetricsConfig):
            raise ConfigError("metrics", self.metrics, "a MetricsConfig or a mapping")
