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


#: Modules that still spell per-task / per-family tables or rules of their own instead of
#: reading the registries (tasks/registry.py, perturbations/__init__.py), and why.
TABLES_ALLOWED = {
    # the task and family modules themselves, and the registries
    "tasks", "perturbations/__init__.py",
    # the physics-free evaluation model: made-up numbers per task/family, not a registration
    "evaluation/synthetic.py",
}


def _constant(node: ast.AST, prefix: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "C" and node.attr.startswith(prefix) and node.attr != "FAMILY_NONE"


def test_per_task_and_per_family_tables_live_in_the_registries():
    """No table keyed by several tasks or families and no ``task == C.TASK_X`` rule outside
    the registries (a new task or family must not need edits elsewhere; issue 19)."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in TABLES_ALLOWED or rel in TABLES_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                for prefix in ("TASK_", "FAMILY_"):
                    if sum(_constant(k, prefix) for k in node.keys if k is not None) >= 2:
                        offenders.append(f"{rel}:{node.lineno} a table keyed by C.{prefix}*")
            elif isinstance(node, ast.Compare) and any(
                    isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) and any(
                    _constant(x, "TASK_") for x in (node.left, *node.comparators)):
                offenders.append(f"{rel}:{node.lineno} compares a task with C.TASK_*")
    assert not offenders, "per-task/family rules outside the registries:\n" + "\n".join(
        offenders)


def test_registry_names_cost_no_heavy_import():
    """constants.TASKS / PERTURBATION_FAMILIES / OBSERVATION_FAMILIES (read by every config
    check) import no NumPy, simulator, torch or ROS."""
    import subprocess
    import sys

    code = ("import sys; from clawgym_ros import constants as C; "
            "C.TASKS; C.PERTURBATION_FAMILIES; C.OBSERVATION_FAMILIES; "
            "print(sorted(m for m in ('numpy', 'mujoco', 'gymnasium', 'torch', 'rclpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT.parent, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out
