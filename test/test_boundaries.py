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


#: The layer order, lowest first: a module may import its own layer and the layers below it
#: at module level. Entries are package folders or modules (relative to clawgym_ros/, no
#: ``.py``); the longest matching entry decides, so a module can sit in another layer than its
#: folder when its role says so (each such entry says why).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("__init__", "errors", "safe_load", "constants", "config", "plugins", "procs",
                    "safety")),
    ("artifacts", ("artifacts",)),
    # Records shared by several layers: episode specs and results (synthesis/episode.py,
    # evaluation/records.py), the Policy protocol, restorable failure-state snapshots. They
    # import only the foundation.
    # The active calibration (sim/active_calibration.py, with the parameter table
    # sim/calibration_params.py) is such a record too: worker pools activate it in their workers.
    ("records", ("synthesis", "evaluation/protocol", "evaluation/records",
                 "evaluation/failure_states", "sim/active_calibration",
                 "sim/calibration_params")),
    ("sim", ("sim",)),
    ("planning", ("planning",)),
    ("perturbations", ("perturbations",)),
    # sim/registration (Gymnasium ids of every registered task env, run by ``import
    # clawgym_ros.sim``), sim/modes (the RL interface, built from a task's reward terms) and
    # sim/session (sim_node's core: a session of a registered task) sit on top of the tasks.
    ("tasks", ("tasks", "sim/__init__", "sim/registration", "sim/modes", "sim/session")),
    ("dataset", ("dataset",)),
    ("training", ("training",)),
    ("evaluation", ("evaluation",)),
    ("report", ("report",)),
    ("ros_io", ("ros_io",)),
    # training/sequence (``train --sequence``) trains and evaluates in turn
    ("orchestration", ("orchestration", "ray_executor", "training/sequence")),
    ("calibration", ("calibration",)),
    ("coordinator", ("coordinator",)),
    ("bench", ("bench",)),
    ("commands", ("commands", "cli")),
    ("nodes", ("nodes",)),
)

#: Imports inside functions that reach up the order, each allowed for a reason:
#: (importing module, imported module) -> why.
LAZY_UPWARD: dict[tuple[str, str], str] = {
    ("constants", "tasks/registry"): "constants.TASKS and friends are read from the task "
    "registry on first access (module __getattr__), so a new task is one registration",
    ("constants", "perturbations"): "constants.PERTURBATION_FAMILIES / OBSERVATION_FAMILIES "
    "likewise come from the family registry on first access",
    ("synthesis/pool", "ray_executor"): "the Ray executor is an optional backend (ray is "
    "installed for cluster runs only), chosen by name at run time",
    ("evaluation/workers", "ray_executor"): "the same optional Ray executor for evaluation",
    ("ros_io/robot_log", "calibration/log"): "the ROS recorder of robot logs writes them in "
    "the calibration's log format (one writer, calibration/log.encode_log)",
}

def _layer(module: str) -> int:
    best = (-1, -1)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if (module == entry or module.startswith(entry + "/")) and len(entry) > best[1]:
                best = (index, len(entry))
    assert best[0] >= 0, f"{module} is in no layer of LAYERS"
    return best[0]


def _package_imports(path: Path, tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """(import node, imported clawgym_ros module as a path like ``tasks/registry``)."""
    package = list(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                base = package[:len(package) - node.level + 1] + base
            names = []
            for alias in node.names:
                sub = [*base, alias.name]
                is_module = (ROOT.parent.joinpath(*sub).with_suffix(".py").exists()
                             or ROOT.parent.joinpath(*sub).is_dir())
                names.append(".".join(sub if is_module else base))
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "clawgym_ros" and len(parts) > 1:
                out.append((node, "/".join(parts[1:])))
    return out


def _outside_functions(tree: ast.AST) -> set[int]:
    """ids of the nodes that run at import (not inside a function body)."""
    found, todo = set(), [tree]
    while todo:
        node = todo.pop()
        found.add(id(node))
        todo += [c for c in ast.iter_child_nodes(node)
                 if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    return found


def test_layer_order():
    """No module imports a layer above its own at module level; function-level imports up the
    order only where LAZY_UPWARD gives the reason (issue 19: layers on contracts)."""
    offenders, used = [], set()
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("").as_posix()
        tree = ast.parse(path.read_text(), str(path))
        top = _outside_functions(tree)
        own = _layer(rel)
        for node, target in _package_imports(path, tree):
            if _layer(target) <= own:
                continue
            where = f"{rel}:{node.lineno} ({LAYERS[own][0]}) imports {target} " \
                    f"({LAYERS[_layer(target)][0]})"
            if id(node) in top:
                offenders.append(where + " at module level")
                continue
            key = next((k for k in LAZY_UPWARD if k[0] == rel and (
                target == k[1] or target.startswith(k[1] + "/"))), None)
            if key is None:
                offenders.append(where + " in a function, without a reason in LAZY_UPWARD")
            if key is not None:
                used.add(key)
    assert not offenders, "imports up the layer order:\n" + "\n".join(offenders)
    assert not set(LAZY_UPWARD) - used, f"stale LAZY_UPWARD entries: {set(LAZY_UPWARD) - used}"


def test_no_mujoco_outside_sim():
    """The World contract (sim/world.py, sim/collision.py, the backends) is the only way to
    the physics engine: no module outside sim/ imports mujoco, at module level or in a
    function (issue 19). planning/ik.py's solver, mink, is MuJoCo-based and still takes the
    model."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "sim":
            continue
        for lineno, module in _imports(ast.parse(path.read_text(), str(path))):
            if module.split(".")[0] == "mujoco":
                offenders.append(f"{rel}:{lineno} imports {module}")
    assert not offenders, "mujoco imports outside sim/:\n" + "\n".join(offenders)
