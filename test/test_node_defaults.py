"""Defaults in one place (issue 19): the coordinator's action-server timeout is one value for
the CLI, the node, the loop graph and the params file. (The trainer's settings are checked in
test_trainer_node.py.)"""

from __future__ import annotations

import inspect

import pytest

from test.conftest import ROOT

pytestmark = pytest.mark.ros


def test_server_timeout_is_one_value_across_cli_node_graph_and_params():
    from clawgym_ros.cli import build_parser
    from clawgym_ros.commands.loop import DEFAULT_SERVER_TIMEOUT_S, run_loop_command
    from clawgym_ros.config import load_yaml
    from clawgym_ros.coordinator.graph import LoopGraph
    from clawgym_ros.nodes.coordinator_node import CoordinatorOptions

    assert CoordinatorOptions(config="x.yaml").server_timeout_s == DEFAULT_SERVER_TIMEOUT_S
    assert inspect.signature(run_loop_command).parameters["server_timeout"].default == \
        DEFAULT_SERVER_TIMEOUT_S
    assert inspect.signature(LoopGraph.run_loop).parameters["server_timeout_s"].default == \
        DEFAULT_SERVER_TIMEOUT_S
    args = build_parser().parse_args(["loop", "--config", "x", "--out", "y"])
    assert args.server_timeout == DEFAULT_SERVER_TIMEOUT_S
    params = load_yaml(ROOT / "config" / "params" / "coordinator.yaml")
    value = params["coordinator_node"]["ros__parameters"].get("server_timeout_s")
    assert value in (None, DEFAULT_SERVER_TIMEOUT_S)
