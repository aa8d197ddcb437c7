"""Launch files: every executable and parameter file they name exists (AST, runs anywhere);
building the launch descriptions needs launch/launch_ros (ROS workstation: skipped here)."""

from __future__ import annotations

import ast
import importlib.util
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*_launch.py"))
PACKAGE = "clawgym_ros"


def _setup_nodes() -> set[str]:
    """Roles listed in setup.py NODES whose module exists (what node_scripts() installs)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "NODES"
                                                for t in node.targets):
            roles = ast.literal_eval(node.value)
            return {f"{r}_node" for r in roles
                    if (ROOT / PACKAGE / "nodes" / f"{r}_node.py").is_file()}
    raise AssertionError("setup.py has no NODES tuple")


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(expr: ast.expr | None, names: dict[str, str]) -> str | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        return names.get(expr.id)
    return None


def _named_things(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(package, executable) of every Node(...) and every parameter/config file named."""
    tree = ast.parse(path.read_text(), str(path))
    names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
             and isinstance(n.value.value, str)}
    executables, files = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if func == "Node":
                pkg = _const(_kw(node, "package"), names)
                exe = _const(_kw(node, "executable"), names)
                assert pkg and exe, f"{path.name}:{node.lineno}: Node without literal " \
                                    "package/executable"
                executables.append((pkg, exe))
            elif func == "_params" and len(node.args) == 2:
                files.append(f"params/{_const(node.args[1], names)}.yaml")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.endswith((".yaml", ".yml")) and "/" not in node.value and \
                not node.value.startswith("."):
            files.append(node.value)
    return executables, files


def test_launch_files_exist():
    names = {p.name for p in LAUNCH_FILES}
    assert {"clawgym_launch.py", "gazebo_launch.py", "hil_launch.py"} <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_named_executable_and_params_file_exists(path):
    scripts = _setup_nodes()
    executables, files = _named_things(path)
    missing = [exe for pkg, exe in executables if pkg == PACKAGE and exe not in scripts]
    assert not missing, f"{path.name} starts {missing}, which setup.py does not install"
    config = ROOT / "config"
    for name in files:
        if name.startswith("params/"):
            assert (config / name).is_file(), f"{path.name} names config/{name}: missing"
        else:
            assert list(config.rglob(name)), f"{path.name} names {name}: not under config/"


def test_hil_launch_routes_every_command_through_safety_node():
    executables, _ = _named_things(ROOT / "launch" / "hil_launch.py")
    exes = [e for _, e in executables]
    assert "safety_node" in exes and "policy_node" in exes
    assert "sim_node" not in exes
    text = (ROOT / "launch" / "hil_launch.py").read_text()
    # The policy's command outputs are remapped to the safety filter's inputs.
    assert "(C.TOPIC_CMD_VEL, C.TOPIC_CMD_VEL_IN)" in text
    assert "(C.TOPIC_JOINT_TRAJECTORY, C.TOPIC_JOINT_TRAJECTORY_IN)" in text


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_description_builds(path):
    if importlib.util.find_spec("launch") is None or importlib.util.find_spec(
            "launch_ros") is None:
        pytest.skip("launch/launch_ros are not available as PyPI wheels; run on a ROS "
                    "workstation (ROS_DISTRO sourced)")
    module = runpy.run_path(str(path))
    description = module["generate_launch_description"]()
    assert description.entities
