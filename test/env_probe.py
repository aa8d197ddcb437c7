"""Make envs, reset, step 5 random actions: their observation shapes and summed reward.

Imports gymnasium only, so that run as a script (``python test/env_probe.py ID ...``) it is a
fresh interpreter that makes each env by its "module:id" form, as a subprocess vector env's
worker does; test_rl_sb3 compares its JSON with the same probe in the test process.
"""

from __future__ import annotations

import json
import sys

import gymnasium as gym

EPISODE = 64


def probe(env_ids: list[str], prefix: str = "") -> dict[str, list]:
    """{env id: [{observation key: shape}, summed reward of 5 seeded random steps]}, each env
    made as ``prefix + id``."""
    out = {}
    for env_id in env_ids:
        env = gym.make(prefix + env_id, max_episode_steps=EPISODE)
        obs, _ = env.reset(seed=3)
        env.action_space.seed(3)
        total = sum(float(env.step(env.action_space.sample())[1]) for _ in range(5))
        env.close()
        out[env_id] = [{k: list(v.shape) for k, v in obs.items()}, total]
    return out


if __name__ == "__main__":
    assert "clawgym_ros" not in sys.modules
    print(json.dumps(probe(sys.argv[1:], prefix="clawgym_ros.sim:")))
