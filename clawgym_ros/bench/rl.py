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
only contend). Run sizes are in the result.

``finetune_throughput``: environment steps/s of the fine-tuning path itself, as ``clawgym
train --finetune rl`` runs it (:func:`clawgym_ros.training.rl.finetune`: the task env with the
stage-wise reward, the BC policy in the env, SB3 PPO with each mode's defaults), direct (the
default: one PPO step per BC chunk) and residual, 1 and 2 workers, each run beside a
raw env measurement taken just before it (``over_raw``: the run's control steps/s over that
raw figure). The rate is control steps over ``learn``'s wall time (rollouts and updates;
worker start-up and the checkpoint commit are in ``end_to_end_steps_per_s``). With 1 worker
everything runs in this process, so ``cpu_over_raw`` (CPU time per step, raw over RL) says
the same with far less sensitivity to other jobs on the machine.

``finetune``: the success of a fixed budget of PPO environment steps started from a BC
checkpoint (:mod:`clawgym_ros.training.rl` with its defaults, as ``clawgym train --finetune rl``)
against the same budget of PPO from scratch (``gym.make`` env as is, flat action, dense
reward), both evaluated deterministically on the same held-out nominal pick_place seeds
(:data:`EVAL_SEEDS_START`...), beside the BC checkpoint alone. The BC checkpoint is
``--checkpoint ID --run-dir DIR`` or one trained here (:data:`BC_DEMOS` demonstrations,
:data:`BC_STEPS` steps of the default recipe).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

#: Held-out env seeds of the fine-tuning comparison (the acceptance tests' range).
EVAL_SEEDS_START = 7_000_000
#: BC checkpoint trained by the benchmark when none is given: demonstrations, steps.
BC_DEMOS, BC_STEPS = 40, 3000
#: Fine-tuning budget (environment steps) and evaluation episodes: full, quick.
FINETUNE_FULL, FINETUNE_QUICK = (60_000, 30), (256, 2)
#: Rollouts per fine-tuning throughput run (the run's control steps: rollouts x the mode's
#: ``n_steps`` x workers; with direct mode's two critic-only warm-up updates, the third
#: rollout's update is PPO's), and raw env steps measured before each run: full, quick.
THROUGHPUT_ROLLOUTS = 3
THROUGHPUT_FULL, THROUGHPUT_QUICK = (THROUGHPUT_ROLLOUTS, 3000), (2, 200)
#: Worker counts of the throughput runs: full, quick (2 workers' start-up alone, every
#: worker importing torch and MuJoCo, outlasts a quick run many times over).
WORKERS_FULL, WORKERS_QUICK = (1, 2), (1,)
#: Settings of the quick runs (small rollouts, so that a few hundred steps include updates).
QUICK_PPO = {"n_steps": 128, "batch_size": 64}


def _rate(steps: int, seconds: float) -> float:
    return round(steps / seconds, 1)


def bench_rl(quick: bool = False, seed: int = 0, checkpoint: str = "",
             run_dir: str | None = None) -> dict[str, Any]:
    """Measure raw and SB3 PPO env steps/s on PickPlace with 1 and 2 workers, the fine-tuning
    path's env steps/s (residual and direct, 1 and 2 workers) beside raw env steps/s, and the
    success of fine-tuning a BC checkpoint against PPO from scratch at the same budget."""
    import tempfile

    result = _throughput(quick, seed)
    with tempfile.TemporaryDirectory(prefix="clawgym_bench_rl_") as tmp:
        made: dict[str, Any] = {}
        if not checkpoint:
            from clawgym_ros.bench.eval import train_pick_place_checkpoint

            run_dir = tmp
            demos, steps = (2, 40) if quick else (BC_DEMOS, BC_STEPS)
            checkpoint, made = train_pick_place_checkpoint(tmp, demos, steps, seed,
                                                           tensorboard=False)
        result["finetune_throughput"] = finetune_throughput(quick, seed, checkpoint,
                                                            run_dir or "")
        result["finetune"] = bench_finetune(quick, seed, checkpoint, run_dir or "")
        if made:
            result["finetune"]["bc_trained_here"] = made
    return result


