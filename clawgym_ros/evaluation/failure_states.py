"""Failure states: restorable snapshots of where an evaluated episode failed.

For every failed episode of an in-process evaluation (task world) the rollout keeps up to two
snapshots of the simulator, each the physics state (MuJoCo ``mjSTATE_INTEGRATION``) plus the
task's own progress (the stages reached, with their times):

- ``stage``: the moment the last stage the policy reached was reached, i.e. the start of the
  stage it then failed (none when it reached no stage: that state is an ordinary start);
- ``stall``: the first moment after it where the robot stood still (arm joints within
  :data:`STALL_JOINT_TOL` rad and the gripper within :data:`STALL_GRIPPER_TOL` m over
  :data:`STALL_WINDOW_S` s) without reaching a stage; ``end`` (the episode's last state) when
  the robot never stood still.

Everything else an episode needs to be rebuilt (template, goal, scene randomization,
perturbation settings) follows from the episode's seeds: a snapshot is restored by resetting
the same task env with the episode's seed and then setting the physics state and stages
(:func:`restore`). The model's structural signature is stored with each snapshot so that a
snapshot never loads into another robot or scene.

The report artifact stores the arrays in ``failure_states.safetensors`` (float64, one tensor
per snapshot, a sha256 of each in report.json) and lists each snapshot's metadata per episode;
``report.html`` shows a rendered frame of one failure state per failing stage.

Pure: no rclpy; the simulator is reached through the env/backend objects passed in.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError

KIND_STAGE = "stage"
KIND_STALL = "stall"
KIND_END = "end"
KINDS: tuple[str, ...] = (KIND_STAGE, KIND_STALL, KIND_END)
#: The robot counts as standing still when, over this window, ...
STALL_WINDOW_S = 1.0
#: ... no arm joint moved more than this (rad) ...
STALL_JOINT_TOL = 0.01
#: ... and the gripper opening changed by less than this (m).
STALL_GRIPPER_TOL = 0.002
#: Snapshot period of the stall buffer (s).
SAMPLE_PERIOD_S = 0.1
FORMAT = "clawgym.failure_states/1"


class FailureStateError(ClawgymError):
    """A failure-state file or snapshot is missing, corrupted or does not fit the world."""


@dataclasses.dataclass(frozen=True, eq=False)
class FailureState:
    """One snapshot of a failed episode.

    Attributes:
        episode: the episode's index in its suite.
        kind: ``stage``, ``stall`` or ``end`` (module docstring).
        time: simulation time of the snapshot (s).
        stage: the stage the policy failed (the first one not reached; ``final_check`` when
            it reached every stage without succeeding), as the record's ``failed_stage``.
        reached: stages reached at the snapshot, with the times they were reached.
        seed, task, template, family, intensity, perturbation_seed: the episode (enough to
            rebuild it: :func:`restore`).
        signature: the world model's structural digest (``backend.state_signature()``).
        state: the physics state (float64; None in records read back from report.json).
    """

    episode: int
    kind: str
    time: float
    stage: str
    reached: tuple[tuple[str, float], ...]
    seed: int
    task: str
    template: str
    family: str
    intensity: float
    perturbation_seed: int
    signature: str
    state: np.ndarray | None = None

    @property
    def name(self) -> str:
        """Tensor name in the safetensors file, e.g. ``ep00012_stall``."""
        return f"ep{self.episode:05d}_{self.kind}"

    def digest(self) -> str:
        """sha256 of the state's float64 bytes (little endian)."""
        if self.state is None:
            raise FailureStateError(f"failure state {self.name} has no state array")
        return hashlib.sha256(np.ascontiguousarray(self.state, "<f8").tobytes()).hexdigest()

    def meta(self) -> dict[str, Any]:
        """JSON-able metadata (what report.json lists per episode)."""
        out = {"name": self.name, "kind": self.kind, "time": round(float(self.time), 9),
               "stage": self.stage, "reached": [[n, round(float(t), 9)] for n, t in self.reached],
               "seed": int(self.seed), "task": self.task, "template": self.template,
               "family": self.family, "intensity": float(self.intensity),
               "perturbation_seed": int(self.perturbation_seed), "signature": self.signature}
        if self.state is not None:
            out["size"] = int(self.state.size)
            out["sha256"] = self.digest()
        return out

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], state: np.ndarray | None = None,
                  source: str = "report.json") -> FailureState:
        """Rebuild from :meth:`meta` (and the array).

        Raises:
            FailureStateError: a missing or malformed field (named).
        """
        try:
            fs = cls(episode=int(meta["name"].split("_")[0][2:]), kind=str(meta["kind"]),
                     time=float(meta["time"]), stage=str(meta["stage"]),
                     reached=tuple((str(n), float(t)) for n, t in meta["reached"]),
                     seed=int(meta["seed"]), task=str(meta["task"]),
                     template=str(meta["template"]), family=str(meta["family"]),
                     intensity=float(meta["intensity"]),
                     perturbation_seed=int(meta["perturbation_seed"]),
                     signature=str(meta["signature"]), state=state)
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise FailureStateError(f"{source}: failure state "
                                    f"{str(meta.get('name', '?'))[:40]!r} is malformed "
                                    f"({type(err).__name__}: {str(err)[:80]})") from None
        if fs.kind not in KINDS:
            raise FailureStateError(f"{source}: failure state {fs.name}: kind {fs.kind!r} "
                                    f"is not one of {', '.join(KINDS)}")
        return fs


