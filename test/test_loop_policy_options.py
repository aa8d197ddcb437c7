"""The loop takes any registered policy type and its options to the trainer (issue 19).

A plugin policy with an option of its own, installed as a distribution with only an entry
point: the loop config accepts it and checks its options with the type's own ``Options``
class (one line naming file, field, value and what is allowed); the runner's Train goal
carries the options, a checkpoint trained with other options is not reused; trainer_node
in its own process trains the plugin with the options of a Train goal.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.artifacts import ArtifactStore  # noqa: E402
from clawgym_ros.coordinator.config import load_loop_config, loop_config_from_dict  # noqa: E402
from clawgym_ros.coordinator.runner import LoopRunner, find_checkpoint  # noqa: E402
from clawgym_ros.errors import ConfigError  # noqa: E402
from clawgym_ros.training import registry  # noqa: E402
from test.conftest import ROOT  # noqa: E402
from test.test_coordinator_runner import ToyExecutor, loop_cfg  # noqa: E402

PLUGIN = "toy_loop_huber"


def install_plugin(root: Path) -> None:
    """A distribution on ``root`` (as pip would install it) whose policy type has an option
    ``delta`` (> 0) and is registered only through its entry point."""
    (root / "toy_loop_plugin.py").write_text(textwrap.dedent('''
        import dataclasses

        import torch
        from torch import nn

        from clawgym_ros.errors import ConfigError
        from clawgym_ros.training.policies import PolicyModel


        class HuberPolicy(PolicyModel):
            @dataclasses.dataclass(frozen=True)
            class Options:
                delta: float = 1.0

                def __post_init__(self):
                    if not (isinstance(self.delta, (int, float)) and self.delta > 0):
                        raise ConfigError("policy_options.delta", self.delta, "> 0")

            def __init__(self, spec, stats=None, options=None):
                super().__init__(spec, stats, options)
                self.head = nn.Linear(spec.input_dim, spec.chunk * spec.act_dim)

            def forward(self, obs_n, image=None):
                return self.head(obs_n).view(-1, self.spec.chunk, self.spec.act_dim)

            def loss(self, batch):
                err = self(batch.obs, batch.image) - batch.target
                return nn.functional.huber_loss(
                    err, torch.zeros_like(err), reduction="none",
                    delta=self.options.delta).mean(dim=(1, 2)), {}
    '''))
    info = root / "toy_loop_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-loop-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n{PLUGIN} = toy_loop_plugin:HuberPolicy\n")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin installed for this test (the registry is restored afterwards)."""
    root = tmp_path / "site"
    root.mkdir()
    install_plugin(root)
    monkeypatch.syspath_prepend(str(root))
    # The built-in types register on import: import them before the registry is copied, or
    # a first import inside the test fills only the copy and the restored registry lacks them
    # for every later test of this process.
    import clawgym_ros.training.policies  # noqa: F401

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return root


def _write_loop(tmp_path: Path, policy_lines: str) -> Path:
    path = tmp_path / "loop.yaml"
    path.write_text("loop:\n  name: opts\n  eval_suite: smoke\n  mixture:\n"
                    "    - {task: pick_place, family: none}\n" + policy_lines)
    return path


def test_loop_config_takes_a_registered_type_and_checks_its_options(plugin, tmp_path):
    cfg = load_loop_config(_write_loop(
        tmp_path, f"  policy: {PLUGIN}\n  policy_options: {{delta: 0.5}}\n"))
    assert cfg.policy == PLUGIN and cfg.policy_options == {"delta": 0.5}
    assert cfg.to_dict()["policy_options"] == {"delta": 0.5}
    assert loop_config_from_dict(cfg.to_dict()) == cfg          # loop.json reads back
    # The type's defaults need no options.
    assert load_loop_config(_write_loop(tmp_path, f"  policy: {PLUGIN}\n")).policy_options == {}
    # Each bad value is one error naming the file, the field, the value and what is allowed.
    for lines, field, allowed in (
            # (other registered types may stand between: other tests register theirs)
            ("  policy: huber9\n", "policy", "one of mlp, cnn, "),
            (f"  policy: {PLUGIN}\n  policy_options: {{width: 3}}\n", "policy_options.width",
             f"options of the {PLUGIN} policy: delta"),
            (f"  policy: {PLUGIN}\n  policy_options: {{delta: -1}}\n", "policy_options.delta",
             "> 0"),
            ("  policy: mlp\n  policy_options: {delta: 0.5}\n", "policy_options.delta",
             "options of the mlp policy: relative_base"),
            (f"  policy: {PLUGIN}\n  policy_options: [1]\n", "policy_options",
             "a mapping of option name to value")):
        path = _write_loop(tmp_path, lines)
        with pytest.raises(ConfigError) as err:
            load_loop_config(path)
        assert (err.value.field, err.value.source) == (field, str(path)), str(err.value)
        assert allowed in err.value.allowed, str(err.value)
        assert field != "policy" or PLUGIN in err.value.allowed, str(err.value)
        assert "\n" not in str(err.value)


def test_a_loop_without_options_keeps_its_config_id(tmp_path):
    """loop.json of a config without policy options is what it was before they existed (its
    config artifact id decides whether a run directory resumes)."""
    cfg = loop_cfg(eval_suite="smoke")          # a suite name: no path in loop.json
    assert "policy_options" not in cfg.to_dict()
    # The id before policy options existed (commit 5eb579c); a new LoopConfig field must
    # keep it, or say why run directories of earlier loops no longer resume.
    assert LoopRunner(cfg, tmp_path, ToyExecutor()).config_artifact() == \
        "168f55edcb1bb6b3584eaf685d60262e717eb25adecf7bfd49bad281a3e6afa1"