def _raw_env(env_id: str, steps: int, seed: int) -> tuple[float, float]:
    """(steps/s, steps per CPU second) of one env in this process stepping random actions
    (the env as ``gym.make`` gives it)."""
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401  (registers the envs)

    env = gym.make(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]
    start, cpu = time.perf_counter(), time.process_time()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    env.close()
    return _rate(steps, wall), _rate(steps, max(cpu, 1e-9))


def finetune_throughput(quick: bool, seed: int, checkpoint: str,
                        run_dir: str) -> dict[str, Any]:
    """Control steps/s of ``clawgym train --finetune rl`` (direct and residual, each with its
    mode's default settings; 1 and 2 workers) on pick_place from ``checkpoint``, each beside a
    raw env figure taken just before it (see the module docstring). A run is
    :data:`THROUGHPUT_ROLLOUTS` rollouts long (``n_steps`` x workers control steps each, so
    the figure includes the PPO updates in their usual proportion)."""
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.training.rl import DEFAULT_MODE, MODES, FinetuneConfig, finetune

    rollouts, raw_steps = THROUGHPUT_QUICK if quick else THROUGHPUT_FULL
    extra: dict[str, Any] = {**QUICK_PPO, "max_episode_steps": 100} if quick else {}
    checkpoint = ArtifactStore(run_dir).resolve(checkpoint, C.KIND_CHECKPOINT).id
    out: dict[str, Any] = {"env_id": C.ENV_PICK_PLACE, "checkpoint": checkpoint,
                           "default_mode": DEFAULT_MODE, "rollouts_per_run": rollouts,
                           "raw_steps": raw_steps, "settings": {}, "control_steps_per_run": {},
                           "raw_env_steps_per_s": {}, "steps_per_s": {}, "over_raw": {},
                           "end_to_end_steps_per_s": {}, "cpu_over_raw": {}}
    for mode in MODES:
        probe = FinetuneConfig(base_checkpoint=checkpoint, steps=1, seed=seed, mode=mode,
                               **extra)
        out["settings"][mode] = {k: getattr(probe, k) for k in (
            "n_steps", "batch_size", "n_epochs", "target_kl", "value_epochs", "critic_warmup",
            "max_episode_steps")}
        for table in ("control_steps_per_run", "raw_env_steps_per_s", "steps_per_s",
                      "over_raw", "end_to_end_steps_per_s"):
            out[table][mode] = {}
        for workers in WORKERS_QUICK if quick else WORKERS_FULL:
            steps = rollouts * probe.n_steps * workers
            raw, raw_cpu = _raw_env(C.ENV_PICK_PLACE, raw_steps, seed)
            cfg = FinetuneConfig(base_checkpoint=checkpoint, steps=steps, seed=seed,
                                 workers=workers, mode=mode, **extra)
            start = time.perf_counter()
            tuned = finetune(run_dir, cfg, tensorboard=False)
            total = time.perf_counter() - start
            w = str(workers)
            out["control_steps_per_run"][mode][w] = tuned.timesteps
            out["raw_env_steps_per_s"][mode][w] = raw
            out["steps_per_s"][mode][w] = round(tuned.steps_per_s, 1)
            out["over_raw"][mode][w] = round(tuned.steps_per_s / raw, 3)
            out["end_to_end_steps_per_s"][mode][w] = _rate(tuned.timesteps, total)
            if workers == 1:
                rl_cpu = tuned.timesteps / max(tuned.learn_cpu_s, 1e-9)
                out["cpu_over_raw"][mode] = round(rl_cpu / raw_cpu, 3)
    return out


def _throughput(quick: bool, seed: int) -> dict[str, Any]:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    import clawgym_ros.sim  # noqa: F401  (registers the envs)
    from clawgym_ros import constants as C
    from clawgym_ros.training.rl import silent_logger

    env_id = C.ENV_PICK_PLACE
    raw_steps = 200 if quick else 3000
    n_steps = 64 if quick else 2048
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    result: dict[str, Any] = {"env_id": env_id, "library": f"stable-baselines3 {sb3.__version__}",
                              "algorithm": "PPO MultiInputPolicy", "torch_threads": 1,
                              "ppo_n_steps_per_worker": n_steps, "raw_steps": raw_steps}
    try:
        result["raw_env_steps_per_s"] = _raw_env(env_id, raw_steps, seed)[0]
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
                model.set_logger(silent_logger())
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
    return result


