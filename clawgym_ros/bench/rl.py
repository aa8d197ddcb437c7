"""RL library overhead: Stable-Baselines3 PPO environment steps/s on PickPlace beside raw env
steps/s, with 1 and 2 workers.

All runs use the env as ``gym.make`` gives it (flat Box action, dense reward, dict
observation, 1500-step episodes) and random or learned actions:

* ``raw_env_steps_per_s``: one env in this process, random actions (the ceiling);
* ``raw_vec_steps_per_s``: SB3's ``SubprocVecEnv`` stepping random actions, no learner
  (vectorization cost without learning), for 1 and 2 workers (1 worker = ``DummyVecEnv``);
* ``ppo_steps_per_s``: ``PPO("MultiInputPolicy")`` ``learn`` with SB3's defaults (2048 steps
  per rollout and worker, 10 epochs of 64-sample batches), timesteps / wall time of
  ``learn``: policy inference, rollout buffer and the gradient updates included.

Torch uses one thread (the learner shares the 2 cores with the env workers; more threads
only contend). Run sizes are in the result. The success of a short PPO/SAC run from a BC
checkpoint against one from scratch belongs to RL fine-tuning (issue 22) and is not measured
here.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


def _rate(steps: int, seconds: float) -> float:
    return round(steps / seconds, 1)


def bench_rl(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    """Measure raw and SB3 PPO env steps/s on PickPlace with 1 and 2 workers."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    import gymnasium as gym
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_ros import constants as C

    env_id = C.ENV_PICK_PLACE
    raw_steps = 200 if quick else 3000
    n_steps = 64 if quick else 2048
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    result: dict[str, Any] = {"env_id": env_id, "library": f"stable-baselines3 {sb3.__version__}",
                              "algorithm": "PPO MultiInputPolicy", "torch_threads": 1,
                              "ppo_n_steps_per_worker": n_steps, "raw_steps": raw_steps}
    try:
        env = gym.make(env_id)
        env.reset(seed=seed)
        env.action_space.seed(seed)
        actions = [env.action_space.sample() for _ in range(raw_steps)]
        start = time.perf_counter()
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        result["raw_env_steps_per_s"] = _rate(raw_steps, time.perf_counter() - start)
        env.close()
        result["raw_vec_steps_per_s"], result["ppo_steps_per_s"] = {}, {}
        for workers in (1, 2):
            venv = make_vec_env(f"clawgym_ros.sim:{env_id}", n_envs=workers, seed=seed,
                                vec_env_cls=DummyVecEnv if workers == 1 else SubprocVecEnv)
            try:
                venv.reset()
                rng = np.random.default_rng(seed)
                rounds = raw_steps // workers
                batch = rng.uniform(-1, 1, (rounds, workers, 8)).astype(np.float32)
                start = time.perf_counter()
                for a in batch:
                    venv.step(a)
                result["raw_vec_steps_per_s"][str(workers)] = _rate(
                    rounds * workers, time.perf_counter() - start)
                model = sb3.PPO("MultiInputPolicy", venv, n_steps=n_steps, seed=seed,
                                device="cpu")
                total = 2 * n_steps * workers            # two rollouts and updates
                start = time.perf_counter()
                model.learn(total)
                result["ppo_steps_per_s"][str(workers)] = _rate(
                    model.num_timesteps, time.perf_counter() - start)
            finally:
                venv.close()
    finally:
        torch.set_num_threads(threads)
    raw = result["raw_env_steps_per_s"]
    result["ppo_over_raw"] = {w: round(v / raw, 3) for w, v in result["ppo_steps_per_s"].items()}
    result["not_measured"] = ("success of a fixed-budget PPO/SAC run from the BC checkpoint vs "
                              "from scratch: RL fine-tuning, issue 22")
    return result
