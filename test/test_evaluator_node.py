"""evaluator_node in its own process (real ROS graph, isolated domain): the Evaluate action's
feedback, result and cancel, the latched EvalSummary, and agreement with `clawgym eval`."""

from __future__ import annotations

import json
import math

import pytest

from test.conftest import ROOT, read_logs, spin_until

pytestmark = pytest.mark.ros

POLICY = "scripted:pick_place:grasp_height=0.015"

SUITE = """name: node_small
description: evaluator_node test suite - nominal cube, a lighting point, held-out cylinder.
seed: 0
episodes_per_cell: {episodes}
schedule: constant
tasks:
  - task: pick_place
    templates: [cube]
    held_out_templates: [cylinder]
cells:
  nominal: true
  sweeps:
    - family: lighting
      intensities: [0.5]
"""



def _pool_workers(pid: int) -> set[int]:
    """The worker processes of ``pid``'s evaluation pool (children of its forkserver)."""
    from pathlib import Path

    def children(parent: int) -> set[int]:
        found = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.add(int(stat.parent.name))
        return found

    return {worker for server in children(pid) for worker in children(server)}


def _finished(client, executor, tmp_path, goal):
    """Send ``goal``, wait for its result (the wrapped result: status and result)."""
    sent = client.send_goal_async(goal)
    assert spin_until(executor, sent.done, 30.0)
    got = sent.result().get_result_async()
    assert spin_until(executor, got.done, 120.0), read_logs(tmp_path)
    return got.result()


def _start_node(procs, run_dir):
    procs.env["PYTHONPATH"] = str(ROOT)
    return procs.start_module("evaluator", "clawgym_ros.nodes.evaluator_node", [
        "--ros-args", "--params-file", str(ROOT / "config/params/evaluator.yaml"),
        "-p", f"run_dir:={run_dir}", "-p", "world:=scene", "-p", "max_steps:=120"])


