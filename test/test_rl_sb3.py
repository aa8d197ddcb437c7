"""Stable-Baselines3 (pinned test dependency) trains on every env as gym.make gives it, with
no wrapper of its own (issue 27): SB3's env checker, PPO and SAC construct, learn 256 steps
and ``evaluate_policy`` runs; PPO through SB3's subprocess vectorization with 2 workers
(an arm task and the GPS task; every env is made by its "module:id" in a fresh process);
``gym.make_vec(..., vectorization_mode="async")`` with 2 workers. Episodes are cut to 64
steps (``max_episode_steps``) so that evaluation is short; `clawgym bench rl --quick` (with
the fine-tuning path's steps/s). ~60 s on 2 cores.
"""

from __future__ import annotations

import json
import tempfile
import warnings

import gymnasium as gym
import numpy as np
import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros.errors import ActionError
from clawgym_ros.sim.registration import ENVS

sb3 = pytest.importorskip("stable_baselines3")
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.vec_env import SubprocVecEnv  # noqa: E402

STEPS = 256
EPISODE = 64


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp_path(tmp_path, monkeypatch):
    """SB3's default logger makes an SB3-<date> folder in the temp directory per learn()."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # tiny MLPs: threads only contend on 2 cores
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_ppo_and_sac_learn_and_evaluate_in_process(env_id):
    env = gym.make(env_id, max_episode_steps=EPISODE)
    with warnings.catch_warnings():
        # the only warning: object_poses (n, 7) is not flat (obs_mode="state" is)
        warnings.simplefilter("ignore", UserWarning)
        check_env(env)
    rewards = {}
    for algo, kwargs in ((sb3.PPO, {"n_steps": 128, "batch_size": 64, "n_epochs": 2}),
                         (sb3.SAC, {"learning_starts": 128, "batch_size": 64,
                                    "buffer_size": 1024})):
        model = algo("MultiInputPolicy", env, seed=0, device="cpu", **kwargs)
        model.learn(STEPS)
        assert model.num_timesteps == STEPS
        mean, std = evaluate_policy(model, env, n_eval_episodes=2, warn=False)
        assert np.isfinite(mean) and np.isfinite(std)
        rewards[algo.__name__] = mean
    if env_id in (C.ENV_TABLETOP, C.ENV_MOBILE_BASE):
        assert set(rewards.values()) == {0.0}             # bare scenes: no task
    else:
        assert all(r > 0.0 for r in rewards.values()), rewards   # dense: progress counts
    env.close()


def test_sac_on_the_state_vector_and_pd_joint_pos():
    env = gym.make(C.ENV_PICK_PLACE, obs_mode=C.OBS_MODE_STATE,
                   control_mode=C.CONTROL_JOINT_POS, max_episode_steps=EPISODE)
    check_env(env)
    model = sb3.SAC("MlpPolicy", env, seed=0, device="cpu", learning_starts=128,
                    batch_size=64, buffer_size=1024)
    model.learn(STEPS)
    mean, _ = evaluate_policy(model, env, n_eval_episodes=1, warn=False)
    assert mean > 0.0
    env.close()


#: SB3's subprocess vectorization with PPO on an arm task and the GPS task (the arm and the
#: mobile base); every env in a fresh worker process: test_every_env_is_made_by_its_module_id.
SUBPROC_ENVS = (C.ENV_PICK_PLACE, C.ENV_GPS_NAV)


@pytest.mark.parametrize("env_id", SUBPROC_ENVS)
def test_ppo_with_two_subprocess_workers(env_id):
    # The "module:id" form imports clawgym_ros.sim in each worker (forkserver start).
    venv = make_vec_env(f"clawgym_ros.sim:{env_id}", n_envs=2, seed=0,
                        vec_env_cls=SubprocVecEnv,
                        env_kwargs={"max_episode_steps": EPISODE})
    try:
        model = sb3.PPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=2,
                        seed=0, device="cpu")
        model.learn(STEPS)
        assert model.num_timesteps == STEPS
        mean, _ = evaluate_policy(model, venv, n_eval_episodes=2, warn=False)
        assert mean > 0.0
    finally:
        venv.close()


def test_every_env_is_made_by_its_module_id_in_a_fresh_process():
    """What a subprocess vector env's worker does, for every env, in one fresh interpreter
    that never imported clawgym_ros (one start instead of two workers per env): the same
    observation layout and rewards as here."""
    import subprocess
    import sys
    from pathlib import Path

    from test.env_probe import probe

    child = subprocess.run([sys.executable, str(Path(__file__).with_name("env_probe.py")),
                            *sorted(ENVS)], capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, child.stderr[-2000:]
    remote = json.loads(child.stdout.splitlines()[-1])
    assert list(remote) == sorted(ENVS)
    assert remote == probe(sorted(ENVS))


def test_gym_make_vec_async_with_two_workers():
    envs = gym.make_vec(C.ENV_PEG_INSERT, num_envs=2, vectorization_mode="async",
                        max_episode_steps=20)
    try:
        assert envs.single_action_space == gym.spaces.Box(-1.0, 1.0, (8,), np.float32)
        assert envs.action_space.shape == (2, 8)
        obs, infos = envs.reset(seed=[1, 2])
        assert obs[C.OBS_JOINT_POS].shape == (2, 7)
        envs.action_space.seed(0)
        total = np.zeros(2)
        for _ in range(20):
            obs, reward, terminated, truncated, infos = envs.step(envs.action_space.sample())
            total += reward
        assert truncated.all() and (total > 0).all()
        assert infos[C.INFO_CLIPPED_STEPS].tolist() == [0, 0]
        obs, reward, *_ = envs.step(envs.action_space.sample())    # next-step autoreset
        assert obs[C.OBS_JOINT_POS].shape == (2, 7) and reward.tolist() == [0.0, 0.0]
        nan = np.zeros((2, 8), np.float32)
        nan[1, 2] = np.nan
        with pytest.raises(ActionError, match="not finite at arm_joint_3_delta"):
            envs.step(nan)                     # the worker's error, re-raised as itself
    finally:
        envs.close()


def test_bench_rl_quick_reports_ppo_beside_raw_steps_per_s(capsys):
    from clawgym_ros.cli import main

    assert main(["bench", "rl", "--json", "--quick"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["area"] == "rl" and result["library"] == "stable-baselines3 2.9.2"
    assert result["raw_env_steps_per_s"] > 0
    for table in ("raw_vec_steps_per_s", "ppo_steps_per_s", "ppo_over_raw"):
        assert set(result[table]) == {"1", "2"} and min(result[table].values()) > 0
    # PPO cannot step the env faster than the env alone
    assert max(result["ppo_over_raw"].values()) < 1.0
    # The fine-tuning path itself (direct, the default, and residual, each with its mode's
    # settings; quick: 1 worker, two rollouts), each run beside a raw env figure of its own.
    speed = result["finetune_throughput"]
    assert speed["default_mode"] == "direct" and speed["rollouts_per_run"] == 2
    assert speed["settings"]["direct"]["value_epochs"] == 10
    assert speed["settings"]["residual"]["value_epochs"] == 0
    for mode in ("residual", "direct"):
        assert speed["settings"][mode]["n_steps"] == 128
        assert speed["control_steps_per_run"][mode]["1"] >= 256
    for table in ("raw_env_steps_per_s", "steps_per_s", "over_raw", "end_to_end_steps_per_s"):
        assert set(speed[table]) == {"residual", "direct"}
        assert all(set(v) == {"1"} and min(v.values()) > 0 for v in speed[table].values())
    for mode, by_workers in speed["over_raw"].items():
        expected = speed["steps_per_s"][mode]["1"] / speed["raw_env_steps_per_s"][mode]["1"]
        assert by_workers["1"] == pytest.approx(expected, abs=1e-3)
        assert speed["cpu_over_raw"][mode] > 0
    # Fine-tuning from BC vs PPO from scratch at the same budget, same held-out seeds.
    tune = result["finetune"]
    assert tune["budget_env_steps"] == 256 and tune["eval_episodes"] == 2
    for arm in ("bc", "bc_plus_rl", "ppo_from_scratch"):
        assert 0.0 <= tune[arm]["success"] <= 1.0
        low, high = tune[arm]["ci95"]
        assert low <= tune[arm]["success"] <= high
    assert tune["bc_plus_rl"]["train_episodes"] >= 1 and tune["bc_plus_rl"]["mode"] == "direct"
    assert tune["bc_trained_here"]["demonstrations"] >= 1
