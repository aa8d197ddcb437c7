"""Recovery synthesis on peg_insert: the peg expert restarts from a report's failure states
(peg held near the hole; gripper open around a standing peg; a peg knocked over) and its
recovery segments pass the dual sign-off."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from clawgym_ros import constants as C  # noqa: E402
from clawgym_ros.evaluation.failure_states import FailureStateError  # noqa: E402
from clawgym_ros.evaluation.suites import EpisodeSpec  # noqa: E402
from clawgym_ros.tasks.peg_insert import STAGES  # noqa: E402
from test.test_failure_states import _ReplayThenHold  # noqa: E402

SEED = 123
TEMPLATE = "square_peg"


def _spec(index: int) -> EpisodeSpec:
    return EpisodeSpec(index=index, task="peg_insert", template=TEMPLATE,
                       split=C.SPLIT_TRAIN, family=C.FAMILY_NONE, families=(), intensity=0.0,
                       schedule="constant", seed=SEED, perturbation_seed=0)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with a report of three failed peg_insert episodes: one stopped 0.6 s
    into the expert's alignment (peg held above the hole), one at the end of its approach
    (gripper open around the standing peg), one at the end of its lift (peg held far from
    the hole)."""
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import RolloutOptions, Runner
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.report.build import write_report
    from clawgym_ros.synthesis.episode import EpisodeSpec as SynthSpec
    from clawgym_ros.tasks.peg_insert import generate

    out = tmp_path_factory.mktemp("peg_recovery_run")
    record = generate(SynthSpec(index=0, seed=SEED, task="peg_insert", template=TEMPLATE))
    assert record.outcome.success

    def call(name: str):
        return next(c for c in record.skill_calls if c.name == name)

    stops = {3: int(np.searchsorted(record.time, call("align").start)) + 30,
             4: int(np.searchsorted(record.time, call("approach").end)),
             5: int(np.searchsorted(record.time, call("lift").end))}
    failed = []
    for index, k in stops.items():
        runner = Runner(_ReplayThenHold(record.actions, k),
                        RolloutOptions(world="task", max_steps=400))
        try:
            failed.append(runner.run(_spec(index)))
        finally:
            runner.close()
    assert [r.success for r in failed] == [False, False, False]
    store = ArtifactStore(out)
    suite = load_suite("peg_insert_nominal")
    report = write_report(store, failed, suite, EvalConfig(suite="peg_insert_nominal")).id
    return out, report, failed


def test_peg_recovery_episodes_finish_the_task_and_pass_the_dual_signoff(run_dir):
    from clawgym_ros.orchestration.synthesis import plan_recovery
    from clawgym_ros.tasks.registry import generate_any, signoff_for

    out, report, _ = run_dir
    plan = plan_recovery(out, report[:12], 0, seed=5)
    names = [s.options["recover_from"]["name"] for s in plan.specs]
    assert names == ["ep00003_stage", "ep00004_stage", "ep00005_stage", "ep00003_stall",
                     "ep00004_stall", "ep00005_stall"]
    signoff = signoff_for(["peg_insert"])
    whole = ["move_to", "approach", "grasp", "lift", "move_to", "align", "insert", "release",
             "retreat"]
    expected = {
        # Peg just lifted off the table, far from the hole: lift clear of the block, carry.
        "ep00003_stage": ["lift", "move_to", "align", "insert", "release", "retreat"],
        "ep00005_stage": ["lift", "move_to", "align", "insert", "release", "retreat"],
        # Peg held above the hole, near its axis: the expert's own alignment from there.
        "ep00003_stall": ["align", "insert", "release", "retreat"],
        # Gripper open around the standing peg: the whole task.
        "ep00004_stage": whole,
        "ep00004_stall": whole,
        # Peg held high, far from the hole: carried there without a lift.
        "ep00005_stall": ["move_to", "align", "insert", "release", "retreat"],
    }
    for spec in plan.specs:
        rec = generate_any(spec)
        assert rec.outcome.success, rec.outcome.reason
        assert signoff(rec) == []
        name = spec.options["recover_from"]["name"]
        assert [c.name for c in rec.skill_calls] == expected[name], name
        # Every stage, those reached before the segment recorded at its first step.
        assert [s.name for s in rec.stages] == list(STAGES)
        before = spec.options["recover_from"]["reached"]
        assert all(s.time == rec.time[0] for s in rec.stages[:len(before)])
        assert rec.origin["kind"] == "recovery" and rec.origin["report"] == report
        assert rec.time[0] > 1.0                       # the segment starts mid-episode
        if name == "ep00003_stall":
            held = rec
    # The held-peg segment alone would not be a legal ordinary episode.
    held.origin.clear()
    assert any(r.code == C.REJECT_SKILL_SEQUENCE for r in signoff(held))


