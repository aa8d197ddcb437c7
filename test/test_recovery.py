"""Recovery synthesis: demonstrations that restart the expert from a report's failure states
(`clawgym synth --from-report`), dual signed off, content-addressed, traced to the report."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.evaluation.failure_states import FailureStateError  # noqa: E402
from test.conftest import ROOT  # noqa: E402
from test.test_failure_states import SEED, _ReplayThenHold, _spec  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with a report whose two failed pick_place episodes stopped right after
    grasping (object in the closed gripper on the table) and a report without failures."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.report.build import write_report
    from clawgym_ros.synthesis.episode import EpisodeSpec as SynthSpec
    from clawgym_ros.tasks.pick_place import generate

    out = tmp_path_factory.mktemp("recovery_run")
    record = generate(SynthSpec(index=0, seed=SEED, task="pick_place", template="cube"))
    grasp_t = next(s.time for s in record.stages if s.name == "grasp")
    k = int(np.searchsorted(record.time, grasp_t)) + 10
    runner = Runner(_ReplayThenHold(record.actions, k), RolloutOptions(world="task"))
    try:
        failed = [runner.run(_spec(index)) for index in (3, 4)]
    finally:
        runner.close()
    store = ArtifactStore(out)
    suite = load_suite("smoke")
    cfg = EvalConfig(suite="smoke")
    report = write_report(store, failed, suite, cfg).id
    clean = [dataclasses.replace(failed[0], success=True, stages_reached=failed[0].stages,
                                 failure_states=())]
    no_failures = write_report(store, clean, suite, cfg).id
    return out, report, no_failures


def test_recovery_episodes_finish_the_task_and_pass_the_dual_signoff(run_dir):
    from clawgym_ros.orchestration.synthesis import plan_recovery
    from clawgym_ros.tasks.registry import generate_any, signoff_for

    out, report, _ = run_dir
    plan = plan_recovery(out, report[:12], 0, seed=5)
    assert [s.options["recover_from"]["name"] for s in plan.specs] == [
        "ep00003_stage", "ep00004_stage", "ep00003_stall", "ep00004_stall"]
    signoff = signoff_for(["pick_place"])
    for spec in plan.specs[:2]:
        rec = generate_any(spec)
        assert rec.outcome.success, rec.outcome.reason
        assert signoff(rec) == []
        # The gripper was closed on the object on the table: let go, back off, pick again.
        names = [c.name for c in rec.skill_calls]
        assert names[:4] == ["release", "retreat", "move_to", "approach"], names
        assert [s.name for s in rec.stages] == [
            "reach", "grasp", "lift", "transport", "place", "release"]
        # Stages reached before the segment are recorded at its first step.
        assert rec.stages[0].time == rec.stages[1].time == rec.time[0]
        assert rec.time[0] > 2.0                       # the segment starts mid-episode
        assert rec.origin["kind"] == "recovery" and rec.origin["report"] == report
        assert rec.origin["reached_before"] == ["reach", "grasp"]
        assert rec.origin["failed_stage"] == "lift"
    # A recovery record is not an ordinary episode: its skill sequence alone would be illegal.
    ordinary = dict(rec.origin)
    rec.origin.clear()
    assert any(r.code == C.REJECT_SKILL_SEQUENCE for r in signoff(rec))
    rec.origin.update(ordinary)


def test_a_failure_state_of_a_combined_cell_is_recovered_under_both_families(run_dir,
                                                                             tmp_path):
    """Failure states of an evaluation's combined cell (``lighting+sensor_noise``) restart the
    expert under both families (they were refused as generator errors: the experts and the
    records took one family); the record keeps the combined name through the MCAP file."""
    from clawgym_ros.dataset.episode_mcap import read_episode, write_episode
    from clawgym_ros.orchestration.synthesis import plan_recovery
    from clawgym_ros.synthesis.episode import EpisodeError
    from clawgym_ros.tasks.registry import generate_any, signoff_for

    out, report, _ = run_dir
    spec = dataclasses.replace(plan_recovery(out, report[:12], 1, seed=5).specs[0],
                               family="lighting+sensor_noise", intensity=0.3)
    rec = generate_any(spec)
    assert rec.outcome.success, rec.outcome.reason
    assert signoff_for(["pick_place"])(rec) == []
    assert rec.family == "lighting+sensor_noise"
    assert {k.split(".")[0] for k in rec.perturbation_params} >= {"lighting", "sensor_noise"}
    path = tmp_path / "combined.mcap"
    write_episode(rec, path)
    assert read_episode(path, images=False).family == "lighting+sensor_noise"
    for bad in ("lighting+lighting", "lighting+none", "lighting+glare"):
        rec.family = bad
        with pytest.raises(EpisodeError, match="joined with"):
            rec.validate()


def test_same_seed_same_dataset_any_worker_count_with_lineage(run_dir):
    from clawgym_ros.dataset.episode_mcap import read_episode
    from clawgym_ros.orchestration.synthesis import synthesize_recovery

    out, report, _ = run_dir
    one, summary = synthesize_recovery(str(out), report, 2, seed=9, workers=1)
    assert summary.accepted == 2 and summary.yield_ == 1.0
    # Ids are content hashes: two workers must produce the very same files.
    two, _ = synthesize_recovery(str(out), report, 2, seed=9, workers=2)
    assert two.id == one.id
    manifest = json.loads((two.path / C.FILE_MANIFEST).read_text())
    assert manifest["parents"] == [report]
    episode = sorted((two.path / "episodes").glob("*.mcap"))[0]
    assert read_episode(episode, images=False).origin["report"] == report
    # A resumed loop finds the recovery dataset its goal already made.
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.coordinator.runner import SynthesizeGoal, find_recovery_dataset

    goal = SynthesizeGoal(mixture=(), episodes=2, seed=9, workers=1, record_images=False,
                          run_dir=str(out), from_report=report[:12])
    assert find_recovery_dataset(ArtifactStore(out), goal) == one.id
    assert find_recovery_dataset(ArtifactStore(out),
                                 dataclasses.replace(goal, seed=10)) is None
    # Made with other expert options: not the goal's dataset.
    assert find_recovery_dataset(ArtifactStore(out), dataclasses.replace(
        goal, options={"timing": "optimal"})) is None


def test_bad_input_is_refused_by_name_before_anything_runs(run_dir, tmp_path):
    import shutil

    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.errors import ArtifactError
    from clawgym_ros.orchestration.synthesis import plan_recovery

    out, report, no_failures = run_dir
    with pytest.raises(FailureStateError, match="has no failure states"):
        plan_recovery(out, no_failures, 0, 0)
    # A copy of the run whose snapshots were damaged / taken in another world.
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    art = ArtifactStore(bad).get(report, C.KIND_REPORT)
    blob = art.file(C.FILE_FAILURE_STATES)
    data = bytearray(blob.read_bytes())
    for i in range(len(data) - 800, len(data)):     # flip bits inside the tensor data
        data[i] ^= 0x5A
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    with pytest.raises(FailureStateError, match="is corrupted"):
        plan_recovery(bad, report, 0, 0)
    shutil.rmtree(bad)
    shutil.copytree(out, bad)
    path = ArtifactStore(bad).get(report, C.KIND_REPORT).file(C.FILE_REPORT_JSON)
    path.chmod(0o644)
    path.write_text(path.read_text().replace('"signature": "', '"signature": "f00d'))
    with pytest.raises(FailureStateError, match="another world"):
        plan_recovery(bad, report, 0, 0)
    # The CLI: a dataset id is not a report; one line, exit 2, nothing committed.
    from clawgym_ros.orchestration.synthesis import synthesize_recovery

    ref = synthesize_recovery(str(out), report, 1, seed=1, workers=1)[0].id
    before = sorted(p.name for p in (out / "artifacts").glob("*/*"))
    proc = subprocess.run([sys.executable, "-m", "clawgym_ros.cli", "synth", "--from-report",
                           ref, "--out", str(out), "--seed", "0"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sorted(p.name for p in (out / "artifacts").glob("*/*")) == before
    with pytest.raises(ArtifactError):
        plan_recovery(out, ref, 0, 0)
