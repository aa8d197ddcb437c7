"""synthesis_node in its own process: lifecycle bring-up, a Synthesize goal with feedback
(real experts), then a cancelled goal."""

from __future__ import annotations

import pytest

from test.conftest import ROOT, configure_and_activate, read_logs, spin_until

pytestmark = pytest.mark.ros



def test_synthesize_action_across_processes(procs, rclpy_context, tmp_path):
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from clawgym_interfaces.action import Synthesize
    from clawgym_interfaces.msg import MixtureEntry
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.dataset.reader import open_dataset

    run = tmp_path / "run"
    procs.env["PYTHONPATH"] = str(ROOT)
    procs.start_module("synthesis", "clawgym_ros.nodes.synthesis_node",
                       ["--ros-args", "-p", "autostart:=false"])
    node = Node("synth_client", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        configure_and_activate(node, executor, C.NODE_SYNTHESIS, tmp_path, 30.0)
        action = ActionClient(node, Synthesize, C.ACTION_SYNTHESIZE)
        assert action.wait_for_server(timeout_sec=20.0)

        def send(episodes: int, feedback: list, options_json: str = ""):
            goal = Synthesize.Goal(
                mixture=[MixtureEntry(task="pick_place", task_template="cube",
                                      perturbation_family="none", weight=1.0)],
                episodes=episodes, seed=3, workers=1, run_dir=str(run),
                options_json=options_json)
            sent = action.send_goal_async(goal, feedback_callback=feedback.append)
            assert spin_until(executor, sent.done, 10.0)
            assert sent.result().accepted
            return sent.result()

        feedback: list = []
        handle = send(3, feedback)
        result_future = handle.get_result_async()
        assert spin_until(executor, result_future.done, 120.0), read_logs(tmp_path)
        response = result_future.result()
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.message
        result = response.result
        assert result.success and result.accepted + result.rejected == 3
        # Feedback is a topic: the first message can precede discovery of the subscription.
        done = [f.feedback.done for f in feedback]
        assert done == sorted(set(done)) and done[-1] == 3 and len(done) >= 2, done
        assert feedback[-1].feedback.total == 3
        ds = open_dataset(ArtifactStore(run), result.dataset_id)
        assert len(ds) == result.accepted

        feedback = []
        handle = send(500, feedback)
        assert spin_until(executor, lambda: feedback, 60.0), read_logs(tmp_path)
        cancel = handle.cancel_goal_async()
        assert spin_until(executor, cancel.done, 10.0)
        result_future = handle.get_result_async()
        assert spin_until(executor, result_future.done, 30.0), read_logs(tmp_path)
        response = result_future.result()
        assert response.status == GoalStatus.STATUS_CANCELED
        assert "cancelled after" in response.result.message
        assert len(ArtifactStore(run).list(C.KIND_DATASET)) == 1

        # Expert options (a loop's synthesis_options): the dataset `clawgym synth --option`
        # makes; a bad option aborts the goal naming it, nothing committed.
        from clawgym_ros.orchestration.synthesis import SynthRequest, synthesize
        from clawgym_ros.synthesis.mixture import MixtureSpec

        options = {"timing": "optimal", "acceleration_scale": 2.0}
        done_future = send(2, [], '{"timing": "optimal", "acceleration_scale": 2}') \
            .get_result_async()
        assert spin_until(executor, done_future.done, 120.0), read_logs(tmp_path)
        result = done_future.result().result
        assert result.success, result.message
        direct, _ = synthesize(SynthRequest(
            out=str(tmp_path / "direct"), episodes=2, seed=3, workers=1, options=options,
            mixture=MixtureSpec.from_entries([{"task": "pick_place", "template": "cube"}])))
        assert direct.id == result.dataset_id
        bad = send(2, [], '{"timing": "fast"}').get_result_async()
        assert spin_until(executor, bad.done, 30.0)
        assert bad.result().status == GoalStatus.STATUS_ABORTED
        assert "options_json.timing='fast'" in bad.result().result.message
        assert len(ArtifactStore(run).list(C.KIND_DATASET)) == 2
    finally:
        executor.shutdown()
        node.destroy_node()


def test_a_recovery_goal_takes_its_expert_options_from_options_json():
    # A Synthesize goal with from_report runs its recovery episodes with options_json's expert
    # options (they were ignored), checked like a mixture goal's.
    from types import SimpleNamespace

    from clawgym_ros.errors import ConfigError
    from clawgym_ros.nodes.synthesis_node import goal_expert_options

    goal = SimpleNamespace(options_json='{"timing": "optimal", "acceleration_scale": 2}')
    assert goal_expert_options(goal) == {"timing": "optimal", "acceleration_scale": 2.0}
    assert goal_expert_options(SimpleNamespace(options_json="")) == {}
    with pytest.raises(ConfigError, match="options_json.timing"):
        goal_expert_options(SimpleNamespace(options_json='{"timing": "fast"}'))
