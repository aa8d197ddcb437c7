"""A policy type from outside the package trains end to end through the PolicyModel contract.

Proves docs/extending.md "Add a policy": one file defining and registering the type (here this
test file, and a module installed with an entry point), nothing in clawgym_ros edited.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.errors import CheckpointError, ConfigError  # noqa: E402
from clawgym_ros.training import registry  # noqa: E402
from clawgym_ros.training.bc import train  # noqa: E402
from clawgym_ros.training.checkpoint import load_checkpoint, load_policy  # noqa: E402
from clawgym_ros.training.config import TrainConfig  # noqa: E402
from clawgym_ros.training.policies import PolicyModel, TensorBatch, build_policy  # noqa: E402
from clawgym_ros.training.registry import register_policy  # noqa: E402
from clawgym_ros.training.synthetic import OBS_SPEC, synthetic_table  # noqa: E402
from test.conftest import synthetic_train_run, train_cli  # noqa: E402

TOY = "toy_huber"


@register_policy(TOY)
class ToyHuberPolicy(PolicyModel):
    """A linear head trained with a Huber loss: an architecture and a loss the loop has never
    seen, with an option of its own."""

    @dataclasses.dataclass(frozen=True)
    class Options:
        delta: float = 1.0

        def __post_init__(self) -> None:
            if not self.delta > 0:
                raise ConfigError("policy_options.delta", self.delta, "> 0")

    def __init__(self, spec, stats=None, options=None):
        super().__init__(spec, stats, options)
        self.head = nn.Linear(spec.input_dim, spec.chunk * spec.act_dim)

    def forward(self, obs_n, image=None):
        return self.head(obs_n).view(-1, self.spec.chunk, self.spec.act_dim)

    def loss(self, batch: TensorBatch):
        err = self(batch.obs, batch.image) - batch.target
        per_sample = nn.functional.huber_loss(err, torch.zeros_like(err), reduction="none",
                                              delta=self.options.delta).mean(dim=(1, 2))
        return per_sample, {"max_abs_error": err.detach().abs().max()}


SMALL = dict(hidden=(32,), chunk=1, batch_size=64, log_interval=10, val_interval=20,
             checkpoint_interval=20, val_samples=256, action_shift=0, exclude_obs_keys=(),
             action_mode=C.ACTION_MODE_ABSOLUTE, features=())


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return synthetic_table(tmp_path_factory.mktemp("table"), rows=1200, episode_len=40,
                           groups=2, seed=1)


def test_registered_policy_trains_through_the_contract(table, tmp_path):
    store = ArtifactStore(tmp_path)
    cfg = TrainConfig(steps=60, seed=0, policy=TOY, policy_options={"delta": 0.5}, **SMALL)
    result = train(table, cfg, store, dataset_ids=[], tensorboard=False)
    ckpt = load_checkpoint(store, result.checkpoint_id)
    # The toy's modules and loss, not the built-in ones: only its head, its metric logged.
    assert sorted(k for k in ckpt.weights if not k.endswith(("_mean", "_std"))) == \
        ["head.bias", "head.weight"]
    assert ckpt.spec.type == TOY and dict(ckpt.spec.options) == {"delta": 0.5}
    assert ckpt.meta["train_config"]["policy_options"] == {"delta": 0.5}
    summary = json.loads((result.artifact.path / C.FILE_TRAIN_SUMMARY).read_text())
    history = summary["history"]
    assert all("max_abs_error" in h["policy_metrics"] for h in history)
    assert history[-1]["loss"] < history[0]["loss"]
    # The checkpoint rebuilds with its options and acts through the evaluator's protocol.
    policy = load_policy(store, result.checkpoint_id)
    assert isinstance(policy.model, ToyHuberPolicy) and policy.model.options.delta == 0.5
    action = policy.act({k: np.zeros(w) for k, w in OBS_SPEC.items()})
    assert action[C.ACT_JOINT_TARGET].shape == (7,)
    # Bad options fail before training, naming the field.
    with pytest.raises(ConfigError, match="policy_options.*delta"):
        train(table, dataclasses.replace(cfg, policy_options={"delta": -1.0}), store,
              dataset_ids=[], tensorboard=False)
    with pytest.raises(ConfigError, match="policy_options.*options of the toy_huber policy: "
                                          "delta"):
        train(table, dataclasses.replace(cfg, policy_options={"width": 3}), store,
              dataset_ids=[], tensorboard=False)


def test_a_name_is_registered_once():
    with pytest.raises(ConfigError, match="taken by"):
        @register_policy(TOY)
        class Other(PolicyModel):
            pass
    assert TOY in registry.policy_names()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return synthetic_train_run(tmp_path_factory)


def _train_cli(capsys, run_dir, *extra: str) -> tuple[int, str, str]:
    return train_cli(capsys, run_dir, "--chunk", "2", *extra)


def test_cli_trains_a_registered_policy(run_dir, capsys):
    code, out, err = _train_cli(capsys, run_dir, "--policy", TOY, "--policy-option",
                                "delta=0.25")
    assert code == 0, err
    ckpt = load_checkpoint(ArtifactStore(run_dir[0]), out.split()[-1])
    assert ckpt.spec.type == TOY and ckpt.spec.options == {"delta": 0.25}
    assert ckpt.artifact.manifest.config["policy"] == TOY


def _install_plugin(root, name: str, target: str) -> None:
    """A distribution on sys.path (as pip would install it) with a policy entry point."""
    (root / "toy_policy_plugin.py").write_text(textwrap.dedent('''
        from torch import nn

        from clawgym_ros.training.policies import PolicyModel


        class ZeroMeanPolicy(PolicyModel):
            """Registered only through its entry point (no decorator)."""

            def __init__(self, spec, stats=None, options=None):
                super().__init__(spec, stats, options)
                self.encoder = nn.Linear(spec.input_dim, 16)
                self.head = nn.Linear(16, spec.chunk * spec.act_dim)

            def forward(self, obs_n, image=None):
                out = self.head(self.encoder(obs_n).tanh())
                return out.view(-1, self.spec.chunk, self.spec.act_dim)


        NOT_A_POLICY = 42
    '''))
    info = root / "toy_policy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-policy-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n{name} = toy_policy_plugin:{target}\n"
        "toy_broken = toy_policy_plugin:NOT_A_POLICY\n")


def test_entry_point_policy_trains_from_the_cli(run_dir, capsys, tmp_path, monkeypatch):
    code, _, err = _train_cli(capsys, run_dir, "--policy", "toy_ep")
    assert code != 0 and "policy='toy_ep'" in err and TOY in err  # not installed yet
    _install_plugin(tmp_path, "toy_ep", "ZeroMeanPolicy")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # undone after
    assert "toy_ep" in registry.policy_names()
    code, out, err = _train_cli(capsys, run_dir, "--policy", "toy_ep", "--freeze", "encoder")
    assert code == 0, err
    store = ArtifactStore(run_dir[0])
    ckpt = load_checkpoint(store, out.split()[-1])
    assert ckpt.spec.type == "toy_ep"
    policy = load_policy(store, ckpt.artifact.id)
    assert type(policy.model).__name__ == "ZeroMeanPolicy"
    assert policy.model.type_name == "toy_ep"
    # --freeze encoder kept the plugin's encoder at its seeded init; the head trained.
    init = build_policy(ckpt.spec, seed=0)
    assert torch.equal(init.encoder.weight, ckpt.weights["encoder.weight"])
    assert not torch.equal(init.head.weight, ckpt.weights["head.weight"])
    assert policy.act({k: np.zeros(w) for k, w in OBS_SPEC.items()})[C.ACT_GRIPPER].shape == (1,)
    with pytest.raises(ConfigError, match="PolicyModel subclass"):
        registry.policy_class("toy_broken")


def test_checkpoint_of_an_unregistered_type_is_one_clear_error(table, tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path)
    result = train(table, TrainConfig(steps=5, seed=0, policy=TOY, **SMALL), store,
                   dataset_ids=[], tensorboard=False)
    reg = dict(registry._REGISTRY)
    del reg[TOY]
    monkeypatch.setattr(registry, "_REGISTRY", reg)
    with pytest.raises(CheckpointError, match=f"policy='{TOY}'.*one of mlp, cnn"):
        load_policy(store, result.checkpoint_id)
