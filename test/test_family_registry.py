"""One perturbation family registry (issue 19): the family maps are derived from it, and a
family from outside the package registers once and perturbs episodes.

The outside family (a joint-encoder bias) is one module in a temporary folder: its core, its
config and its wrapper, registered with ``@register_family`` on the wrapper. It appears in
``constants.PERTURBATION_FAMILIES`` / ``OBSERVATION_FAMILIES``, ``make`` builds it, ``wrap``
applies it, a mixture and a loop config take it, and an in-process episode runs under it and
records its parameters. One installed with only an entry point is listed before import.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros import perturbations as P
from clawgym_ros.errors import ConfigError

#: The family tables as they were written out before the registry (commit 5eb579c).
OLD_FAMILIES = (C.FAMILY_NONE, C.FAMILY_LIGHTING, C.FAMILY_SENSOR_NOISE, C.FAMILY_GPS_DROPOUT,
                C.FAMILY_DYNAMICS)
OLD_OBSERVATION = (C.FAMILY_SENSOR_NOISE, C.FAMILY_GPS_DROPOUT)
OLD_WRAP_ORDER = (C.FAMILY_DYNAMICS, C.FAMILY_LIGHTING, C.FAMILY_SENSOR_NOISE,
                  C.FAMILY_GPS_DROPOUT)
#: Built-in families added since (backend side, no ROS interposer).
ADDED = (C.FAMILY_CAMERA_POSE, C.FAMILY_COLOUR, C.FAMILY_DISTURBANCE)
FAMILIES_NOW = (*OLD_FAMILIES, *ADDED)
WRAP_ORDER_NOW = (C.FAMILY_DYNAMICS, C.FAMILY_LIGHTING, C.FAMILY_CAMERA_POSE, C.FAMILY_COLOUR,
                  C.FAMILY_DISTURBANCE, C.FAMILY_SENSOR_NOISE, C.FAMILY_GPS_DROPOUT)


def test_derived_maps_are_the_tables_they_replace():
    from clawgym_ros.evaluation import ros_mode
    from clawgym_ros.perturbations import wrappers as W
    from clawgym_ros.perturbations.disturbance import DisturbanceWrapper

    assert C.PERTURBATION_FAMILIES == FAMILIES_NOW
    assert C.OBSERVATION_FAMILIES == OLD_OBSERVATION
    assert dict(P.FAMILIES) == {C.FAMILY_LIGHTING: P.Lighting,
                                C.FAMILY_SENSOR_NOISE: P.SensorNoise,
                                C.FAMILY_GPS_DROPOUT: P.GpsDropout,
                                C.FAMILY_DYNAMICS: P.Dynamics,
                                C.FAMILY_CAMERA_POSE: P.CameraPose,
                                C.FAMILY_COLOUR: P.Colour,
                                C.FAMILY_DISTURBANCE: P.Disturbance}
    assert tuple(W.WRAPPERS) == WRAP_ORDER_NOW
    assert [W.WRAPPERS[f] for f in WRAP_ORDER_NOW] == [
        W.DynamicsWrapper, W.LightingWrapper, W.CameraPoseWrapper, W.ColourWrapper,
        DisturbanceWrapper,
        W.SensorNoiseWrapper, W.GpsDropoutWrapper]
    for family, wrapper in W.WRAPPERS.items():
        assert wrapper.family == family and wrapper.core_cls is P.FAMILIES[family]
    assert ros_mode.interposers() == P.interposer_nodes() == {
        "lighting": "lighting_node", "sensor_noise": "sensor_noise_node",
        "gps_dropout": "gps_dropout_node", "dynamics": "dynamics_node"}
    assert ros_mode.HOLD_FAMILIES == OLD_OBSERVATION
    with pytest.raises(ConfigError, match="family='fog'.*one of lighting, sensor_noise"):
        P.make("fog")


BIAS_MODULE = '''
"""{name}: a constant bias on the joint encoders, drawn per episode."""

import dataclasses

from clawgym_ros import constants as C
from clawgym_ros.perturbations import register_family
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig
from clawgym_ros.perturbations.wrappers import PerturbationWrapper


@dataclasses.dataclass(frozen=True)
class BiasConfig(PerturbationConfig):
    family: str = "{name}"
    bias_rad: float = 0.05              # at intensity 1

    FAMILY = "{name}"


class Bias(Perturbation):
    config_cls = BiasConfig

    def _restore(self):
        self.bias = 0.0

    def _sample_episode(self, rng):
        self.bias = float(self.config.bias_rad * self.intensity * rng.choice([-1.0, 1.0]))

    def _parameters(self):
        return {{"bias_rad": self.bias}}


@register_family(observation=True)
class BiasWrapper(PerturbationWrapper):
    core_cls = Bias
    family = "{name}"

    def _after_step(self, obs, info):
        if C.OBS_JOINT_POS in obs and self.perturbation.enabled:
            obs = {{**obs, C.OBS_JOINT_POS: obs[C.OBS_JOINT_POS] + self.perturbation.bias}}
        return obs, info
'''


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(P, "_REGISTRY", dict(P._REGISTRY))
    yield
    for name in ("toy_bias_family", "toy_ep_bias_family"):
        sys.modules.pop(name, None)


def test_a_family_from_outside_registers_once_and_perturbs_episodes(tmp_path, monkeypatch,
                                                                     clean_registry):
    import gymnasium as gym

    from clawgym_ros.coordinator.config import loop_config_from_dict
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import EpisodeSpec
    from clawgym_ros.perturbations.wrappers import WRAPPERS, wrap
    from clawgym_ros.synthesis.mixture import MixtureSpec

    (tmp_path / "toy_bias_family.py").write_text(
        textwrap.dedent(BIAS_MODULE).format(name="joint_bias"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "joint_bias" not in C.PERTURBATION_FAMILIES
    import toy_bias_family

    assert C.PERTURBATION_FAMILIES == (*FAMILIES_NOW, "joint_bias")
    assert C.OBSERVATION_FAMILIES == (*OLD_OBSERVATION, "joint_bias")
    assert tuple(WRAPPERS) == (*WRAP_ORDER_NOW, "joint_bias")
    assert "joint_bias" not in P.interposer_nodes()      # no ROS node: in-process only
    core = P.make("joint_bias", {"intensity": 1.0, "seed": 3})
    assert isinstance(core, toy_bias_family.Bias)

    # wrap() applies it: the observed joints are the true ones plus the episode's bias.
    env = gym.make(C.ENV_PICK_PLACE, control_mode=C.CONTROL_DICT, template="cube").unwrapped
    wrapped = wrap(env, [core])
    obs, info = wrapped.reset(seed=4)
    bias = info[C.INFO_PERTURBATIONS]["joint_bias"]["parameters"]["bias_rad"]
    assert abs(bias) == pytest.approx(0.05)
    true = env.backend.observation(cameras=())[C.OBS_JOINT_POS]
    np.testing.assert_allclose(obs[C.OBS_JOINT_POS], true + bias)
    env.close()

    # Mixtures and loop configs name it; an episode runs under it and records it.
    assert MixtureSpec.from_entries([{"task": "pick_place", "family": "joint_bias",
                                      "intensity": 0.5}]).cells[0].family == "joint_bias"
    loop = loop_config_from_dict({
        "eval_suite": "smoke", "ranges": {"joint_bias": [0.0, 0.5]},
        "mixture": [{"task": "pick_place", "family": "joint_bias"}]})
    assert loop.ranges == {"joint_bias": (0.0, 0.5)}
    spec = EpisodeSpec(index=0, task=C.TASK_PICK_PLACE, template="cube", split=C.SPLIT_TRAIN,
                       family="joint_bias", families=("joint_bias",), intensity=1.0,
                       schedule="constant", seed=7, perturbation_seed=11)
    result = Runner(PolicySource.parse("scripted:pick_place").load(),
                    RolloutOptions(world="task", max_steps=20)).run(spec)
    assert abs(result.perturbation["joint_bias.bias_rad"]) == pytest.approx(0.05)

    with pytest.raises(ConfigError, match="taken by toy_bias_family:Bias"):
        P.add_family(P.FamilyEntry("joint_bias", "x:Core", "x:Wrapper"))


def test_an_entry_point_family_is_listed_then_loaded_on_first_lookup(tmp_path, monkeypatch,
                                                                     clean_registry):
    (tmp_path / "toy_ep_bias_family.py").write_text(
        textwrap.dedent(BIAS_MODULE).format(name="ep_bias"))
    info = tmp_path / "toy_ep_bias_family-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ep-bias\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{P.ENTRY_POINT_GROUP}]\nep_bias = toy_ep_bias_family:BiasWrapper\n"
        "ep_broken = toy_ep_bias_family:BiasConfig\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "ep_bias" in P.family_names()
    assert "toy_ep_bias_family" not in sys.modules
    assert P.make("ep_bias", {"intensity": 0.5}).config.bias_rad == 0.05
    assert "toy_ep_bias_family" in sys.modules
    with pytest.raises(ConfigError, match="entry point.*not toy_ep_bias_family:BiasConfig"):
        P.family_entry("ep_broken")
