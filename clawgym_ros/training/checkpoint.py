"""Checkpoint tree, its writing during training, and safe loading.

A checkpoint artifact (kind ``checkpoint``) holds::

    <step>/model.safetensors            policy weights and normalization buffers
    <step>/config.json                  train config, policy spec, obs/action specs, stats,
                                        dataset ids, group names and weights, frozen groups
    <step>/training_state.safetensors   optimizer state, RNG states, loop accumulators
    <step>/training_state.json          optimizer hyper-parameters, loop scalars, history
    last                                the final step (text)
    summary.json                        losses, history, early-stopping outcome

During training the same ``<step>/`` folders are written (each atomically: temporary folder,
then rename) into a work folder ``<run>/train/<key>/`` named after the run's settings, so an
interrupted run resumes from its newest step. Loading never unpickles: tensors come from
safetensors, everything else from JSON. A checkpoint whose files do not match its manifest, or
whose observation/action layout differs from what the caller expects, is refused with a
:class:`~clawgym_ros.errors.CheckpointError`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file

from clawgym_ros import constants as C
from clawgym_ros.artifacts import Artifact, ArtifactStore, atomic_write_text
from clawgym_ros.errors import ArtifactError, CheckpointError, ConfigError
from clawgym_ros.training.policies import PolicyModel, PolicySpec, TorchPolicy, build_policy

if TYPE_CHECKING:
    from clawgym_ros.training.task_policy import TaskPolicy

CHECKPOINT_FORMAT = 1
STEP_FILES = (C.FILE_MODEL, C.FILE_CHECKPOINT_CONFIG, C.FILE_TRAINING_STATE,
              C.FILE_TRAINING_STATE_JSON)


def spec_pairs(spec: Mapping[str, int]) -> list[list[Any]]:
    """An ordered key -> width mapping as JSON pairs (order matters for flattening)."""
    return [[str(k), int(v)] for k, v in spec.items()]


def dump_json(data: Any) -> str:
    """Deterministic JSON text (files of a checkpoint are hashed into its id)."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# --- optimizer state <-> safetensors + JSON --------------------------------------------------


