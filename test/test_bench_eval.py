"""`clawgym bench eval --quick`: the evaluation benchmark runs end to end (smoke, ~60 s: it
trains a small torch checkpoint on 2 demonstrations).

Checks the JSON shape and that the numbers are consistent (same episodes replayed, results of
1 and 2 workers identical, ROS steps counted, the torch checkpoint's ROS records equal its
in-process ones chunked and per step), not the speed targets (machine-dependent; see
docs/notes/evaluation_rollout.md).
"""

from __future__ import annotations

import json

import pytest


@pytest.mark.ros
def test_bench_eval_quick(capsys):
    pytest.importorskip("rclpy")
    from clawgym_ros.cli import main

    assert main(["bench", "eval", "--quick", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["area"] == "eval"
    local = result["inprocess"]
    assert local["episodes"] == 4 and local["control_steps"] == local["replayed_steps"] > 0
    assert 0 < local["physics_s"] and 0 < local["policy_s"]
    # The times are printed rounded to 1 ms: their quotient is only that precise (a quick
    # run's wall time is ~0.2 s, so rounding alone moves it by up to ~0.005).
    assert local["ratio"] == pytest.approx(local["pure_physics_policy_s"] / local["wall_s"],
                                           abs=1e-3 + 1e-3 / local["wall_s"])
    assert 0 < local["ratio"] < 1.5
    # The same quotient in process CPU time: (replay + policy) / runner, per step rounded
    # to 0.1 us (~400 us a step).
    cpu = local["cpu_us_per_step"]
    assert set(cpu) == {"runner", "physics", "policy"} and min(cpu.values()) > 0
    assert local["cpu_ratio"] == pytest.approx((cpu["physics"] + cpu["policy"]) / cpu["runner"],
                                               abs=2e-3)
    assert len(local["load_avg"]) == 2
    scaling = result["scaling"]
    assert scaling["identical_results"] is True
    assert scaling["speedup"] == pytest.approx(
        scaling["wall_1_worker_s"] / scaling["wall_2_workers_s"],
        abs=1e-3 + 2e-3 / scaling["wall_2_workers_s"])
    assert scaling["speedups"] and len(scaling["speedups"]) == scaling["repeats"]
    fresh = scaling["fresh_pool"]
    assert len(fresh["speedups"]) == scaling["repeats"] and scaling["kept_pool_start_s"] > 0
    assert fresh["speedup"] == pytest.approx(fresh["wall_1_worker_s"] / fresh["wall_2_workers_s"],
                                             abs=1e-3 + 2e-3 / fresh["wall_2_workers_s"])
    for key in ("ros", "ros_per_step"):
        ros = result[key]
        assert ros["episodes"] == 2 and ros["control_steps"] > 0
        assert ros["control_steps_per_s"] > 0
        assert set(ros["cpu_ms_per_step"]) == {"sim_node", "policy_node", "evaluator"}
    # The bound of a control step, measured right before each rate, and the ratio to it.
    for key, which, target in (("ros", "chunked_steps_per_s", 3000),
                               ("ros_per_step", "per_step_steps_per_s", 2000)):
        bound = result["ros_bound"][key]
        for kind in ("topic", "service"):
            assert 0 < bound[kind]["median_us"] <= bound[kind]["p99_us"]
        physics = bound["physics_us_per_step"]
        assert physics > 0
        assert bound["chunked_steps_per_s"] == pytest.approx(1e6 / physics, rel=1e-3)
        assert bound["per_step_steps_per_s"] == pytest.approx(
            1e6 / (physics + bound["topic"]["median_us"]), rel=1e-3)
        ros = result[key]
        assert ros["target_steps_per_s"] == target and ros["bound_steps_per_s"] == bound[which]
        assert ros["ratio_to_bound"] == pytest.approx(
            ros["control_steps_per_s"] / bound[which], abs=1e-3)
    # The same episodes either way (chunks change the transport, not the steps).
    assert result["ros"]["control_steps"] == result["ros_per_step"]["control_steps"]
    # A trained torch checkpoint (trained in the bench: 2 demonstrations, 40 steps), beside
    # in-process, chunked and per step, on the same task-world episodes with equal records.
    torch = result["torch"]
    assert len(torch["checkpoint"]) == 64 and torch["world"] == "task"
    assert torch["trained_here"]["demonstrations"] == 2
    assert torch["trained_here"]["train_steps"] == 40
    assert torch["identical_records"] is True
    steps = torch["inprocess"]["control_steps"]
    assert steps > 0 and torch["inprocess"]["control_steps_per_s"] > 0
    for key in ("ros", "ros_per_step"):
        assert torch[key]["control_steps"] == steps and torch[key]["control_steps_per_s"] > 0


@pytest.mark.parametrize("args, named", [
    (["eval", "--checkpoint", "abcdef12"], "--checkpoint='abcdef12'"),
    (["sim", "--checkpoint", "abcdef12", "--run-dir", "runs/x"], "only with the eval"),
])
def test_bench_checkpoint_options_are_checked(args, named, capsys):
    from clawgym_ros.cli import main

    assert main(["bench", *args, "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