class FailureWatch:
    """Follows one episode and keeps the snapshots of :mod:`this module <.failure_states>`.

    Args:
        spec: the evaluation episode spec (index, seeds, cell).
        backend: the episode's simulator backend (``get_state``, ``state_signature``,
            ``time``, ``control_dt``).
        stages: the episode's stage order.
    """

    def __init__(self, spec: Any, backend: Any, stages: Sequence[str]) -> None:
        self.spec = spec
        self.backend = backend
        self.stages = tuple(stages)
        self._every = max(1, int(round(SAMPLE_PERIOD_S / backend.control_dt)))
        self._window = int(round(STALL_WINDOW_S / SAMPLE_PERIOD_S)) + 1
        self._buffer: collections.deque = collections.deque(maxlen=self._window)
        self._steps = 0
        self._reached: tuple[tuple[str, float], ...] = ()
        self._stage_snap: tuple[float, np.ndarray] | None = None
        self._stall_snap: tuple[float, np.ndarray] | None = None

    def observe(self, state: Mapping[str, np.ndarray], reached: Sequence[str]) -> None:
        """Record the true state after a control step (and once after reset)."""
        t = self.backend.time
        if len(reached) > len(self._reached):
            self._reached = self._reached + tuple(
                (name, t) for name in reached[len(self._reached):])
            self._stage_snap = (t, self.backend.get_state())
            self._stall_snap = None
            self._buffer.clear()
        self._steps += 1
        if (self._steps - 1) % self._every or self._stall_snap is not None:
            return
        self._buffer.append((t, _motion_vector(state), self.backend.get_state()))
        if len(self._buffer) == self._window:
            motion = np.array([m for _, m, _ in self._buffer])
            spread = motion.max(axis=0) - motion.min(axis=0)
            if (spread[:-1] <= STALL_JOINT_TOL).all() and spread[-1] <= STALL_GRIPPER_TOL:
                t0, _, snap = self._buffer[0]
                self._stall_snap = (t0, snap)

    def finish(self, success: bool) -> tuple[FailureState, ...]:
        """The episode's failure states (none when it succeeded)."""
        if success:
            return ()
        out = []
        signature = self.backend.state_signature()
        failed = self.stages[len(self._reached)] if len(self._reached) < len(self.stages) \
            else C.STAGE_FINAL_CHECK
        s = self.spec
        common = dict(episode=int(s.index), stage=failed, seed=int(s.seed), task=s.task,
                      template=s.template, family=s.family, intensity=float(s.intensity),
                      perturbation_seed=int(s.perturbation_seed), signature=signature)
        if self._stage_snap is not None:
            t, snap = self._stage_snap
            out.append(FailureState(kind=KIND_STAGE, time=t, reached=self._reached,
                                    state=snap, **common))
        if self._stall_snap is not None:
            t, snap = self._stall_snap
            out.append(FailureState(kind=KIND_STALL, time=t, reached=self._reached,
                                    state=snap, **common))
        else:
            out.append(FailureState(kind=KIND_END, time=self.backend.time,
                                    reached=self._reached, state=self.backend.get_state(),
                                    **common))
        return tuple(out)