def test_evaluate_action_feedback_result_latched_summary_and_cancel(procs, rclpy_context,
                                                                     tmp_path):
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Evaluate
    from clawgym_interfaces.msg import EvalSummary
    from clawgym_ros import constants as C
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.orchestration.evaluation import run_evaluation
    from clawgym_ros.ros_io.qos import LATCHED_QOS

    small, large = tmp_path / "small.yaml", tmp_path / "large.yaml"
    small.write_text(SUITE.format(episodes=2))
    large.write_text(SUITE.format(episodes=40))
    run = tmp_path / "run"
    _start_node(procs, run)
    node = Node("evaluate_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        client = ActionClient(node, Evaluate, C.ACTION_EVALUATE)
        assert client.wait_for_server(timeout_sec=60.0), read_logs(tmp_path)

        # 1. A small evaluation: feedback per episode, then the result with its summary.
        feedback: list = []
        sent = client.send_goal_async(
            Evaluate.Goal(checkpoint_id=POLICY, suite=str(small), seed=3, workers=1),
            feedback_callback=lambda fb: feedback.append(fb.feedback))
        assert spin_until(executor, sent.done, 30.0), read_logs(tmp_path)
        handle = sent.result()
        assert handle.accepted
        got = handle.get_result_async()
        assert spin_until(executor, got.done, 120.0), read_logs(tmp_path)
        assert got.result().status == GoalStatus.STATUS_SUCCEEDED
        result = got.result().result
        assert result.success, result.message
        total = 6   # 2 nominal + 2 lighting + 2 held-out
        # Feedback is a topic: the first message can precede discovery of the subscription.
        done = [f.done for f in feedback]
        assert done == sorted(set(done)) and done[-1] == total and len(done) >= total - 1, done
        assert {f.total for f in feedback} == {total}
        report = json.loads(open(result.report_path).read())
        assert report["n_episodes"] == total
        assert feedback[-1].success_rate == pytest.approx(
            sum(e["success"] for e in report["per_episode"]) / total)
        assert result.report_path.endswith(f"{result.report_id}/{C.FILE_REPORT_JSON}")
        summary = result.summary
        assert summary.report_id == result.report_id and summary.seed == 3
        assert [d.dimension for d in summary.dimensions] == list(C.DIMENSIONS)
        for dim in summary.dimensions:
            value = report["scores"][dim.dimension]["value"]
            if value is None:
                assert math.isnan(dim.value) and dim.n == 0
            else:
                assert dim.value == pytest.approx(value)
        assert summary.dimensions[0].n == report["scores"]["functional"]["n"] > 0

        # 2. The same evaluation through the in-process entry point (`clawgym eval`'s) gives
        #    the same content-addressed report.
        direct = run_evaluation(
            EvalConfig(suite=str(small), seed=3, workers=1), PolicySource.parse(POLICY),
            tmp_path / "direct", RolloutOptions(world="scene", max_steps=120))
        assert direct.report_id == result.report_id

        # 3. Latched: a subscriber that joins afterwards still gets the summary.
        latched: list = []
        node.create_subscription(EvalSummary, C.TOPIC_EVAL_SUMMARY, latched.append,
                                 LATCHED_QOS)
        assert spin_until(executor, lambda: bool(latched), 20.0), read_logs(tmp_path)
        assert latched[-1].report_id == result.report_id

        # 4. Cancel a long evaluation on two workers after its first episodes: canceled,
        #    nothing committed.
        reports_before = sorted((run / "artifacts" / C.KIND_REPORT).iterdir())
        feedback.clear()
        sent = client.send_goal_async(
            Evaluate.Goal(checkpoint_id=POLICY, suite=str(large), seed=3, workers=2),
            feedback_callback=lambda fb: feedback.append(fb.feedback))
        assert spin_until(executor, sent.done, 30.0)
        handle = sent.result()
        assert handle.accepted
        assert spin_until(executor, lambda: len(feedback) >= 2, 60.0), read_logs(tmp_path)
        cancel = handle.cancel_goal_async()
        assert spin_until(executor, cancel.done, 20.0)
        got = handle.get_result_async()
        assert spin_until(executor, got.done, 60.0), read_logs(tmp_path)
        assert got.result().status == GoalStatus.STATUS_CANCELED
        assert not got.result().result.success
        assert "cancelled" in got.result().result.message
        assert feedback[-1].done < feedback[-1].total == 120
        assert sorted((run / "artifacts" / C.KIND_REPORT).iterdir()) == reports_before

        # 4b. The node keeps its worker pool between goals (no process start per
        #     evaluation): the next two-worker goal runs on the same worker processes and
        #     gives the one-worker report.
        workers = _pool_workers(procs.procs[0][1].pid)
        assert len(workers) == 2, workers
        got = _finished(client, executor, tmp_path,
                        Evaluate.Goal(checkpoint_id=POLICY, suite=str(small), seed=3, workers=2))
        assert got.result.report_id == result.report_id
        assert _pool_workers(procs.procs[0][1].pid) == workers

        # 4c. A goal's calibration: the episodes run at it (the report names it and equals
        #     the in-process evaluation at it); the next goal runs at the node's own again.
        from clawgym_ros.calibration.apply import calibration_scope
        from clawgym_ros.calibration.job import CalibrateRequest, run_calibration
        from test.test_loop_distill import twin_log

        log = twin_log(tmp_path / "robot.mcap", 2.5, seed=1)
        cal, _ = run_calibration(run, CalibrateRequest(bag=str(log), params=("damping_scale",),
                                                       starts=1))
        calibrated = _finished(client, executor, tmp_path, Evaluate.Goal(
            checkpoint_id=POLICY, suite=str(small), seed=3, workers=1,
            calibration_id=cal.id)).result
        assert calibrated.success and calibrated.report_id != result.report_id
        assert json.loads(open(calibrated.report_path).read())["config"]["calibration"] == \
            cal.id
        with calibration_scope(run, cal.id):
            direct = run_evaluation(
                EvalConfig(suite=str(small), seed=3, workers=1), PolicySource.parse(POLICY),
                run, RolloutOptions(world="scene", max_steps=120))
        assert direct.report_id == calibrated.report_id
        got = _finished(client, executor, tmp_path,
                        Evaluate.Goal(checkpoint_id=POLICY, suite=str(small), seed=3, workers=1))
        assert got.result.report_id == result.report_id

        # 5. Errors are results, not crashes: an unknown checkpoint aborts with a message.
        sent = client.send_goal_async(Evaluate.Goal(checkpoint_id="0" * 12, suite=str(small),
                                                    seed=3, workers=1))
        assert spin_until(executor, sent.done, 30.0)
        got = sent.result().get_result_async()
        assert spin_until(executor, got.done, 30.0)
        assert got.result().status == GoalStatus.STATUS_ABORTED
        assert got.result().result.message
        assert procs.procs[0][1].poll() is None   # the node is still up
    finally:
        node.destroy_node()


def test_suite_max_steps_bounds_every_episode(tmp_path):
    """A suite's ``max_steps`` is the episode horizon of every evaluation of it."""
    from clawgym_ros.errors import ConfigError
    from clawgym_ros.evaluation.config import EvalConfig
    from clawgym_ros.evaluation.rollout import PolicySource, RolloutOptions
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.orchestration.evaluation import run_evaluation

    path = tmp_path / "short.yaml"
    path.write_text(SUITE.format(episodes=1).replace("schedule:", "max_steps: 40\nschedule:"))
    assert load_suite(str(path)).max_steps == 40
    outcome = run_evaluation(EvalConfig(suite=str(path), seed=3, workers=1),
                             PolicySource.parse(POLICY), tmp_path / "run",
                             RolloutOptions(world="scene"))
    assert outcome.report["suite"]["max_steps"] == 40
    durations = [e["duration_s"] for e in outcome.report["per_episode"]]
    assert len(durations) == 3 and max(durations) <= 40 * 0.02 + 1e-9
    assert not any(e["success"] for e in outcome.report["per_episode"])  # too short to lift
    bad = tmp_path / "bad.yaml"
    bad.write_text(SUITE.format(episodes=1).replace("schedule:", "max_steps: -5\nschedule:"))
    with pytest.raises(ConfigError, match="max_steps"):
        load_suite(str(bad))