class RecordingExecutor(ToyExecutor):
    """ToyExecutor that records Train goals; its checkpoints record the policy options as
    training does (TrainConfig.to_json: only when set)."""

    def __init__(self):
        super().__init__()
        self.train_goals = []

    def train(self, goal, progress):
        self.train_goals.append(goal)
        checkpoint_id = super().train(goal, progress)
        if not goal.policy_options:
            return checkpoint_id
        store = ArtifactStore(goal.run_dir)
        art = store.get(checkpoint_id)
        content = {**json.loads(art.file("toy.json").read_text()),
                   "policy_options": goal.policy_options}
        return store.put_files(
            C.KIND_CHECKPOINT, {"toy.json": json.dumps(content, sort_keys=True).encode()},
            config={**art.manifest.config, "policy_options": goal.policy_options},
            seeds={"train": goal.seed}, parents=art.manifest.parents).id


def test_runner_sends_the_options_and_reuses_only_a_checkpoint_with_the_same(plugin,
                                                                             tmp_path):
    cfg = loop_cfg(iterations=1, policy=PLUGIN, policy_options={"delta": 0.25})
    ex = RecordingExecutor()
    state = LoopRunner(cfg, tmp_path, ex).run()
    (goal,) = ex.train_goals
    assert (goal.policy, goal.policy_options) == (PLUGIN, {"delta": 0.25})
    assert json.loads(goal.policy_options_json) == {"delta": 0.25}
    store = ArtifactStore(tmp_path)
    checkpoint_id = state.iterations[0]["checkpoint_id"]
    assert find_checkpoint(store, goal) == checkpoint_id
    assert find_checkpoint(store, dataclasses.replace(goal, policy_options={"delta": 1.0})) \
        is None
    # (the toy's checkpoint without options, from which this one was made, is found instead)
    assert find_checkpoint(store, dataclasses.replace(goal, policy_options={})) \
        not in (None, checkpoint_id)
    assert dataclasses.replace(goal, policy_options={}).policy_options_json == ""


def test_policy_options_json_is_read_strictly():
    assert registry.policy_options_from_json("") == {}
    assert registry.policy_options_from_json('{"delta": 0.5}') == {"delta": 0.5}
    for text in ("[1]", "{delta: 1}", "0.5"):
        with pytest.raises(ConfigError, match="policy_options_json.*JSON object"):
            registry.policy_options_from_json(text)


def test_rl_lever_on_a_command_relative_policy_needs_direct_mode():
    """Residual RL refuses a command-relative checkpoint; the config says so when read rather
    than at the iteration where the RL lever first fires."""
    command = {"relative_base": "command"}
    with pytest.raises(ConfigError, match=r"rl\.options\.mode='residual'.*direct"):
        loop_cfg(policy_options=command, rl={"share": 0.3, "options": {"mode": "residual"}})
    cfg = loop_cfg(policy_options=command, rl={"share": 0.3, "options": {"mode": "direct"}})
    assert cfg.rl.options == {"mode": "direct"}
    loop_cfg(policy_options=command, rl={"share": 0.3})      # direct, the default mode
    loop_cfg(policy_options=command)                         # no RL lever: nothing to refuse
    loop_cfg(rl={"share": 0.3, "options": {"mode": "residual"}})   # observation-relative


@pytest.mark.ros
def test_trainer_node_trains_a_plugin_with_the_goals_options(plugin, procs, rclpy_context,
                                                             tmp_path):
    from action_msgs.msg import GoalStatus

    from clawgym_interfaces.action import Train
    from clawgym_ros.training.synthetic import synthetic_dataset
    from test.conftest import read_logs, spin_until, trainer_action

    store = ArtifactStore(tmp_path / "run")
    dataset = synthetic_dataset(store, rows=1200, episode_len=40, groups=2)
    args = ["-p", "log_interval:=10", "-p", "val_interval:=10", "-p", "batch_size:=32",
            "-p", "checkpoint_interval:=20"]
    with trainer_action(procs, rclpy_context, tmp_path, "train_options_client", args,
                        pythonpath=f"{ROOT}:{plugin}") as (executor, action):
        def run(options_json: str):
            goal = Train.Goal(dataset_ids=[dataset.id], steps=20, seed=1, policy=PLUGIN,
                              policy_options_json=options_json, run_dir=str(store.run_dir))
            sent = action.send_goal_async(goal)
            assert spin_until(executor, sent.done, 10.0)
            assert sent.result().accepted
            result = sent.result().get_result_async()
            assert spin_until(executor, result.done, 90.0), read_logs(tmp_path)
            return result.result()

        response = run('{"delta": 0.5}')
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.message
        art = store.resolve(response.result.checkpoint_id, C.KIND_CHECKPOINT)
        assert art.manifest.config["policy"] == PLUGIN
        assert art.manifest.config["policy_options"] == {"delta": 0.5}
        # The type's own check runs in the trainer: the goal fails naming the option.
        response = run('{"delta": -1}')
        assert not response.result.success
        assert "policy_options.delta" in response.result.message, response.result.message
        assert len(store.list(C.KIND_CHECKPOINT)) == 1