def _motion_vector(state: Mapping[str, np.ndarray]) -> np.ndarray:
    """Arm joints (or the base pose) followed by the gripper opening: what 'still' means."""
    parts = []
    if C.OBS_JOINT_POS in state:
        parts.append(np.asarray(state[C.OBS_JOINT_POS], dtype=float).ravel())
    elif C.OBS_ODOM in state:
        parts.append(np.asarray(state[C.OBS_ODOM], dtype=float).ravel()[:3])
    grip = state.get(C.OBS_GRIPPER)
    parts.append(np.asarray(grip if grip is not None else [0.0], dtype=float).ravel()[:1])
    return np.concatenate(parts)


# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------
def encode(states: Iterable[FailureState]) -> bytes | None:
    """The safetensors bytes of the snapshots (None when there are none)."""
    from safetensors.numpy import save

    tensors = {fs.name: np.ascontiguousarray(fs.state, "<f8") for fs in states
               if fs.state is not None}
    if not tensors:
        return None
    return save(tensors, metadata={"format": FORMAT})


def decode(data: bytes, metas: Sequence[Mapping[str, Any]], source: str
           ) -> list[FailureState]:
    """Snapshots of ``metas`` (report.json entries) with their arrays from ``data``.

    Raises:
        FailureStateError: not a failure-state file, a snapshot missing from it, or an array
            whose size or sha256 differs from its metadata (corrupted).
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        tensors = load(data)
    except (SafetensorError, ValueError, OSError) as err:
        raise FailureStateError(f"{source}: not a failure-state file ({str(err)[:100]})"
                                ) from None
    out = []
    for meta in metas:
        fs = FailureState.from_meta(meta, source=source)
        arr = tensors.get(fs.name)
        if arr is None:
            raise FailureStateError(f"{source}: failure state {fs.name} is missing")
        fs = dataclasses.replace(fs, state=np.asarray(arr, dtype=np.float64))
        if arr.size != int(meta.get("size", -1)) or fs.digest() != meta.get("sha256"):
            raise FailureStateError(f"{source}: failure state {fs.name} is corrupted (its "
                                    "size or sha256 differs from report.json)")
        out.append(fs)
    return out


# ---------------------------------------------------------------------------------------------
# Restoring and rendering
# ---------------------------------------------------------------------------------------------
def restore(env: Any, fs: FailureState) -> dict[str, np.ndarray]:
    """Rebuild episode ``fs`` in task env ``env`` (unwrapped or wrapped): reset with the
    episode's seed and template, then set the physics state and the stages reached.

    Returns:
        The observation of the restored state.

    Raises:
        FailureStateError: the env is of another task, or its model has another signature
            (another robot or scene), or the state does not fit.
    """
    base = env.unwrapped
    task = getattr(getattr(base, "task", None), "name", "")
    if task != fs.task:
        raise FailureStateError(f"failure state {fs.name} is of task {fs.task!r}, the env "
                                f"runs {task!r}")
    env.reset(seed=fs.seed, options={"template": fs.template})
    signature = base.backend.state_signature()
    if signature != fs.signature:
        raise FailureStateError(
            f"failure state {fs.name} was taken in another world (model signature "
            f"{fs.signature}, this {fs.task}/{fs.template} model has {signature}): another "
            "robot or scene")
    if fs.state is None:
        raise FailureStateError(f"failure state {fs.name} has no state array")
    try:
        base.backend.set_state(fs.state)
    except ClawgymError as err:
        raise FailureStateError(f"failure state {fs.name}: {err}") from None
    return base.restore_progress(fs.reached)


def frame_key(fs: FailureState) -> str:
    """One frame per task and failing stage."""
    return f"{fs.task}/{fs.stage}"


def pick_frames(states: Iterable[FailureState]) -> dict[str, FailureState]:
    """The snapshot shown for each (task, failing stage): the lowest episode's stall (or end)
    snapshot, where the policy got stuck."""
    out: dict[str, FailureState] = {}
    for fs in sorted(states, key=lambda f: (f.episode, f.kind != KIND_STAGE)):
        if fs.kind == KIND_STAGE:
            continue
        out.setdefault(frame_key(fs), fs)
    return dict(sorted(out.items()))


def collect(results: Iterable[Any]) -> list[FailureState]:
    """All failure states of a list of episode results, by episode."""
    return [fs for r in sorted(results, key=lambda r: r.index) for fs in r.failure_states]


def metas_of(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every failure state's metadata listed in a report dict."""
    return [dict(m) for e in report.get("per_episode", ()) for m in e.get("failure_states", ())]
