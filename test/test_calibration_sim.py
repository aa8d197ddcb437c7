"""The simulator at a calibration's fitted values (issue 23): the backend, the command latency
as a sub-step delay, the dynamics perturbation's widths, and ``--calibration ID`` of the
commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore
from clawgym_ros.calibration import apply as A
from clawgym_ros.calibration.artifact import CALIBRATION_FORMAT, FILE_JSON
from clawgym_ros.sim import active_calibration as R

VALUES = {"joint_friction": 0.5, "damping_scale": 2.0, "armature_scale": 1.2,
          "actuator_gain_scale": 0.9, "object_mass_scale": 1.2, "command_latency_s": 0.004}


def commit_calibration(run_dir, values=VALUES, rel=0.01) -> str:
    """A calibration artifact with ``values`` and intervals of +-``rel`` (no fit: the format
    ``clawgym calibrate`` writes, reduced to what a simulator reads)."""
    params = [{"name": k, "value": v, "ci_low": v * (1 - rel), "ci_high": v * (1 + rel)}
              for k, v in values.items()]
    data = {"format": CALIBRATION_FORMAT, "version": 1, "values": values, "params": params}
    store = ArtifactStore(run_dir)
    return store.put_files(C.KIND_CALIBRATION, {FILE_JSON: json.dumps(data).encode()},
                           config={}).id


@pytest.fixture
def no_calibration(monkeypatch):
    """Leave no calibration active after the test (it would leak into later tests)."""
    monkeypatch.delenv(R.ENV_VAR, raising=False)
    yield
    R.activate(None)


def rollout(env, steps: int = 40) -> np.ndarray:
    obs, _ = env.reset(seed=3)
    out = []
    for k in range(steps):
        obs, *_ = env.step({C.ACT_JOINT_TARGET: obs[C.OBS_JOINT_POS] + 0.03 * np.sin(k / 4)})
        out.append(obs[C.OBS_JOINT_POS])
    return np.array(out)


def test_the_backend_runs_at_the_active_calibration(tmp_path, no_calibration):
    from clawgym_ros.tasks.pick_place import PickPlaceEnv

    cal_id = commit_calibration(tmp_path)
    cal = A.load_calibration(ArtifactStore(tmp_path), cal_id[:12])
    assert cal.id == cal_id and cal.values == VALUES
    assert cal.intervals["damping_scale"] == pytest.approx((1.98, 2.02))
    env = PickPlaceEnv()
    nominal = rollout(env)
    m = env.backend.model
    dof = [m.joint(j).dofadr[0] for j in C.ARM_JOINTS]
    damping = m.dof_damping[dof].copy()
    act = m.actuator("arm_joint_1_pos").id
    kp = m.actuator_gainprm[act, 0]
    R.activate(cal)
    calibrated = rollout(env)            # the next reset picks the calibration up
    assert m.dof_frictionloss[dof] == pytest.approx([0.5] * 7)
    assert m.dof_damping[dof] == pytest.approx(damping * 2.0)
    assert m.actuator_gainprm[act, 0] == pytest.approx(kp * 0.9)
    assert env.backend.describe()["calibration"] == cal_id
    assert np.abs(calibrated - nominal).max() > 1e-3
    # a fresh env in this process runs at it too; resets restore the calibrated defaults
    assert np.array_equal(rollout(PickPlaceEnv()), calibrated)
    R.activate(None)
    assert np.array_equal(rollout(env), nominal)
    assert m.dof_damping[dof] == pytest.approx(damping) and "calibration" not in \
        env.backend.describe()


def test_command_latency_is_a_sub_step_delay():
    """4 ms at a 2 ms physics step: each control step's first two physics steps still run on
    the previous command (checked against stepping the model by hand)."""
    from clawgym_ros.sim.mujoco_backend import MujocoBackend, MujocoConfig

    cal = R.SimCalibration("test", {"command_latency_s": 0.004})
    backend = MujocoBackend(MujocoConfig(calibration=cal))
    backend.reset(0)
    model, data = backend.model, mujoco.MjData(backend.model)
    mujoco.mj_copyData(data, model, backend.data)
    home = backend.data.ctrl.copy()
    targets = [home[:7] + 0.1 * (k + 1) for k in range(3)]
    previous = home.copy()
    for target in targets:
        backend.step({C.ACT_JOINT_TARGET: target})
        ctrl = previous.copy()
        ctrl[:7], ctrl[7:14] = target, 0.0
        data.ctrl[:] = previous
        mujoco.mj_step(model, data, nstep=2)
        data.ctrl[:] = ctrl
        mujoco.mj_step(model, data, nstep=backend.substeps - 2)
        previous = ctrl
    assert np.array_equal(backend.data.qpos, data.qpos)


def test_dynamics_perturbation_draws_within_the_intervals(tmp_path, no_calibration):
    from clawgym_ros.perturbations.dynamics import Dynamics, DynamicsConfig

    pert = Dynamics(DynamicsConfig(intensity=1.0, seed=4))
    assert pert.widths()["damping_factor"] == 3.0
    R.activate(A.load_calibration(ArtifactStore(tmp_path), commit_calibration(tmp_path)))
    widths = pert.widths()
    assert widths["damping_factor"] == pytest.approx(1 / 0.99)
    assert widths["friction_factor"] == 2.0          # contact friction is not fitted
    assert widths["latency_s"] == pytest.approx(0.004 * 0.01)
    for seed in range(20):
        pert.reset(seed=seed)
        s = pert.settings()
        assert 0.99 - 1e-9 <= s.damping_scale <= 1 / 0.99 + 1e-9
        assert 0.99 - 1e-9 <= s.actuator_gain_scale <= 1 / 0.99 + 1e-9
        assert 0.0 <= s.command_latency <= 4e-5


def test_a_malformed_calibration_is_refused(tmp_path, no_calibration, monkeypatch):
    from clawgym_ros.errors import ArtifactError

    with pytest.raises(ArtifactError, match="artifact id 'nope' is malformed"):
        A.load_calibration(ArtifactStore(tmp_path), "nope")
    with pytest.raises(ArtifactError, match="unknown artifact id 'deadbeef'"):
        A.load_calibration(ArtifactStore(tmp_path), "deadbeef")
    with pytest.raises(ArtifactError, match="unknown parameters .'mass'."):
        R.SimCalibration.from_dict({"id": "x", "values": {"mass": 1.0}})
    monkeypatch.setenv(R.ENV_VAR, "{not json")
    with pytest.raises(ArtifactError, match=R.ENV_VAR):
        R.active()


def test_synth_and_eval_take_a_calibration(tmp_path, no_calibration, capsys):
    """``--calibration ID``: the run simulates at it and its id joins the dataset's and the
    report's content (the uncalibrated ids are pinned in test_content_id_pins); a bad id is
    one line, exit 2, nothing committed."""
    from clawgym_ros.cli import main as cli_main
    from test.test_content_id_pins import pinned_dataset_id, pinned_report_id, ros_distro

    cal_id = commit_calibration(tmp_path)
    assert cli_main(["synth", "--task", "pick_place", "--episodes", "1", "--seed", "5",
                     "--workers", "1", "--out", str(tmp_path), "--calibration", cal_id[:12]]) == 0
    dataset = capsys.readouterr().out.split()[0]
    assert cli_main(["eval", "--policy", "scripted:pick_place:grasp_height=0.015",
                     "--suite", "smoke", "--seed", "3", "--out", str(tmp_path),
                     "--workers", "1", "--max-steps", "60", "--calibration", cal_id[:12]]) == 0
    report_id = capsys.readouterr().out.split()[0]
    R.activate(None)
    assert dataset != pinned_dataset_id(ros_distro(), C.TASK_PICK_PLACE)
    assert report_id != pinned_report_id()
    store = ArtifactStore(tmp_path)
    episodes = store.get(dataset).file("episodes.jsonl").read_text()
    assert json.loads(episodes.splitlines()[0])["options"]["calibration"]["id"] == cal_id
    report = json.loads(store.get(report_id).file(C.FILE_REPORT_JSON).read_text())
    assert report["config"]["calibration"] == cal_id
    before = sorted(p.name for p in (tmp_path / "artifacts").rglob("*"))
    for command in (["synth", "--task", "pick_place", "--episodes", "1", "--seed", "5"],
                    ["eval", "--policy", "scripted:pick_place", "--suite", "smoke",
                     "--seed", "3"]):
        assert cli_main([*command, "--out", str(tmp_path), "--calibration", "0123abcd"]) == 2
        err = capsys.readouterr().err.strip()
        assert "unknown artifact id '0123abcd'" in err and "\n" not in err
    assert sorted(p.name for p in (tmp_path / "artifacts").rglob("*")) == before


def test_a_twin_session_runs_at_its_private_values(tmp_path, no_calibration):
    """sim_node's ``twin_params_file``: the simulator runs at the hidden values and reports
    joint positions with the encoder bias; a bad file names the field and its range."""
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.sim.session import SimNodeConfig, SimSession

    private = tmp_path / "twin.yaml"
    private.write_text("damping_scale: 1.8\ncommand_latency_s: 0.014\n"
                       "encoder_bias:arm_joint_3: 0.012\n")
    plain = SimSession(SimNodeConfig())
    twin = SimSession(SimNodeConfig(twin_params_file=str(private)))
    assert twin.backend.calibration.id == R.TWIN_ID
    assert twin.backend._calibration_delay == 7
    m, dof = twin.backend.model, twin.backend.index.joint_dof
    assert m.dof_damping[dof[:7]] == pytest.approx(plain.backend.model.dof_damping[dof[:7]] * 1.8)
    offset = twin.joints().position - plain.joints().position
    assert offset == pytest.approx([0, 0, 0.012, 0, 0, 0, 0, 0, 0])
    for text, needle in (("mass: 2\n", "mass"), ("damping_scale: 9\n", "[0.2, 5]"),
                         ("- 1\n", "a mapping")):
        private.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(needle)):
            SimNodeConfig(twin_params_file=str(private))


def test_rl_finetuning_takes_a_calibration(tmp_path, no_calibration, capsys):
    """``train --finetune rl --calibration ID``: the fine-tuning config carries it (so the
    checkpoint's id changes) and only then; behaviour cloning refuses the flag."""
    from clawgym_ros.cli import main as cli_main
    from clawgym_ros.training.rl import FinetuneConfig

    cal = R.SimCalibration("c" * 64, {"damping_scale": 2.0})
    plain = FinetuneConfig(base_checkpoint="b" * 64, steps=10, seed=0)
    assert "calibration" not in plain.to_json()
    assert "calibration" not in FinetuneConfig.option_names()
    tuned = FinetuneConfig(base_checkpoint="b" * 64, steps=10, seed=0,
                           calibration=cal.to_dict())
    assert tuned.to_json()["calibration"]["id"] == cal.id
    assert cli_main(["train", "--dataset", "abcdef12", "--steps", "10", "--seed", "0",
                     "--out", str(tmp_path), "--calibration", "abcdef12"]) == 2
    assert "--calibration" in capsys.readouterr().err


def test_a_loop_config_names_a_calibration(tmp_path, no_calibration, capsys):
    """The loop config's ``calibration`` key: resolved in the run directory before any node
    starts (a missing one is one line, exit 2)."""
    from clawgym_ros.cli import main as cli_main
    from clawgym_ros.coordinator.config import load_loop_config

    root = Path(__file__).resolve().parents[1]
    text = (root / "config" / "loop" / "pick_place.yaml").read_text()
    path = tmp_path / "loop.yaml"
    text = text.replace("eval_suite: suites/", f"eval_suite: {root}/config/loop/suites/")
    path.write_text(text.replace("\nloop:\n", "\nloop:\n  calibration: 0123abcd\n", 1))
    assert load_loop_config(path).calibration == "0123abcd"
    assert cli_main(["loop", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown artifact id '0123abcd'" in err and "\n" not in err
    assert not (tmp_path / "run" / "logs").exists()
