"""peg_insert behaviour cloning's recipe parts (docs/results/2026-12-05-peg-insert-bc.md): the
``object_rel_first`` feature (peg-to-hole offset at the millimetre scale, yaw difference at the
degree scale) and its place outside the default feature set. No training, no episodes: < 1 s.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.commands import train as train_cmd  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.training.config import DEFAULT_FEATURES, TrainConfig  # noqa: E402
from clawgym_ros.training.policies import (  # noqa: E402
    FEATURE_OBJECT_REL_FIRST,
    Featurizer,
    feature_dim,
)

LAYOUT = ((C.OBS_TOOL_POSE, 7), (C.OBS_OBJECT_POSES, 14))


def _poses(offset_xy: tuple[float, float], yaw_deg: float) -> np.ndarray:
    """Tool pose, then a peg at yaw 0 and a block ``offset_xy`` away turned by ``yaw_deg``."""
    half = math.radians(yaw_deg) / 2
    tool = [0.5, 0.0, 0.6, 1.0, 0.0, 0.0, 0.0]
    peg = [0.5, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    block = [0.5 + offset_xy[0], offset_xy[1], 0.43, math.cos(half), 0.0, 0.0, math.sin(half)]
    return np.array([tool + peg + block], dtype=np.float32)


def test_object_rel_first_resolves_millimetres_and_degrees():
    featurizer = Featurizer((FEATURE_OBJECT_REL_FIRST,), LAYOUT)
    assert feature_dim((FEATURE_OBJECT_REL_FIRST,), dict(LAYOUT)) == 11
    assert feature_dim((FEATURE_OBJECT_REL_FIRST,), {C.OBS_OBJECT_POSES: 21}) == 22
    assert feature_dim((FEATURE_OBJECT_REL_FIRST,), {C.OBS_OBJECT_POSES: 7}) == 0
    rel = featurizer.numpy(_poses((0.003, -0.001), 0.0))[0, 21:]
    assert len(rel) == 11
    assert np.allclose(rel[:3], [0.003, -0.001, -0.07], atol=1e-6)
    assert np.allclose(rel[3:5], [0.5, -0.25], atol=1e-4)       # d / (|d| + 3 mm)
    assert np.allclose(rel[5:9], [0.0, 1.0, 0.0, 1.0], atol=1e-6)  # sin/cos 2x, 4x of 0
    assert np.allclose(rel[9:], 0.0, atol=1e-6)
    # The yaw parts are odd and monotone over a square's (-45, 45] degrees, the fine one
    # already at 0.4 for one degree; a square turned by 90 degrees is aligned again.
    coarse, fine = [], []
    for deg in (-44, -20, -5, -1, 1, 5, 20, 44):
        out = featurizer.numpy(_poses((0.0, 0.0), deg))[0, 21:]
        coarse.append(out[9])
        fine.append(out[10])
    assert coarse == sorted(coarse) and fine == sorted(fine)
    assert np.allclose(coarse[:4], -np.array(coarse[4:][::-1]), atol=1e-5)
    assert 0.35 < fine[4] < 0.5 and fine[-1] > 0.99
    turned = featurizer.numpy(_poses((0.0, 0.0), 90.0))[0, 21:]
    assert np.allclose(turned[[7, 9, 10]], 0.0, atol=1e-5) and turned[8] > 0.99
    # torch (training) and numpy (RL env) paths agree bit for bit
    obs = _poses((0.0021, 0.0004), 7.5)
    assert np.array_equal(featurizer.numpy(obs), featurizer(torch.from_numpy(obs)).numpy())


def test_object_rel_first_is_opt_in_and_added_from_the_command_line():
    assert FEATURE_OBJECT_REL_FIRST not in DEFAULT_FEATURES
    assert TrainConfig().features == ("object_rel_tool", "goal_rel_tool", "goal_rel_object",
                                      "object_yaw")
    parser = argparse.ArgumentParser()
    train_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["train", "--dataset", "x", "--steps", "10", "--seed", "0",
                              "--out", "r", "--add-feature", FEATURE_OBJECT_REL_FIRST,
                              "--chunk", "10"])
    cfg = train_cmd.build_config(args)
    assert cfg.features == (*DEFAULT_FEATURES, FEATURE_OBJECT_REL_FIRST) and cfg.chunk == 10
    args = parser.parse_args(["train", "--dataset", "x", "--steps", "10", "--seed", "0",
                              "--out", "r", "--add-feature", "hole_pose"])
    with pytest.raises(ConfigError, match="features"):
        train_cmd.build_config(args)
