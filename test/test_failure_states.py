"""Failure states: where a failed evaluation episode failed, as restorable snapshots in the
report (safetensors + metadata + a rendered frame per failing stage)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.evaluation import failure_states as F  # noqa: E402
from clawgym_ros.evaluation.suites import EpisodeSpec  # noqa: E402

SEED = 123


@pytest.fixture(scope="module")
def expert_record():
    from clawgym_ros.synthesis.episode import EpisodeSpec as SynthSpec
    from clawgym_ros.tasks.pick_place import generate

    record = generate(SynthSpec(index=0, seed=SEED, task="pick_place", template="cube"))
    assert record.outcome.success
    return record


class _ReplayThenHold:
    """The expert's first ``k`` actions, then its k-th action forever (it grasps, then
    stands still: the episode fails at lift)."""

    def __init__(self, actions, k: int) -> None:
        self.actions, self.k, self.i = actions, k, 0

    def reset(self) -> None:
        self.i = 0

    def act(self, obs):
        i = min(self.i, self.k)
        self.i += 1
        return {key: value[i] for key, value in self.actions.items()}


def _spec(index: int = 3) -> EpisodeSpec:
    return EpisodeSpec(index=index, task="pick_place", template="cube", split=C.SPLIT_TRAIN,
                       family=C.FAMILY_NONE, families=(), intensity=0.0, schedule="constant",
                       seed=SEED, perturbation_seed=0)


@pytest.fixture(scope="module")
def failed(expert_record):
    from clawgym_ros.evaluation.rollout import RolloutOptions, Runner

    grasp_t = next(s.time for s in expert_record.stages if s.name == "grasp")
    k = int(np.searchsorted(expert_record.time, grasp_t)) + 10
    runner = Runner(_ReplayThenHold(expert_record.actions, k), RolloutOptions(world="task"))
    try:
        return runner.run(_spec())
    finally:
        runner.close()


def test_a_failed_episode_keeps_its_stage_and_stall_states(failed, expert_record):
    assert not failed.success and failed.stages_reached == ("reach", "grasp")
    kinds = [fs.kind for fs in failed.failure_states]
    assert kinds == [F.KIND_STAGE, F.KIND_STALL]
    stage, stall = failed.failure_states
    grasp_t = next(s.time for s in expert_record.stages if s.name == "grasp")
    assert stage.time == pytest.approx(grasp_t)
    assert grasp_t < stall.time <= grasp_t + 0.5        # stood still right after grasping
    for fs in failed.failure_states:
        assert fs.stage == "lift" and [n for n, _ in fs.reached] == ["reach", "grasp"]
        assert fs.state is not None and np.isfinite(fs.state).all()
        assert (fs.episode, fs.seed, fs.template) == (3, SEED, "cube")
    # Not part of the record's identity nor of its JSON form.
    plain = dataclasses.replace(failed, failure_states=())
    assert plain == failed and "failure_states" not in failed.to_dict()


def test_restore_rebuilds_the_exact_physics_and_progress(failed, expert_record):
    import gymnasium as gym

    import clawgym_ros.sim  # noqa: F401

    stage = failed.failure_states[0]
    env = gym.make("clawgym/PickPlace-v0", template="cube").unwrapped
    try:
        # The same episode replayed step by step up to the snapshot's time ...
        env.reset(seed=SEED)
        steps = int(round(stage.time / env.backend.control_dt))
        for i in range(steps):
            env.step({key: value[i] for key, value in expert_record.actions.items()})
        direct = env.backend.get_state()
        # ... equals the restored snapshot, bit for bit, with the stages reached.
        obs = F.restore(env, stage)
        assert np.array_equal(env.backend.get_state(), direct)
        assert env.tracker.reached_names == ["reach", "grasp"]
        assert C.OBS_JOINT_POS in obs
        # A snapshot of another world or task is refused with its name.
        bad = dataclasses.replace(stage, signature="0" * 16)
        with pytest.raises(F.FailureStateError, match="another world"):
            F.restore(env, bad)
        with pytest.raises(F.FailureStateError, match="of task 'peg_insert'"):
            F.restore(env, dataclasses.replace(stage, task="peg_insert"))
        with pytest.raises(F.FailureStateError, match="ep00003_stage"):
            F.restore(env, dataclasses.replace(stage, state=stage.state[:-3]))
    finally:
        env.close()


def test_encode_decode_round_trip_and_corruption(failed):
    blob = F.encode(failed.failure_states)
    metas = [fs.meta() for fs in failed.failure_states]
    back = F.decode(blob, metas, "r/failure_states.safetensors")
    assert [b.name for b in back] == ["ep00003_stage", "ep00003_stall"]
    for a, b in zip(failed.failure_states, back, strict=True):
        assert np.array_equal(a.state, b.state) and a.meta() == b.meta()
    tampered = dict(metas[1], sha256="0" * 64)
    with pytest.raises(F.FailureStateError, match="ep00003_stall is corrupted"):
        F.decode(blob, [metas[0], tampered], "r/failure_states.safetensors")
    with pytest.raises(F.FailureStateError, match="not a failure-state file"):
        F.decode(b"garbage", metas, "r/failure_states.safetensors")
    with pytest.raises(F.FailureStateError, match="ep00007_stall is missing"):
        F.decode(blob, [dict(metas[1], name="ep00007_stall")], "r/x")
    assert F.encode([]) is None


def test_successful_episodes_keep_none():
    from clawgym_ros.evaluation.failure_states import FailureWatch

    class _Backend:
        time, control_dt = 1.0, 0.02

        def get_state(self):
            return np.zeros(3)

        def state_signature(self):
            return "x" * 16

    watch = FailureWatch(_spec(), _Backend(), ("reach", "grasp"))
    watch.observe({C.OBS_JOINT_POS: np.zeros(7), C.OBS_GRIPPER: np.zeros(1)}, ["reach"])
    assert watch.finish(success=True) == ()
    end = watch.finish(success=False)
    assert [fs.kind for fs in end] == [F.KIND_STAGE, F.KIND_END]


def test_report_carries_states_and_frames(failed, tmp_path):
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.report.build import write_report
    from clawgym_ros.report.render import rerender
    from clawgym_ros.tasks.recovery import render_frames

    frames = render_frames(failed.failure_states)
    assert list(frames) == ["pick_place/lift"] and frames["pick_place/lift"][:4] == b"\x89PNG"
    suite = load_suite("smoke")
    store = ArtifactStore(tmp_path)
    art = write_report(store, [failed], suite, EvalConfig(suite="smoke"), frames=frames)
    report = json.loads(art.file(C.FILE_REPORT_JSON).read_text())
    assert report["schema_version"] == 2
    listed = report["per_episode"][0]["failure_states"]
    assert [m["name"] for m in listed] == ["ep00003_stage", "ep00003_stall"]
    (entry,) = report["failure_frames"]
    assert entry["stage"] == "lift" and entry["failed_here"] == 1
    assert art.file(entry["file"]).read_bytes() == frames["pick_place/lift"]
    back = F.decode(art.file(C.FILE_FAILURE_STATES).read_bytes(), listed, "report")
    assert np.array_equal(back[1].state, failed.failure_states[1].state)
    html = art.file(C.FILE_REPORT_HTML).read_text()
    assert "Where it failed" in html and "data:image/png;base64," in html
    # Re-rendering from the artifact gives the same page.
    assert rerender(tmp_path, art.id, tmp_path / "again.html").read_text() == html


def test_failure_states_come_back_from_worker_processes():
    """The pool sends records as JSON; their snapshots must travel beside them (the loop's
    evaluator runs episodes in workers)."""
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.workers import run_specs

    # The scripted baseline lifts the object and stops: it fails at transport.
    results = run_specs(PolicySource.parse("scripted:pick_place"), [_spec(0), _spec(1)], 2,
                        RolloutOptions(world="task"))
    for result in results:
        assert not result.success and result.failed_stage == "transport"
        assert [fs.kind for fs in result.failure_states][-1] in (F.KIND_STALL, F.KIND_END)
        assert all(fs.state is not None and fs.state.size > 0 for fs in result.failure_states)