def _success(act: Any, episodes: int, max_steps: int) -> dict[str, Any]:
    """Deterministic success of ``act(env, obs) -> action`` on the held-out pick_place seeds
    (the env as ``gym.make`` gives it: flat action)."""
    import gymnasium as gym

    from clawgym_ros import constants as C
    from clawgym_ros.evaluation.rollout_check import EpisodeOutcome, success_rate

    env = gym.make(C.ENV_PICK_PLACE, max_episode_steps=max_steps)
    outcomes = []
    for seed in range(EVAL_SEEDS_START, EVAL_SEEDS_START + episodes):
        obs, _ = env.reset(seed=seed)
        steps, success = 0, False
        while True:
            obs, _, terminated, truncated, info = env.step(act(obs))
            steps += 1
            success = bool(info.get("success"))
            if terminated or truncated:
                break
        outcomes.append(EpisodeOutcome(seed, "", success, (), steps))
    env.close()
    rate, (low, high) = success_rate(outcomes)
    return {"success": round(rate, 3), "ci95": [round(low, 3), round(high, 3)],
            "episodes": episodes}


def bench_finetune(quick: bool, seed: int, checkpoint: str, run_dir: str) -> dict[str, Any]:
    """Success after a fixed PPO budget from the BC ``checkpoint`` in ``run_dir`` (fine-tuning
    with its defaults) vs from scratch."""
    import gymnasium as gym
    import stable_baselines3 as sb3
    import torch

    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.evaluation.rollout_check import DEFAULT_MAX_STEPS, run_episodes, success_rate
    from clawgym_ros.training.checkpoint import load_policy
    from clawgym_ros.training.rl import FinetuneConfig, finetune, silent_logger

    budget, episodes = FINETUNE_QUICK if quick else FINETUNE_FULL
    max_steps = 100 if quick else DEFAULT_MAX_STEPS
    seeds = range(EVAL_SEEDS_START, EVAL_SEEDS_START + episodes)
    out: dict[str, Any] = {"budget_env_steps": budget, "eval_episodes": episodes,
                           "eval_max_steps": max_steps, "eval_seeds_start": EVAL_SEEDS_START}
    store = ArtifactStore(run_dir)

    def rate(policy: Any) -> dict[str, Any]:
        outcomes = run_episodes(policy, seeds, max_steps=max_steps)
        value, (low, high) = success_rate(outcomes)
        return {"success": round(value, 3), "ci95": [round(low, 3), round(high, 3)]}

    out["bc"] = {"checkpoint": store.resolve(checkpoint, C.KIND_CHECKPOINT).id,
                 **rate(load_policy(store, checkpoint))}
    start = time.perf_counter()
    cfg = FinetuneConfig(base_checkpoint=checkpoint, steps=budget, seed=seed,
                         max_episode_steps=max_steps,
                         **(QUICK_PPO if quick else {}))
    tuned = finetune(run_dir, cfg, tensorboard=False)
    out["bc_plus_rl"] = {"checkpoint": tuned.checkpoint_id, "mode": cfg.mode,
                         "train_s": round(time.perf_counter() - start, 1),
                         "train_episodes": tuned.episodes,
                         **rate(load_policy(store, tuned.checkpoint_id))}
    # PPO from scratch, same budget, the env as gym.make gives it.
    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = gym.make(C.ENV_PICK_PLACE, max_episode_steps=max_steps)
        model = sb3.PPO("MultiInputPolicy", env, seed=seed, device="cpu",
                        **(QUICK_PPO if quick else {}))
        model.set_logger(silent_logger())
        model.learn(budget)
        env.close()
        scratch = _success(lambda obs: model.predict(obs, deterministic=True)[0],
                           episodes, max_steps)
    finally:
        torch.set_num_threads(threads)
    out["ppo_from_scratch"] = {"train_s": round(time.perf_counter() - start, 1),
                               "success": scratch["success"], "ci95": scratch["ci95"]}
    return out
