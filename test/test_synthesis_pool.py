"""Generation runner: index order, worker-count independence, progress, cancel, errors."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from clawgym_ros import constants as C
from clawgym_ros.errors import ClawgymError
from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
from clawgym_ros.synthesis.pool import iter_generation, run_generation
from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode


def _plan(n=10, seed=5):
    specs = plan_episodes(MixtureSpec.single(C.TASK_PICK_PLACE), n, seed, options={"steps": 30})
    # Faults at fixed indices: a physical one, a semantic one and a generator crash.
    faults = {2: "joint_limit", 5: "gripper_open_mid_transport", 7: "no_such_fault"}
    return [dataclasses.replace(s, options={"steps": 30, "fault": faults[s.index]})
            if s.index in faults else s for s in specs]


def test_one_and_two_workers_give_identical_results_in_index_order():
    specs = _plan()
    runs = {}
    for workers in (1, 2):
        seen = []
        progress = []
        summary = run_generation(specs, synthetic_episode, SIGNOFF, workers=workers,
                                 on_result=seen.append, progress=progress.append)
        runs[workers] = (summary, seen)
        assert [r.spec.index for r in seen] == list(range(len(specs)))
        assert [p.done for p in progress] == list(range(1, len(specs) + 1))
        assert progress[-1].accepted == summary.accepted == 7
        assert summary.workers == workers and not summary.cancelled
    (s1, r1), (s2, r2) = runs[1], runs[2]
    assert s1.rejected_by_reason == s2.rejected_by_reason == {
        C.REJECT_JOINT_POSITION: 1, C.REJECT_NOT_SUCCESSFUL: 1, C.REJECT_SKILL_SEQUENCE: 1,
        C.REJECT_GENERATOR_ERROR: 1}
    assert list(s1.to_dict()["rejected_by_reason"]) == [
        C.REJECT_SKILL_SEQUENCE, C.REJECT_NOT_SUCCESSFUL, C.REJECT_JOINT_POSITION,
        C.REJECT_GENERATOR_ERROR]
    assert "unknown fault" in r1[7].rejections[0].detail and r1[7].record is None
    for a, b in zip(r1, r2):
        assert a.rejections == b.rejections and a.summary == b.summary
        if a.record is not None:
            assert np.array_equal(a.record.joint_position, b.record.joint_position)
            assert a.record.observations.keys() == b.record.observations.keys()


def test_cancel_stops_between_episodes_and_keeps_a_prefix():
    specs = _plan(12)
    for workers in (1, 2):
        stop = threading.Event()
        seen = []

        def progress(p, stop=stop):
            if p.done == 3:
                stop.set()

        summary = run_generation(specs, synthetic_episode, SIGNOFF, workers=workers,
                                 on_result=seen.append, progress=progress, cancel=stop)
        assert summary.cancelled and summary.done == 3
        assert [r.spec.index for r in seen] == [0, 1, 2]
    assert list(iter_generation(specs, synthetic_episode, SIGNOFF, workers=1,
                                cancel=lambda: True)) == []


def test_encoder_runs_for_accepted_episodes_only_and_records_can_be_dropped():
    results = list(iter_generation(_plan(6), synthetic_episode, SIGNOFF, workers=1,
                                   encode=_steps, keep_records=False))
    assert [r.payload for r in results] == [30, 30, None, 30, 30, None]
    assert all(r.record is None for r in results)


def _steps(record):
    return record.num_steps


def test_bad_start_method_and_cancel_are_refused():
    with pytest.raises(ClawgymError, match="start_method"):
        list(iter_generation(_plan(4), synthetic_episode, SIGNOFF, workers=2,
                             start_method="fork"))
    with pytest.raises(ClawgymError, match="cancel"):
        list(iter_generation(_plan(2), synthetic_episode, SIGNOFF, workers=1, cancel=3))
