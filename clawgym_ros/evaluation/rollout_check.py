"""A minimal in-process rollout check of a trained policy (pure: no rclpy, no evaluator).

The trainer's acceptance ("a policy trained by ``clawgym train`` succeeds in >= 80% of nominal
pick_place episodes on held-out seeds") needs only: a task env, a Policy, seeds, and the env's
own success flag (``info["success"]``, from the task's stage tracker over the true state). The
full evaluation (perturbation suites, reports, workers) is :mod:`.rollout` and
:mod:`clawgym_ros.orchestration.evaluation`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from clawgym_ros.evaluation.protocol import Policy
from clawgym_ros.evaluation.stats import wilson

#: Control steps allowed per pick_place episode (expert episodes take ~350-400 steps).
DEFAULT_MAX_STEPS = 800


@dataclasses.dataclass(frozen=True)
class EpisodeOutcome:
    """One rollout: its seed, the template drawn, success, stages reached, steps taken."""

    seed: int
    template: str
    success: bool
    stages: tuple[str, ...]
    steps: int


def run_episodes(policy: Policy, seeds: Iterable[int], *, env: Any = None,
                 template: str = "", max_steps: int = DEFAULT_MAX_STEPS) -> list[EpisodeOutcome]:
    """Roll ``policy`` out once per seed on the nominal pick_place env (no perturbations).

    Args:
        policy: anything with ``reset()`` and ``act(obs) -> action``.
        seeds: env reset seeds (keep them disjoint from the training data's seeds).
        env: a task env to use (default: a fresh ``PickPlaceEnv``).
        template: fixed template name; empty = a training template drawn per reset.
        max_steps: control steps before an episode counts as failed.

    Returns:
        One :class:`EpisodeOutcome` per seed; an episode ends at the first successful step.
    """
    if env is None:
        from clawgym_ros.tasks.pick_place import PickPlaceEnv

        env = PickPlaceEnv(template=template)
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        policy.reset()
        success, steps = False, 0
        stages: Sequence[str] = ()
        while steps < max_steps:
            obs, _, _, truncated, info = env.step(policy.act(obs))
            steps += 1
            stages = info.get("stages_reached", ())
            success = bool(info.get("success"))
            if success or truncated:
                break
        out.append(EpisodeOutcome(int(seed), str(env.unwrapped.template.name), success,
                                  tuple(stages), steps))
    return out


def success_rate(outcomes: Sequence[EpisodeOutcome]) -> tuple[float, tuple[float, float]]:
    """Share of successful episodes and its Wilson 95% interval (0 and (0, 1) for none)."""
    est = wilson(sum(o.success for o in outcomes), len(outcomes))
    if est.n == 0:
        return 0.0, (0.0, 1.0)
    return est.value, (est.low, est.high)
