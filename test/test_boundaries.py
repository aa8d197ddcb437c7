"""Pure cores import no rclpy and no message packages; only nodes/ and ros_io/ may."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "clawgym_ros"
ROS_ALLOWED = {"nodes", "ros_io"}
ROS_MODULES = {
    "rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "std_srvs", "sensor_msgs",
    "geometry_msgs", "nav_msgs", "trajectory_msgs", "rosgraph_msgs", "lifecycle_msgs",
    "action_msgs", "clawgym_interfaces", "launch", "launch_ros", "moveit", "ros_gz",
}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_ros_imports_outside_nodes_and_ros_io():
    offenders = []
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ROS_ALLOWED:
            continue
        for lineno, module in _imports(ast.parse(path.read_text(), str(path))):
            top = module.split(".")[0]
            if top in ROS_MODULES:
                offenders.append(f"{rel}:{lineno} imports {module}")
    assert not offenders, "ROS imports in pure core modules:\n" + "\n".join(offenders)


def test_backends_that_need_a_workstation_are_imported_lazily():
    """moveit_py / ros_gz / launch may appear only inside functions, never at module top."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for _, module in _imports(node):
                    if module.split(".")[0] in {"moveit", "ros_gz", "launch", "launch_ros"}:
                        offenders.append(f"{path.relative_to(ROOT)} imports {module} at top")
    assert not offenders, "\n".join(offenders)
