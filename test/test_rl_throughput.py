"""The residual RL env's numpy step path (issue 22, RL steps/s): what it computes every control
step must be the torch path's values bit for bit, or fine-tuned checkpoint ids would change.
No training: a randomly initialized BC ``mlp`` with every derived feature and relative joint
targets over a real pick_place episode. ~2 s on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.training.policies import (  # noqa: E402
    FEATURES,
    Featurizer,
    PolicySpec,
    build_policy,
    flatten_obs,
    unflatten_action,
)
from clawgym_ros.training.residual import residual_spec  # noqa: E402

#: pick_place's observation and action layout (what its BC checkpoints have)
OBS_LAYOUT = ((C.OBS_JOINT_POS, 7), (C.OBS_JOINT_VEL, 7), (C.OBS_GRIPPER, 1),
              (C.OBS_TOOL_POSE, 7), (C.OBS_OBJECT_POSES, 14), (C.OBS_PLACE_GOAL, 3))


def _residual_policy(rng: np.random.Generator):
    base = PolicySpec(type=C.POLICY_MLP, obs_dim=39, act_dim=15, hidden=(32, 32), chunk=5,
                      features=tuple(FEATURES), obs_layout=OBS_LAYOUT, relative=((0, 0, 7),))
    stats = {"obs_mean": rng.normal(size=base.input_dim).astype(np.float32),
             "obs_std": rng.uniform(0.1, 2.0, base.input_dim).astype(np.float32),
             "action_mean": rng.normal(size=15).astype(np.float32),
             "action_std": rng.uniform(0.01, 1.0, 15).astype(np.float32)}
    policy = build_policy(residual_spec(base, [0.05] * 14 + [0.02], (16, 16)), seed=0)
    policy.base.load_state_dict({**build_policy(base, stats, seed=1).state_dict()})
    return policy.eval()


def test_featurizer_numpy_equals_forward_bit_for_bit():
    rng = np.random.default_rng(0)
    featurizer = Featurizer(tuple(FEATURES), OBS_LAYOUT)
    for batch in (1, 1, 1, 3, 17):
        obs = rng.normal(size=(batch, 39)).astype(np.float32)
        with torch.inference_mode():
            expected = featurizer(torch.from_numpy(obs)).numpy()
        got = featurizer.numpy(obs)
        assert got.dtype == np.float32 and np.array_equal(got, expected)


def test_residual_numpy_step_path_equals_the_torch_path_over_an_episode():
    """residual_input_numpy / combine_numpy (the RL env's per-step path) against
    residual_input / combine (what evaluation runs), 60 control steps of pick_place, chunk
    refills included; a non-zero residual head so the corrections are not all zero."""
    from clawgym_ros.tasks.pick_place import PickPlaceEnv

    rng = np.random.default_rng(1)
    torch_path, numpy_path = _residual_policy(rng), _residual_policy(np.random.default_rng(1))
    obs_spec = dict(OBS_LAYOUT)
    action_spec = {C.ACT_JOINT_TARGET: 7, C.ACT_JOINT_VEL: 7, C.ACT_GRIPPER: 1}
    env = PickPlaceEnv()
    obs, _ = env.reset(seed=3)
    try:
        for step in range(60):
            state = flatten_obs(obs, obs_spec)
            with torch.inference_mode():
                x_t, base_t = torch_path.residual_input(torch.from_numpy(state).unsqueeze(0))
            x_n, base_n = numpy_path.residual_input_numpy(state)
            assert np.array_equal(x_n, x_t[0].numpy()), step
            assert np.array_equal(base_n, base_t[0].numpy()), step
            correction = rng.uniform(-1.5, 1.5, 15).astype(np.float32)   # clipped to [-1, 1]
            with torch.inference_mode():
                command_t = torch_path.combine(base_t, torch.from_numpy(correction)[None])
            command_n = numpy_path.combine_numpy(base_n, correction)
            assert np.array_equal(command_n, command_t[0].numpy()), step
            obs, *_ = env.step(unflatten_action(command_n.astype(np.float64), action_spec))
    finally:
        env.close()
