"""skrl (pinned test dependency) trains PPO through ``gym.make_vec(..., vectorization_mode=
"async")`` with 2 workers, as skrl takes Gymnasium vector envs (issue 27). skrl's model
instantiators take a flat observation, so the env is made with ``obs_mode="state"``; ~10 s."""

from __future__ import annotations

import gymnasium as gym
import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C

pytest.importorskip("skrl")


def test_skrl_ppo_learns_and_evaluates_on_two_async_workers(tmp_path):
    import torch
    from skrl.agents.torch.base import ExperimentCfg
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer
    from skrl.utils.model_instantiators.torch import deterministic_model, gaussian_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    venv = gym.make_vec(C.ENV_PEG_INSERT, num_envs=2, vectorization_mode="async",
                        obs_mode=C.OBS_MODE_STATE, max_episode_steps=64)
    env = wrap_env(venv, wrapper="gymnasium", verbose=False)
    try:
        assert env.num_envs == 2 and env.action_space.shape == (8,)
        net = [{"name": "net", "input": "OBSERVATIONS", "layers": [64, 64],
                "activations": "tanh"}]
        spaces = {"observation_space": env.observation_space,
                  "action_space": env.action_space, "device": env.device, "network": net}
        models = {"policy": gaussian_model(output="ACTIONS", **spaces),
                  "value": deterministic_model(output="ONE", **spaces)}
        memory = RandomMemory(memory_size=64, num_envs=env.num_envs, device=env.device)
        agent = PPO(models=models, memory=memory, observation_space=env.observation_space,
                    action_space=env.action_space, device=env.device,
                    cfg=PPO_CFG(rollouts=64, learning_epochs=2, mini_batches=2,
                                # not skrl's default ./runs/ of the working directory
                                experiment=ExperimentCfg(directory=str(tmp_path),
                                                         write_interval=0,
                                                         checkpoint_interval=0)))
        trainer = SequentialTrainer(env=env, agents=agent, cfg={
            "timesteps": 128, "headless": True, "disable_progressbar": True,
            "close_environment_at_exit": False})               # closed below
        trainer.train()                                  # 128 x 2 workers = 256 env steps
        rewards = memory.get_tensor_by_name("rewards")
        assert rewards.shape[:2] == (64, 2)
        assert torch.isfinite(rewards).all() and (rewards > 0).any()   # dense reward
        trainer.cfg.timesteps = 64
        trainer.eval()
    finally:
        env.close()
        torch.set_num_threads(threads)
