"""Free-running ROS evaluation (issue 17, item 4): sim_node in real time, policy_node on its
timer, the evaluator only watching; `clawgym bench eval_free` compares it with lockstep on 40
episodes (README). Here: the graph's shape, and three watched episodes end to end (~25 s)."""

from __future__ import annotations

import pytest

from clawgym_ros.evaluation.suites import expand, parse_suite

POLICY = "scripted:pick_place"


def _specs(n: int, cells: dict | None = None):
    return expand(parse_suite({"name": "free", "seed": 0, "episodes_per_cell": n,
                               "tasks": [{"task": "pick_place", "templates": ["cube"]}],
                               "cells": cells or {"nominal": True}}, "free"), 1)


def _params(args) -> dict[str, str]:
    return dict(a.split(":=", 1) for a, prev in zip(args[1:], args[:-1], strict=True)
                if prev == "-p")


def test_free_graph_runs_sim_node_in_real_time_and_policy_node_on_its_timer():
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.evaluation.ros_mode import graph_processes

    procs = {p.name: p for p in graph_processes(_specs(1), POLICY, "", mode="free",
                                                control_rate=25.0)}
    assert set(procs) == {"sim_node", "policy_node"}
    sim, policy = _params(procs["sim_node"].args), _params(procs["policy_node"].args)
    assert sim["clock_mode"] == "free"
    assert policy["mode"] == "free" and policy["control_rate"] == "25.0"
    # After ~/reset the policy waits for the new episode's t = 0 samples.
    assert policy["restart_clock"] == "true" and "hold_timeout" not in policy
    lockstep = _params(graph_processes(_specs(1), POLICY, "")[0].args)
    assert lockstep["clock_mode"] == "lockstep"
    with pytest.raises(ConfigError, match="nominal cells only in free mode"):
        graph_processes(_specs(1, {"nominal": True, "sweeps": [
            {"family": "sensor_noise", "intensities": [0.5]}]}), POLICY, "", mode="free")


@pytest.mark.ros
def test_free_running_episodes_are_watched_and_scored(tmp_path):
    """Three episodes of the scripted expert (it lifts the cube in 1.86 s in-process every
    time) in real time: scored from the published ground truth, ended by success or the
    limit, one first command per episode acting on its t = 0 samples, the latency measured,
    every node stopped."""
    pytest.importorskip("rclpy")
    from clawgym_ros.ros_io.eval_free import run_free_graph

    specs = _specs(3)
    results, info = run_free_graph(specs, POLICY, "", 250, log_dir=tmp_path / "logs")
    assert [r.index for r in results] == [s.index for s in specs]
    for r in results:
        assert r.stages == ("reach", "grasp", "lift")
        # Ended at the first sample at or past the limit (a loaded simulator publishes only
        # the last of the steps it catches up on; best effort may drop a sample).
        assert 0 < r.duration_s <= 250 * 0.02 + 0.2
        assert r.success == (r.stages_reached == r.stages)
    assert sum(r.success for r in results) >= 2
    latency = info["latency"]
    assert latency["first_of_episode"]["n"] == 3
    assert latency["steady"]["n"] > 100
    assert 0 < latency["steady"]["median_ms"] <= latency["steady"]["p95_ms"]
    assert info["lost_samples"] >= 0
    logs = sorted((tmp_path / "logs").glob("*.log"))
    assert {p.stem for p in logs} == {"sim_node", "policy_node"}


@pytest.mark.ros
def test_bench_eval_free_quick_compares_lockstep_and_free(capsys):
    """`clawgym bench eval_free --quick`: the same 4 episodes in lockstep and free running,
    rates with their Wilson intervals, the differing outcomes and the latency (~25 s)."""
    pytest.importorskip("rclpy")
    import json

    from clawgym_ros.cli import main

    assert main(["bench", "eval_free", "--quick", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["area"] == "eval_free" and result["episodes"] == 4
    for key in ("lockstep", "free"):
        part = result[key]
        assert part["rate"] == pytest.approx(part["successes"] / 4, abs=1e-3)
        assert part["ci95"][0] <= part["rate"] <= part["ci95"][1]
    assert all(0 <= i < 4 for i in result["outcome_differs"])
    overlap = max(result["lockstep"]["ci95"][0], result["free"]["ci95"][0]) <= \
        min(result["lockstep"]["ci95"][1], result["free"]["ci95"][1])
    assert result["intervals_overlap"] == overlap
    assert result["free"]["latency"]["first_of_episode"]["n"] == 4
    assert result["free"]["latency"]["steady"]["n"] > 0


@pytest.mark.ros
def test_free_running_torch_checkpoint_in_a_task_world(tmp_path):
    """A checkpoint trained here (pick_place layout: place_goal from the latched task_state)
    on policy_node's timer in the pick_place task world: the task env's stages and contact
    reports come from task_state, each episode runs to its limit in simulation time."""
    pytest.importorskip("rclpy")
    from clawgym_ros.ros_io.eval_free import run_free_graph
    from test.test_eval_ros import PICK_PLACE_LAYOUT, train_checkpoint

    root, ckpt = train_checkpoint(tmp_path / "run", PICK_PLACE_LAYOUT, chunk=2)
    specs = _specs(2)
    results, info = run_free_graph(specs, ckpt, str(root), 60, log_dir=tmp_path / "logs",
                                   world="task")
    seen = ([(r.success, r.duration_s, r.stages_reached) for r in results], info)
    for r in results:
        assert r.stages == ("reach", "grasp", "lift", "transport", "place", "release"), seen
        assert not r.success and 60 * 0.02 - 0.1 <= r.duration_s <= 60 * 0.02 + 0.2, seen
        # The arm moved under the policy's commands.
        assert max(r.series.tool_speed) > 0.01, seen
    assert info["latency"]["first_of_episode"]["n"] == 2, seen
    assert info["latency"]["steady"]["n"] > 20, seen
