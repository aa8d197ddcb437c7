"""Pairs of episodes for human judging (``clawgym judge``) and the judgments they produce.

A pair is one episode of a suite (task, template, seed, perturbation cell: the episodes a
report scores) run by two policies. Each episode runs in-process exactly as ``clawgym eval``
runs it (:class:`~clawgym_ros.evaluation.rollout.Runner`, task world, actions recorded), then
its actions are replayed from the same seed in a fresh env of the same task and template to
render a strip of scene-camera frames; the replay must reach the same stages and outcome, or
the pair is refused (a policy or env that is not deterministic cannot be shown faithfully).

Which policy is shown as A (left) is drawn per pair from the judging seed, so a rater cannot
learn a side; the page never names the policies. A judgment stores the shown order:
``item_a`` is the policy shown as A, ``preferred`` is ``a``, ``b`` or ``tie`` as clicked, the
context names the episode, and ``reason`` an optional tag of
:data:`~clawgym_ros.evaluation.preference.REASONS`. Judgments go into the run's preference
store through :func:`~clawgym_ros.evaluation.preference.add_judgments` (atomic, locked, the
store's limits); the source key of a judgment is its session and pair, so a pair is judged once
per session (a repeated request adds nothing). The next evaluation's report fits every judgment
in the store at that time (``orchestration.evaluation``): judgments may arrive long after the
episodes.

Pure: no rclpy, no HTTP (the page lives in :mod:`clawgym_ros.report.judge_page`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_int
from clawgym_ros.errors import ClawgymError, ConfigError
from clawgym_ros.evaluation.rollout import WORLD_TASK, PolicySource, RolloutOptions
from clawgym_ros.evaluation.suites import EpisodeSpec

#: Most pairs one judging session shows (each is two rollouts and their renders).
MAX_PAIRS = 200
#: Most frames per episode strip.
MAX_FRAMES = 32


class ReplayMismatchError(ClawgymError):
    """A replay of recorded actions did not reproduce the episode's outcome."""


@dataclasses.dataclass(frozen=True)
class Clip:
    """One policy's episode as shown: PNG frames and what the episode reached."""

    policy: str
    frames: tuple[bytes, ...]
    times: tuple[float, ...]
    stages: tuple[str, ...]
    stages_reached: tuple[str, ...]
    success: bool
    steps: int

    def summary(self) -> dict[str, Any]:
        """What the page shows under the frames (not the policy's name)."""
        return {"frames": len(self.frames), "times": [round(t, 2) for t in self.times],
                "stages": list(self.stages), "stages_reached": list(self.stages_reached),
                "success": self.success, "steps": self.steps}


@dataclasses.dataclass(frozen=True)
class Pair:
    """One episode run by two policies; ``a`` is shown left, ``b`` right."""

    index: int
    spec: EpisodeSpec
    a: Clip
    b: Clip

    @property
    def context(self) -> str:
        """The episode a judgment refers to (task/template, seed, cell)."""
        s = self.spec
        return f"{s.task}/{s.template} seed={s.seed} cell={s.family}"

    def clip(self, side: str) -> Clip:
        return {"a": self.a, "b": self.b}[side]

    def summary(self) -> dict[str, Any]:
        # the seed as text: 63-bit seeds lose digits as JavaScript numbers
        return {"pair": self.index, "task": self.spec.task, "template": self.spec.template,
                "seed": str(self.spec.seed), "cell": self.spec.family,
                "a": self.a.summary(), "b": self.b.summary()}


def pick_specs(specs: Sequence[EpisodeSpec], count: int) -> list[EpisodeSpec]:
    """The first ``count`` episodes of a suite's expansion (its order: task, split, cell,
    repetition), re-indexed 0..count-1 as pairs.

    Raises:
        ConfigError: ``count`` outside 1..min(len(specs), MAX_PAIRS).
    """
    check_int("--pairs", count, 1, min(len(specs), MAX_PAIRS))
    return list(specs[:count])


def shown_order(seed: int, index: int) -> bool:
    """Whether pair ``index`` shows the second policy as A (drawn from the judging seed)."""
    return bool(np.random.default_rng([int(seed), int(index)]).integers(2))


