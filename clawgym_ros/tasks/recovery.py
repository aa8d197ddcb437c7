"""Recovery synthesis: demonstrations that start where an evaluated policy failed.

An evaluation report keeps restorable failure states of its failed episodes
(:mod:`clawgym_ros.evaluation.failure_states`). :func:`recovery_specs` turns them into
synthesis episode specs whose ``recover_from`` option carries one snapshot (its metadata, the
report id and the state values, so the spec alone reproduces the episode and the dataset id
follows from it). The task's expert restores the snapshot instead of starting a fresh episode
and finishes the task from there (:meth:`Task.recovery_grammar` lists the legal skill
sequences of such a segment); the ordinary dual sign-off checks the segment, with the stages
the policy had already reached recorded at the segment's first step. A snapshot the expert
cannot recover from ends as a rejected episode with its reason, counted in the yield.

Bad input is refused before anything runs: a report id of another kind, a report without
failure states, a snapshot of another robot or scene, a corrupted snapshot (one line naming
it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError
from clawgym_ros.evaluation.failure_states import (
    KINDS,
    FailureState,
    FailureStateError,
    pick_frames,
    restore,
)
from clawgym_ros.synthesis.episode import EpisodeSpec
from clawgym_ros.synthesis.mixture import episode_seed

#: Generator option of a recovery episode: the snapshot to start from (module docstring).
OPTION = "recover_from"


def check_restorable(states: Sequence[FailureState]) -> None:
    """Restore every snapshot once into its task env (one env per task and template).

    Raises:
        FailureStateError: a snapshot of a task without recovery synthesis, of another robot
            or scene (model signature), or whose state does not fit.
    """
    from clawgym_ros.tasks.registry import TASKS, get_task

    for fs in states:
        task = get_task(fs.task)
        if not task.recovery_grammar:
            have = ", ".join(name for name in TASKS if get_task(name).recovery_grammar)
            raise FailureStateError(f"failure state {fs.name}: task {fs.task!r} has no "
                                    f"recovery expert (these have: {have})")
        if int(task.template(fs.template).params.get("placements", 1)) != 1:
            raise FailureStateError(f"failure state {fs.name}: template {fs.template!r} "
                                    "has several placements; recovery covers one")
    for _ in restored_envs(states):
        pass


def recovery_specs(report_id: str, states: Sequence[FailureState], episodes: int, seed: int,
                   options: Mapping[str, Any] | None = None) -> list[EpisodeSpec]:
    """Synthesis specs, one per snapshot in turn (``episodes`` of them; 0 = one each).

    Stage-entry snapshots come first (states the policy reached on its way, before it went
    astray: measured in the demo loop, the expert finished 10 of 17 of them, 2 of 33 episode
    ends), then stall, then end snapshots; episode ``i`` gets seed ``episode_seed(seed, i)``
    and the evaluated episode's cell (template, perturbation family and intensity).

    Raises:
        ConfigError: ``episodes`` < 0, or no snapshots.
    """
    if episodes < 0:
        raise ConfigError("episodes", episodes, "0 (one per failure state) or more")
    rank = {kind: i for i, kind in enumerate(KINDS)}       # stage, stall, end
    ordered = sorted(states, key=lambda fs: (rank[fs.kind], fs.episode))
    if not ordered:
        raise ConfigError("failure states", 0, "at least one")
    n = episodes or len(ordered)
    specs = []
    for index in range(n):
        fs = ordered[index % len(ordered)]
        assert fs.state is not None
        origin = {**fs.meta(), "report": report_id,
                  "state": [float(v) for v in np.asarray(fs.state, dtype=np.float64)]}
        specs.append(EpisodeSpec(
            index=index, seed=episode_seed(seed, index), task=fs.task, template=fs.template,
            family=fs.family, intensity=float(fs.intensity),
            options={**dict(options or {}), OPTION: origin}))
    return specs


def snapshot_of(spec: EpisodeSpec) -> FailureState | None:
    """The snapshot a recovery spec starts from (None for an ordinary spec).

    Raises:
        FailureStateError: a malformed ``recover_from`` option.
    """
    origin = spec.options.get(OPTION)
    if not origin:
        return None
    try:
        state = np.asarray(origin["state"], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        raise FailureStateError(f"episode {spec.index}: {OPTION} has no valid state values"
                                ) from None
    fs = FailureState.from_meta(origin, state=state, source=f"episode {spec.index} {OPTION}")
    if fs.digest() != origin.get("sha256"):
        raise FailureStateError(f"episode {spec.index}: {OPTION} state {fs.name} is corrupted "
                                "(sha256 differs)")
    return fs


def origin_info(spec: EpisodeSpec, fs: FailureState | None) -> dict[str, Any]:
    """What a recovery episode's record says about where it came from (no state values);
    ``fs``: its :func:`snapshot_of` (None for an ordinary spec: empty)."""
    if fs is None:
        return {}
    return {"kind": "recovery", "report": str(spec.options[OPTION].get("report", "")),
            "state": fs.name, "state_kind": fs.kind, "episode": fs.episode,
            "failed_stage": fs.stage, "time": fs.time,
            "reached_before": [n for n, _ in fs.reached]}


def restored_envs(states: Iterable[FailureState]) -> Iterator[Any]:
    """Restore each snapshot in turn and yield its task env (unwrapped; one env per task and
    template, closed when the iteration ends).

    Raises:
        FailureStateError: as :func:`restore`.
    """
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_ros.tasks.registry import get_task

    envs: dict[tuple[str, str], Any] = {}
    try:
        for fs in states:
            key = (fs.task, fs.template)
            if key not in envs:
                envs[key] = gym.make(get_task(fs.task).env_id, template=fs.template,
                                     control_mode=C.CONTROL_DICT).unwrapped
            restore(envs[key], fs)
            yield envs[key]
    finally:
        for env in envs.values():
            env.close()


def render_frames(states: Iterable[FailureState], width: int = 320, height: int = 240
                  ) -> dict[str, bytes]:
    """PNG bytes of one rendered frame (the scene camera; outdoors, where there is none, the
    base's front camera) per failing stage.

    Deterministic for a given machine's renderer; the frames are report content.
    """
    import io

    import matplotlib.image as mpimg

    frames: dict[str, bytes] = {}
    chosen = pick_frames(states)
    for (key, _), env in zip(chosen.items(), restored_envs(chosen.values()), strict=True):
        camera = C.CAMERA_SCENE if env.backend.is_arm else C.CAMERA_FRONT
        image = env.backend.render(camera, width, height)
        buf = io.BytesIO()
        mpimg.imsave(buf, image, format="png", metadata={"Software": None})
        frames[key] = buf.getvalue()
    return frames