def test_a_knocked_over_peg_ends_as_a_rejected_episode_naming_the_tilt(run_dir):
    """A peg lying on the table cannot be grasped from above: the episode is recorded as
    failed with the tilt in its reason (counted in the yield, never accepted)."""
    import gymnasium as gym

    from clawgym_ros.evaluation.failure_states import restore
    from clawgym_ros.tasks.peg_insert import TABLE_Z
    from clawgym_ros.tasks.recovery import recovery_specs
    from clawgym_ros.tasks.registry import generate_any, signoff_for

    _, _, failed = run_dir
    fs = next(f for f in failed[1].failure_states if f.kind == "stage")
    env = gym.make(C.ENV_PEG_INSERT, template=TEMPLATE, control_mode=C.CONTROL_DICT).unwrapped
    try:
        restore(env, fs)
        b = env.backend
        q = b.data.qpos[b.index.object_qpos].reshape(-1, 7).copy()
        h = math.pi / 4                                 # 90 degrees about x: lying down
        q[0, 2], q[0, 3:] = TABLE_Z + 0.011, (math.cos(h), math.sin(h), 0.0, 0.0)
        b.data.qpos[b.index.object_qpos] = q.ravel()
        import mujoco

        mujoco.mj_forward(b.model, b.data)
        lying = dataclasses.replace(fs, state=b.get_state())
    finally:
        env.close()
    spec = recovery_specs("report", [lying], 1, seed=5)[0]
    rec = generate_any(spec)
    assert not rec.outcome.success
    assert "tipped over (90.0 degrees)" in rec.outcome.reason
    assert signoff_for(["peg_insert"])(rec) != []


def test_a_task_without_a_recovery_expert_is_refused_naming_those_that_have_one(run_dir):
    from clawgym_ros.tasks.recovery import check_restorable

    _, _, failed = run_dir
    other = dataclasses.replace(failed[0].failure_states[0], task="pill_handover",
                                template="pill_box")
    with pytest.raises(FailureStateError, match=r"has no recovery expert \(these have: "
                       r"pick_place, peg_insert\)"):
        check_restorable([other])


def test_expert_options_reach_the_recovery_episodes(run_dir):
    """``clawgym synth --from-report ID --option timing=optimal``: the time-optimal expert of
    the dataset the policy learned from finishes the recovery segments too (part of the id)."""
    from clawgym_ros.dataset.episode_mcap import read_episode
    from clawgym_ros.orchestration.synthesis import synthesize_recovery

    out, report, _ = run_dir
    default, _ = synthesize_recovery(str(out), report, 1, seed=9, workers=1)
    optimal, summary = synthesize_recovery(str(out), report, 1, seed=9, workers=1,
                                           options={"timing": "optimal",
                                                    "acceleration_scale": 2})
    assert summary.accepted == 1 and optimal.id != default.id

    def steps(artifact) -> int:
        path = sorted((artifact.path / "episodes").glob("*.mcap"))[0]
        return read_episode(path, images=False).num_steps

    assert steps(optimal) < steps(default)