def frame_steps(steps: int, frames: int) -> list[int]:
    """Control-step indices to render: ``frames`` evenly spaced over 0..steps, both ends."""
    return sorted({int(round(x)) for x in np.linspace(0, steps, frames)})


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def replay_clip(spec: EpisodeSpec, actions: Sequence[dict[str, np.ndarray]], label: str,
                result: Any, frames: int, width: int, height: int) -> Clip:
    """Replay an episode's recorded actions from its seed and render ``frames`` frames.

    Raises:
        ReplayMismatchError: the replay reached other stages or another outcome.
    """
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_ros.evaluation.rollout import perturbations_of
    from clawgym_ros.perturbations.wrappers import wrap
    from clawgym_ros.tasks.registry import get_task

    base = gym.make(get_task(spec.task).env_id, template=spec.template,
                    control_mode=C.CONTROL_DICT).unwrapped
    try:
        perturbations = perturbations_of(spec)
        env = wrap(base, perturbations) if perturbations else base
        _, info = env.reset(seed=spec.seed)
        wanted = set(frame_steps(len(actions), frames))
        images: list[bytes] = []
        times: list[float] = []

        def shoot() -> None:
            images.append(_png(base.backend.render(base.render_camera, width, height)))
            times.append(float(base.backend.time))

        shoot()
        reached = tuple(info.get("stages_reached", ()))
        success = False
        for step, action in enumerate(actions, start=1):
            _, _, terminated, _, info = env.step(action)
            reached = tuple(info.get("stages_reached", reached))
            success = bool(info.get("success", terminated))
            if step in wanted:
                shoot()
    finally:
        base.close()
    if reached != tuple(result.stages_reached) or success != bool(result.success):
        raise ReplayMismatchError(
            f"replaying {label} on {spec.task}/{spec.template} seed {spec.seed} reached "
            f"{list(reached)} (success {success}), the rollout {list(result.stages_reached)} "
            f"(success {result.success}): the episode is not reproducible, so it cannot be "
            "shown")
    return Clip(label, tuple(images), tuple(times), tuple(result.stages),
                tuple(result.stages_reached), bool(result.success), len(actions))


def run_clips(source: PolicySource, specs: Sequence[EpisodeSpec], max_steps: int,
              frames: int, width: int, height: int) -> list[Clip]:
    """Run ``specs`` with one policy (as ``clawgym eval`` does, in this process) and render
    each episode's frame strip."""
    from clawgym_ros.evaluation.rollout import Runner

    runner = Runner(source.load(), RolloutOptions(world=WORLD_TASK, max_steps=max_steps,
                                                  failure_states=False),
                    record_actions=True)
    clips = []
    try:
        for spec in specs:
            result = runner.run(spec)
            clips.append(replay_clip(spec, runner.actions, source.label, result, frames,
                                     width, height))
    finally:
        runner.close()
    return clips


def build_pairs(first: PolicySource, second: PolicySource, specs: Sequence[EpisodeSpec],
                seed: int, max_steps: int = 0, frames: int = 8, width: int = 160,
                height: int = 120,
                progress: Callable[[str], None] | None = None) -> list[Pair]:
    """Both policies on every spec, paired; sides drawn by :func:`shown_order`.

    Raises:
        ConfigError: the same policy twice, bad sizes, a task without a task env;
            ReplayMismatchError.
    """
    if first.label == second.label:
        raise ConfigError("--b", second.label, f"a policy other than --a ({first.label})")
    check_int("--frames", frames, 2, MAX_FRAMES)
    check_int("width", width, 16, 640)
    check_int("height", height, 16, 480)
    clips = []
    for source in (first, second):
        if progress:
            progress(f"rolling out {source.label} on {len(specs)} episodes")
        clips.append(run_clips(source, specs, max_steps, frames, width, height))
    pairs = []
    for k, spec in enumerate(specs):
        one, two = clips[0][k], clips[1][k]
        if shown_order(seed, k):
            one, two = two, one
        pairs.append(Pair(k, spec, one, two))
    return pairs


def session_key(session: str, pair: Pair) -> str:
    """The store's source key of a pair's judgment: one judgment per pair and session."""
    text = f"clawgym-judge\n{session}\n{pair.index}\n{pair.a.policy}\n{pair.b.policy}\n"
    return hashlib.sha256(text.encode()).hexdigest()


def record(run_dir: str | Path, session: str, pair: Pair, choice: str, reason: str = "",
           rater: str = "") -> tuple[int, int]:
    """Validate and store one judgment of ``pair`` (atomically, through the preference
    store).

    Returns:
        (added, judgments in the store); added is 0 when this session judged the pair before.

    Raises:
        ConfigError: a bad choice / reason / rater (nothing written), or the store's limits.
    """
    from clawgym_ros.evaluation.preference import add_judgments, to_judgment

    where = f"judge session {session[:8]}: pair {pair.index}"
    judgment = to_judgment({"item_a": pair.a.policy, "item_b": pair.b.policy,
                            "preferred": choice, "reason": reason, "rater": rater,
                            "context": pair.context}, where)
    return add_judgments(run_dir, [judgment], session_key(session, pair), where)