def optimizer_state(optim: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state dict into tensors (``optim.<param>.<name>``) and JSON."""
    state = optim.state_dict()
    tensors, scalars = {}, {}
    for pid, entries in state["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim.{pid}.{name}"] = value.detach().clone().contiguous()
            else:
                scalars[f"{pid}.{name}"] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
              for g in state["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def load_optimizer_state(optim: torch.optim.Optimizer, tensors: Mapping[str, torch.Tensor],
                         data: Mapping[str, Any]) -> None:
    """Inverse of :func:`optimizer_state`."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, pid, name = key.split(".", 2)
            state.setdefault(int(pid), {})[name] = value
    for key, value in data.get("scalars", {}).items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = value
    groups = []
    for group in data["param_groups"]:
        group = dict(group)
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    optim.load_state_dict({"state": state, "param_groups": groups})


# --- the work folder during training ----------------------------------------------------------


def write_step(work_dir: Path, step: int, *, policy: PolicyModel, meta: Mapping[str, Any],
               state_tensors: Mapping[str, torch.Tensor], state_json: Mapping[str, Any]) -> Path:
    """Write ``<work_dir>/<step>/`` atomically and point ``last`` at it.

    Args:
        meta: the config.json content (without the step, added here).
        state_tensors: optimizer/RNG/accumulator tensors.
        state_json: optimizer hyper-parameters and loop scalars.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    final = work_dir / str(step)
    tmp = work_dir / f".tmp-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    weights = {k: v.detach().clone().contiguous() for k, v in policy.state_dict().items()}
    save_file(weights, str(tmp / C.FILE_MODEL))
    (tmp / C.FILE_CHECKPOINT_CONFIG).write_text(dump_json({**meta, "step": step}))
    save_file({k: v.contiguous() for k, v in state_tensors.items()},
              str(tmp / C.FILE_TRAINING_STATE))
    (tmp / C.FILE_TRAINING_STATE_JSON).write_text(dump_json(state_json))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    atomic_write_text(work_dir / C.FILE_LAST, f"{step}\n")
    return final


def complete_steps(work_dir: Path) -> list[int]:
    """Steps of the work folder with all their files, ascending."""
    if not work_dir.is_dir():
        return []
    steps = []
    for path in work_dir.iterdir():
        if path.is_dir() and path.name.isdigit() and all((path / f).is_file()
                                                           for f in STEP_FILES):
            steps.append(int(path.name))
    return sorted(steps)


@dataclasses.dataclass
class StepState:
    """What a ``<step>/`` folder holds, loaded without unpickling."""

    step: int
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]
    tensors: dict[str, torch.Tensor]
    state: dict[str, Any]


def read_step(step_dir: Path) -> StepState:
    """Load a ``<step>/`` folder (safetensors + JSON only).

    Raises:
        CheckpointError: missing or malformed files.
    """
    try:
        meta = json.loads((step_dir / C.FILE_CHECKPOINT_CONFIG).read_text())
        state = json.loads((step_dir / C.FILE_TRAINING_STATE_JSON).read_text())
        weights = load_file(str(step_dir / C.FILE_MODEL))
        tensors = load_file(str(step_dir / C.FILE_TRAINING_STATE))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"checkpoint step folder {step_dir} is unreadable: {err}") from None
    except Exception as err:  # noqa: BLE001 (safetensors raises its own error types)
        raise CheckpointError(f"checkpoint step folder {step_dir} is malformed: {err}") from None
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {step_dir}: format {meta.get('format')!r}, expected "
                              f"{CHECKPOINT_FORMAT}")
    return StepState(step=int(meta["step"]), meta=meta, weights=weights, tensors=tensors,
                     state=state)


def commit_checkpoint(store: ArtifactStore, work_dir: Path, final_step: int, *,
                      summary_content: Mapping[str, Any], config: Any, seed: int,
                      parents: Sequence[str], summary: Mapping[str, Any]) -> Artifact:
    """Publish a checkpoint artifact: the work folder's ``final_step`` (weights, optimizer and
    RNG state), ``last`` and the training summary; then prune the work folder to that step.

    The other steps of the work folder are resume points of an interrupted run, not results:
    published, they made a 10,000-step checkpoint 264 MB (100 snapshots at the trainer's
    interval of 100) and a 4-iteration loop's run folder 2.3 GB. Kept after the commit, the
    final step alone lets a rerun of the same training publish the same artifact at once.
    """
    with store.stage(C.KIND_CHECKPOINT) as staging:
        shutil.copytree(work_dir / str(final_step), staging.path / str(final_step))
        (staging.path / C.FILE_LAST).write_text(f"{final_step}\n")
        (staging.path / C.FILE_TRAIN_SUMMARY).write_text(dump_json(summary_content))
        artifact = staging.commit(config=config, seeds={"train": seed}, parents=list(parents),
                                  summary=summary)
    for step in complete_steps(work_dir):
        if step != final_step:
            shutil.rmtree(work_dir / str(step), ignore_errors=True)
    return artifact


# --- loading a committed checkpoint ----------------------------------------------------------


@dataclasses.dataclass
class LoadedCheckpoint:
    """A verified checkpoint step: its artifact, config.json and weights."""

    artifact: Artifact
    step: int
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec.from_json(self.meta["policy_spec"])

    @property
    def obs_spec(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.meta["obs_spec"]}

    @property
    def action_spec(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.meta["action_spec"]}

    def build_model(self) -> PolicyModel:
        """The policy with the checkpoint's weights and normalization (eval mode).

        Raises:
            CheckpointError: its policy type is not registered here, or the weights do not fit.
        """
        try:
            model = build_policy(self.spec)
        except ConfigError as err:
            raise CheckpointError(f"checkpoint {self.artifact.id[:12]}: {err}") from None
        try:
            model.load_state_dict(self.weights, strict=True)
        except RuntimeError as err:
            first = str(err).splitlines()[0]
            raise CheckpointError(f"checkpoint {self.artifact.id[:12]} step {self.step}: "
                                  f"weights do not fit its policy spec ({first})") from None
        return model.eval()


def _describe(spec: Mapping[str, int]) -> str:
    return ", ".join(f"{k}:{v}" for k, v in spec.items()) or "(none)"


def check_spec(what: str, ckpt_id: str, found: Mapping[str, int],
               expected: Mapping[str, int], allow_extra: bool = False) -> None:
    """Refuse a checkpoint whose ordered key -> width layout differs from ``expected``.

    With ``allow_extra`` (observations), ``expected`` may hold keys the policy does not read
    (e.g. ``joint_vel``, left out by ``exclude_obs_keys``); the policy's keys must still appear
    in it in the same order with the same widths.
    """
    mine = list(found.items())
    theirs = list(expected.items())
    if allow_extra:
        theirs = [(k, w) for k, w in theirs if k in found]
    if mine == theirs:
        return
    raise CheckpointError(
        f"checkpoint {ckpt_id[:12]} is for another {what} spec: it expects {_describe(found)}; "
        f"the caller provides {_describe(expected)}")


def load_checkpoint(store: ArtifactStore, ref: str, *,
                    expected_obs_spec: Mapping[str, int] | None = None,
                    expected_action_spec: Mapping[str, int] | None = None,
                    step: int | None = None) -> LoadedCheckpoint:
    """Resolve, verify and load a checkpoint artifact (its ``last`` step unless ``step``).

    Raises:
        ArtifactError: unknown or malformed id.
        CheckpointError: tampered files, malformed tree, or an obs/action spec mismatch.
    """
    artifact = store.resolve(ref, C.KIND_CHECKPOINT)
    try:
        store.verify(artifact)
    except ArtifactError as err:
        raise CheckpointError(f"checkpoint {artifact.id[:12]} refused: {err}") from None
    if step is None:
        text = (artifact.path / C.FILE_LAST).read_text().strip() \
            if (artifact.path / C.FILE_LAST).is_file() else ""
        if not text.isdigit():
            raise CheckpointError(f"checkpoint {artifact.id[:12]} has no valid "
                                  f"{C.FILE_LAST!r} pointer ({text!r})")
        step = int(text)
    step_dir = artifact.file(str(step))
    if not step_dir.is_dir():
        raise CheckpointError(f"checkpoint {artifact.id[:12]} has no step {step}")
    loaded = read_step(step_dir)
    ckpt = LoadedCheckpoint(artifact=artifact, step=step, meta=loaded.meta,
                            weights=loaded.weights)
    if expected_obs_spec is not None:
        check_spec("observation", artifact.id, ckpt.obs_spec, expected_obs_spec,
                   allow_extra=True)
    if expected_action_spec is not None:
        check_spec("action", artifact.id, ckpt.action_spec, expected_action_spec)
    return ckpt


def load_policy(store: ArtifactStore, ref: str, *,
                expected_obs_spec: Mapping[str, int] | None = None,
                expected_action_spec: Mapping[str, int] | None = None,
                image_key: str = C.OBS_IMAGE) -> TorchPolicy | TaskPolicy:
    """A checkpoint as a ready-to-run policy (the evaluator's entry point): a
    :class:`TorchPolicy`, or for a task-conditioned checkpoint of ``clawgym train --sequence``
    a :class:`~clawgym_ros.training.task_policy.TaskPolicy` that the evaluator tells each
    episode's task (``set_task``).

    Raises:
        CheckpointError: see :func:`load_checkpoint`.
    """
    ckpt = load_checkpoint(store, ref, expected_obs_spec=expected_obs_spec,
                           expected_action_spec=expected_action_spec)
    if ckpt.spec.type == C.POLICY_TASK_MLP:
        from clawgym_ros.training.task_policy import load_task_policy

        return load_task_policy(ckpt)
    return TorchPolicy(ckpt.build_model(), ckpt.obs_spec, ckpt.action_spec, image_key)
