"""Sim-to-real calibration (issue 23): the fit on a twin log and `clawgym calibrate`'s
artifact."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clawgym_ros import constants as C
from clawgym_ros.calibration.fit import FitConfig, calibrate
from clawgym_ros.calibration.log import read_log
from clawgym_ros.calibration.twin import write_twin_log
from clawgym_ros.sim import calibration_params as P


def clawgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym_ros.cli", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def short_log(tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """A 10 s twin log (seed 4) and its hidden values."""
    path = tmp_path_factory.mktemp("calib") / "twin.mcap"
    return path, write_twin_log(path, 4, 10.0, hold_s=1.0, ramp_s=1.0)


def test_fit_recovers_hidden_values_within_intervals(short_log):
    path, truth = short_log
    log = read_log(path)
    biased = next(n for n, v in truth.items() if n.startswith(P.BIAS_PREFIX) and v)
    names = P.expand_names(["damping_scale", "joint_friction", "armature_scale",
                            "actuator_gain_scale", "command_latency_s", "object_mass_scale",
                            biased])
    result = calibrate(log, FitConfig(params=names, bounds=P.resolve_bounds(names), seed=0,
                                      starts=1))
    fits = {p.name: p for p in result.params}
    offset = ("damping_scale", "joint_friction", "armature_scale", "actuator_gain_scale",
              "command_latency_s", biased)
    for name in offset:
        p = fits[name]
        assert p.identifiable, p
        # the nominal value is outside the interval: the fit moved for a reason
        assert not p.ci_low <= P.PARAMS[name].nominal <= p.ci_high, p
        assert abs(p.value - truth[name]) < 0.01 * (p.high - p.low), (p, truth[name])
    # the hidden values inside their 95% intervals: at least 5 of 6 (the target is
    # 80%; measured over 5 seeds by `clawgym bench calibrate`)
    inside = [n for n in offset if fits[n].ci_low <= truth[n] <= fits[n].ci_high]
    assert len(inside) >= 5, [(fits[n], truth[n]) for n in offset]
    mass = fits["object_mass_scale"]
    assert not mass.identifiable and (mass.ci_low, mass.ci_high) == (0.5, 2.0)
    assert any("object_mass_scale: not excited" in w for w in result.warnings)
    assert result.summary_rmse("after") < 0.3 * result.summary_rmse("before")


def test_calibrate_cli_commits_a_content_addressed_artifact(short_log, tmp_path):
    path, _ = short_log
    run = tmp_path / "run"
    args = ("calibrate", "--bag", str(path), "--params", "damping_scale,encoder_bias",
            "--starts", "1", "--seed", "5", "--out", str(run))
    first = clawgym(*args)
    assert first.returncode == 0, first.stderr
    art_id = first.stdout.splitlines()[0]
    summary = json.loads(first.stdout.splitlines()[1])
    assert summary["position_rmse_after"] < summary["position_rmse_before"]
    folder = run / "artifacts" / "calibration" / art_id
    data = json.loads((folder / "calibration.json").read_text())
    assert data["log"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [p["name"] for p in data["params"]] == ["damping_scale", *(
        P.BIAS_PREFIX + j for j in C.ARM_JOINTS)]
    page = (folder / "calibration.html").read_text()
    assert "data:image/svg+xml;base64," in page and "damping_scale" in page
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "calibration" and manifest["seeds"] == {"calibration": 5}
    assert manifest["config"]["log"]["sha256"] == data["log"]["sha256"]
    # same log, parameters and seed: same id (a second run keeps the one artifact)
    second = clawgym(*args)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == art_id
    assert [p.name for p in (run / "artifacts" / "calibration").iterdir()] == [art_id]


def test_a_calibration_sets_a_scene_model(short_log, tmp_path):
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.calibration.apply import load_values
    from clawgym_ros.calibration.artifact import commit_calibration
    from clawgym_ros.sim import scene_mjcf as MJ
    from clawgym_ros.sim.active_calibration import split_values
    from clawgym_ros.sim.calibrated import apply_to_model

    path, truth = short_log
    names = P.expand_names(["damping_scale", "joint_friction", "armature_scale",
                            "actuator_gain_scale", "command_latency_s"])
    config = FitConfig(params=names, bounds=P.resolve_bounds(names), starts=1)
    result = calibrate(read_log(path), config)
    store = ArtifactStore(tmp_path / "run")
    art = commit_calibration(store, result, config, path)
    values = load_values(store, art.id[:12])
    assert values == pytest.approx({p.name: p.value for p in result.params}, abs=1e-9)
    model = MJ.build_model("tabletop")
    nominal = MJ.build_model("tabletop")
    apply_to_model(model, values)
    dof = [model.joint(j).dofadr[0] for j in C.ARM_JOINTS]
    assert model.dof_frictionloss[dof] == pytest.approx([values["joint_friction"]] * 7)
    assert model.dof_damping[dof] == pytest.approx(nominal.dof_damping[dof]
                                                   * values["damping_scale"])
    assert model.dof_armature[dof] == pytest.approx(nominal.dof_armature[dof]
                                                    * values["armature_scale"])
    act = model.actuator("arm_joint_1_pos").id
    assert model.actuator_gainprm[act, 0] == pytest.approx(
        nominal.actuator_gainprm[act, 0] * values["actuator_gain_scale"])
    _, latency, bias = split_values(values)
    assert latency == pytest.approx(truth["command_latency_s"], abs=2e-3) and bias == {}
