"""trainer_node: lifecycle node serving the ``train`` action (clawgym_interfaces/action/Train).

Thin: goal -> :class:`~clawgym_ros.training.config.TrainConfig` -> the training core
(:func:`clawgym_ros.training.bc.train`) -> result. A goal with ``finetune: rl`` instead
fine-tunes ``init_checkpoint_id`` with RL for ``steps`` environment steps on ``task``
(:func:`goal_finetune_config` -> :func:`clawgym_ros.training.rl.finetune`; feedback after every
rollout, a cancel stops it without committing anything). Training runs in a worker thread while the
action's execute coroutine awaits it, so the single-threaded executor keeps serving cancel
requests and lifecycle services; feedback (step, loss, validation loss, loss per group) is
published from the core's progress callback at every log/validation step, and a cancel request
stops the run between two steps (its newest state is kept in the work folder, so the same goal
resumes later). One goal at a time; goals are rejected unless the node is active.

Lifecycle: the constructor declares parameters only; ``on_configure`` reads them, imports the
training core (torch) and creates the action server; ``on_activate`` starts accepting goals;
``on_deactivate`` stops a running goal at its next step; ``on_cleanup`` removes the server.
With ``autostart:=true`` the node configures and activates itself at start-up.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any

from clawgym_interfaces.action import Train
from clawgym_interfaces.msg import GroupWeight
from clawgym_ros import constants as C
from clawgym_ros.ros_io.action_node import ActionLifecycleNode, spin_action_node
from clawgym_ros.training.config import TrainConfig

_TRAIN_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
#: TrainConfig fields a Train goal does not carry: node parameters, defaults from TrainConfig.
TRAIN_DEFAULT_FIELDS: tuple[str, ...] = ("batch_size", "lr", "log_interval", "val_interval",
                                         "checkpoint_interval", "patience", "num_threads")


def _train_default(name: str, help_text: str | None = None) -> Any:
    """A node option whose default (and help) is TrainConfig's field ``name``: one place for
    the training defaults; config/params/trainer.yaml holds only deliberate differences."""
    field = _TRAIN_FIELDS[name]
    return dataclasses.field(default=field.default,
                             metadata={"help": help_text or field.metadata["help"]})


@dataclasses.dataclass(frozen=True)
class TrainerNodeOptions:
    """Node parameters: defaults of the training settings a Train goal does not carry."""

    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory used when a goal's run_dir is empty"})
    batch_size: int = _train_default("batch_size")
    lr: float = _train_default("lr")
    log_interval: int = _train_default(
        "log_interval", "steps between feedback messages and log entries")
    val_interval: int = _train_default("val_interval")
    checkpoint_interval: int = _train_default(
        "checkpoint_interval", "steps between step folders (resume points)")
    patience: int = _train_default("patience")
    num_threads: int = _train_default("num_threads")
    autostart: bool = dataclasses.field(
        default=False, metadata={"help": "configure and activate at start-up"})

    def __post_init__(self) -> None:
        # TrainConfig's own checks: one set of ranges (ConfigError names the field).
        TrainConfig(**self.train_settings())

    def train_settings(self) -> dict[str, Any]:
        """The TrainConfig fields these options set."""
        return {name: getattr(self, name) for name in TRAIN_DEFAULT_FIELDS}


def goal_config(goal: Any, options: TrainerNodeOptions):
    """Train goal + node options -> TrainConfig (raises ConfigError naming the field)."""
    from clawgym_ros.training.config import DEFAULT_HARDENING_INTENSITY
    from clawgym_ros.training.registry import policy_options_from_json

    return TrainConfig(
        steps=int(goal.steps), seed=int(goal.seed), policy=goal.policy or C.POLICY_MLP,
        policy_options=policy_options_from_json(goal.policy_options_json),
        group_weights={w.group: float(w.value) for w in goal.group_weights},
        frozen_groups=tuple(goal.frozen_groups), hardening_share=float(goal.hardening_share),
        hardening_intensity=float(goal.hardening_intensity) or DEFAULT_HARDENING_INTENSITY,
        **options.train_settings())


FINETUNE_RL = "rl"
FINETUNE_MODES = ("", FINETUNE_RL)


def goal_finetune_config(goal: Any):
    """Train goal with ``finetune: rl`` -> FinetuneConfig (raises ConfigError naming the
    field: unknown mode, missing checkpoint, unknown task or setting)."""
    from clawgym_ros.config import check_choice, check_option_names, from_dict, json_object
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.training.rl import FinetuneConfig

    check_choice("finetune", goal.finetune, FINETUNE_MODES)
    if not goal.init_checkpoint_id:
        raise ConfigError("init_checkpoint_id", "", "the checkpoint to fine-tune")
    check_choice("task", goal.task, C.TASKS)
    options = json_object(goal.finetune_options_json, "finetune_options_json")
    check_option_names(options, FinetuneConfig.option_names(), "finetune_options_json.")
    return from_dict(FinetuneConfig, {
        **options, "base_checkpoint": goal.init_checkpoint_id, "steps": int(goal.steps),
        "seed": int(goal.seed), "task": goal.task, "workers": int(goal.workers) or 1})


def _group_msgs(values: dict[str, float]) -> list[GroupWeight]:
    return [GroupWeight(group=name, value=float(value)) for name, value in values.items()]


class TrainerNode(ActionLifecycleNode):
    """Lifecycle node serving the Train action."""

    options_cls = TrainerNodeOptions
    action_type = Train
    action_name = C.ACTION_TRAIN

    def __init__(self) -> None:
        super().__init__(C.NODE_TRAINER)

    def prepare(self) -> None:
        import clawgym_ros.training.bc  # noqa: F401 (load torch now, not on the first goal)

    async def _execute(self, goal_handle) -> Train.Result:
        """Await the worker thread that trains; the executor stays free meanwhile."""
        if goal_handle.request.finetune:
            return await self._execute_finetune(goal_handle)
        outcome = await self._in_worker(lambda: self._train(goal_handle), "trainer")
        if isinstance(outcome, BaseException):
            return Train.Result(success=False, message=self._goal_failed(goal_handle, outcome),
                                train_loss=math.nan, val_loss=math.nan)
        result = outcome
        if result.cancelled:
            goal_handle.canceled()
            return Train.Result(success=False, message=f"cancelled at step {result.step}",
                                train_loss=result.train_loss, val_loss=result.val_loss)
        goal_handle.succeed()
        return Train.Result(success=True, checkpoint_id=result.checkpoint_id,
                            train_loss=result.train_loss, val_loss=result.val_loss,
                            message=f"{result.step} steps"
                            + (" (stopped early)" if result.stopped_early else ""))

    async def _execute_finetune(self, goal_handle) -> Train.Result:
        from clawgym_ros.training.rl import FinetuneCancelledError

        outcome = await self._in_worker(lambda: self._finetune(goal_handle), "trainer")
        if isinstance(outcome, FinetuneCancelledError) and goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return Train.Result(success=False, message=str(outcome), train_loss=math.nan,
                                val_loss=math.nan)
        if isinstance(outcome, BaseException):
            return Train.Result(success=False, message=self._goal_failed(goal_handle, outcome),
                                train_loss=math.nan, val_loss=math.nan)
        goal_handle.succeed()
        return Train.Result(success=True, checkpoint_id=outcome.checkpoint_id,
                            train_loss=math.nan, val_loss=math.nan,
                            message=f"RL fine-tuning: {outcome.timesteps} steps, "
                                    f"{outcome.episodes} episodes, training success "
                                    f"{outcome.train_success_rate:.2f}")

    def _finetune(self, goal_handle):
        """Worker thread: RL fine-tuning for one goal."""
        from clawgym_ros.training.rl import finetune

        goal = goal_handle.request
        assert self.options is not None
        cfg = goal_finetune_config(goal)

        def feedback(step: int, total: int, success: float) -> None:
            goal_handle.publish_feedback(Train.Feedback(
                step=step, total_steps=total, loss=math.nan, val_loss=math.nan,
                group_losses=_group_msgs({"train_success_rate": success})))

        self.get_logger().info(f"RL fine-tuning {cfg.base_checkpoint[:12]} on {cfg.task} for "
                               f"{cfg.steps} steps, seed {cfg.seed}")
        from clawgym_ros.calibration.apply import calibration_scope

        run_dir = goal.run_dir or self.options.run_dir
        with calibration_scope(run_dir, goal.calibration_id):   # the envs simulate at it
            return finetune(run_dir, cfg, on_progress=feedback,
                            should_stop=lambda: self._stop.is_set()
                            or goal_handle.is_cancel_requested)

    def _train(self, goal_handle):
        """Worker thread: run the training core for one goal."""
        from clawgym_ros.artifacts import ArtifactStore
        from clawgym_ros.training.bc import Progress, train
        from clawgym_ros.training.data import open_training_table

        goal = goal_handle.request
        assert self.options is not None
        cfg = goal_config(goal, self.options)
        store = ArtifactStore(goal.run_dir or self.options.run_dir)
        dataset_ids = [store.resolve(ref).id for ref in goal.dataset_ids]
        table = open_training_table(store, dataset_ids)

        def feedback(progress: Progress) -> None:
            goal_handle.publish_feedback(Train.Feedback(
                step=progress.step, total_steps=progress.total_steps, loss=progress.loss,
                val_loss=progress.val_loss, group_losses=_group_msgs(progress.group_losses)))

        def should_stop(_step: int) -> bool:
            return self._stop.is_set() or goal_handle.is_cancel_requested

        self.get_logger().info(f"training {cfg.steps} steps on {len(table)} rows "
                               f"({len(dataset_ids)} dataset(s)), seed {cfg.seed}")
        return train(table, cfg, store, dataset_ids=dataset_ids,
                     init_checkpoint=goal.init_checkpoint_id or None,
                     should_stop=should_stop, on_progress=feedback)


def main(args: list[str] | None = None) -> int:
    """Console script ``trainer_node``."""
    return spin_action_node(TrainerNode, args)


if __name__ == "__main__":
    sys.exit(main())
