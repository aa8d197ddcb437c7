"""trainer_node: lifecycle node serving the ``train`` action (clawgym_interfaces/action/Train).

Thin: goal -> :class:`~clawgym_ros.training.config.TrainConfig` -> the training core
(:func:`clawgym_ros.training.bc.train`) -> result. Training runs in a worker thread while the
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
from clawgym_ros.config import check_int, check_range
from clawgym_ros.ros_io.action_node import ActionLifecycleNode, spin_action_node
from clawgym_ros.training.config import DEFAULT_BATCH_SIZE, DEFAULT_LR


@dataclasses.dataclass(frozen=True)
class TrainerNodeOptions:
    """Node parameters: defaults of the training settings a Train goal does not carry."""

    run_dir: str = dataclasses.field(
        default=os.environ.get(C.ENV_RUN_DIR, C.DEFAULT_RUN_DIR),
        metadata={"help": "run directory used when a goal's run_dir is empty"})
    batch_size: int = dataclasses.field(default=DEFAULT_BATCH_SIZE,
                                        metadata={"help": "samples per step"})
    lr: float = dataclasses.field(default=DEFAULT_LR, metadata={"help": "learning rate"})
    log_interval: int = dataclasses.field(
        default=50, metadata={"help": "steps between feedback messages and log entries"})
    val_interval: int = dataclasses.field(default=200, metadata={"help": "steps between val"})
    checkpoint_interval: int = dataclasses.field(
        default=1000, metadata={"help": "steps between step folders (resume points)"})
    patience: int = dataclasses.field(
        default=0, metadata={"help": "early stopping patience in val checks; 0 = off"})
    num_threads: int = dataclasses.field(default=1, metadata={"help": "torch threads"})
    autostart: bool = dataclasses.field(
        default=False, metadata={"help": "configure and activate at start-up"})

    def __post_init__(self) -> None:
        check_int("batch_size", self.batch_size, 1)
        check_range("lr", self.lr, 0.0, 10.0, low_open=True)
        check_int("log_interval", self.log_interval, 1)
        check_int("val_interval", self.val_interval, 1)
        check_int("checkpoint_interval", self.checkpoint_interval, 1)
        check_int("patience", self.patience, 0)
        check_int("num_threads", self.num_threads, 1, 256)


def goal_config(goal: Any, options: TrainerNodeOptions):
    """Train goal + node options -> TrainConfig (raises ConfigError naming the field)."""
    from clawgym_ros.training.config import DEFAULT_HARDENING_INTENSITY, TrainConfig

    return TrainConfig(
        steps=int(goal.steps), seed=int(goal.seed), policy=goal.policy or C.POLICY_MLP,
        group_weights={w.group: float(w.value) for w in goal.group_weights},
        frozen_groups=tuple(goal.frozen_groups), hardening_share=float(goal.hardening_share),
        hardening_intensity=float(goal.hardening_intensity) or DEFAULT_HARDENING_INTENSITY,
        batch_size=options.batch_size, lr=options.lr, log_interval=options.log_interval,
        val_interval=options.val_interval, checkpoint_interval=options.checkpoint_interval,
        patience=options.patience, num_threads=options.num_threads)


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
