"""evaluator_node in ros mode with bad input (issue 17): a checkpoint whose observation the
task world cannot give ends the Evaluate goal ABORTED with one line naming the task and the
key, before any node of the evaluation graph starts (not after a timeout), and the node stays
up (~25 s)."""

from __future__ import annotations

import pytest

from test.conftest import ROOT, read_logs, send_goal_answered, spin_until
from test.test_eval_ros import PICK_PLACE_LAYOUT, train_checkpoint

pytestmark = pytest.mark.ros

PEG_SUITE = """name: node_peg
seed: 0
episodes_per_cell: 1
tasks:
  - task: peg_insert
    templates: [round_peg]
cells:
  nominal: true
"""


def test_ros_goal_with_a_checkpoint_the_world_cannot_feed_is_aborted_naming_the_key(
        procs, rclpy_context, tmp_path):
    pytest.importorskip("rclpy")
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Evaluate
    from clawgym_ros import constants as C

    root, ckpt = train_checkpoint(tmp_path / "run", PICK_PLACE_LAYOUT, chunk=2)
    suite = tmp_path / "peg.yaml"
    suite.write_text(PEG_SUITE)
    procs.env["PYTHONPATH"] = str(ROOT)
    procs.start_module("evaluator", "clawgym_ros.nodes.evaluator_node", [
        "--ros-args", "--params-file", str(ROOT / "config/params/evaluator.yaml"),
        "-p", f"run_dir:={root}", "-p", "world:=task"])
    node = Node("evaluate_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        client = ActionClient(node, Evaluate, C.ACTION_EVALUATE)
        assert client.wait_for_server(timeout_sec=60.0), read_logs(tmp_path)
        # Aborted before anything runs: sending it again when an answer is lost is harmless.
        sent = send_goal_answered(executor, client, Evaluate.Goal(
            checkpoint_id=ckpt[:12], suite=str(suite), seed=1, mode="ros", workers=1))
        assert sent is not None, read_logs(tmp_path)
        got = sent.result().get_result_async()
        assert spin_until(executor, got.done, 60.0), read_logs(tmp_path)
        assert got.result().status == GoalStatus.STATUS_ABORTED
        message = got.result().result.message
        assert "task='peg_insert' is invalid" in message and "it reads 'place_goal', " \
            "which peg_insert has not" in message and "\n" not in message, message
        # Refused before the graph starts (the message above), not by the answer timeout
        # (which says so): no wall-clock bound, the machine may be loaded.
        assert "did not answer" not in message and "timed out" not in message, message
        assert procs.procs[0][1].poll() is None   # the evaluator is still up
    finally:
        node.destroy_node()
