"""Launch files: every executable and parameter file they name exists (AST), and each launch
file's setup (the OpaqueFunction's function) runs with its default and non-default arguments;
the resulting nodes (executables, names, arguments, parameters, remappings) are checked.

Where launch / launch_ros are installed (a ROS workstation) the real launch context, argument
declarations and OpaqueFunction run them; here (no launch wheels) a minimal stand-in with the
same interface does (LaunchContext.launch_configurations, DeclareLaunchArgument.execute,
LaunchConfiguration.perform, OpaqueFunction.execute, as in ros2/launch jazzy). Node and
IncludeLaunchDescription are recorded in both cases; on a workstation each recorded Node is
also built as a real launch_ros Node to check its arguments.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from clawgym_ros import constants as C
from clawgym_ros.sim import scene_spec as S

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


# --------------------------------------------------------------- running the setup functions


def _real_launch() -> bool:
    """launch and launch_ros installed (the repo's own launch/ folder does not count)."""
    try:
        return importlib.util.find_spec("launch_ros") is not None and \
            importlib.util.find_spec("launch.actions") is not None
    except (ModuleNotFoundError, ValueError):
        return False


#: decided before any test puts the stand-ins into sys.modules
REAL_LAUNCH = _real_launch()


@dataclasses.dataclass
class RecordedNode:
    """What a launch file passed to launch_ros.actions.Node."""

    package: str
    executable: str
    name: str | None = None
    output: str | None = None
    arguments: list = dataclasses.field(default_factory=list)
    parameters: list = dataclasses.field(default_factory=list)
    remappings: list = dataclasses.field(default_factory=list)

    def __init__(self, *, executable, package=None, name=None, output=None, arguments=None,
                 parameters=None, remappings=None, **kwargs):
        self.package, self.executable, self.name, self.output = package, executable, name, output
        self.arguments = list(arguments or [])
        self.parameters = list(parameters or [])
        self.remappings = list(remappings or [])
        self.kwargs = kwargs

    def param_dict(self) -> dict[str, Any]:
        """The dict parameters merged (file parameters left out)."""
        out: dict[str, Any] = {}
        for entry in self.parameters:
            if isinstance(entry, dict):
                out.update(entry)
        return out

    def param_files(self) -> list[Path]:
        return [Path(entry) for entry in self.parameters if not isinstance(entry, dict)]


class RecordedInclude:
    def __init__(self, source, launch_arguments=None, **kwargs):
        self.source = source
        self.launch_arguments = dict(launch_arguments or ())


class _SourceStandIn:
    def __init__(self, path):
        self.path = path


def _standin_modules() -> dict[str, types.ModuleType]:
    """launch / launch_ros stand-ins: just the calls the launch files make."""

    class LaunchContext:
        def __init__(self):
            self.launch_configurations: dict[str, str] = {}

    class LaunchDescription:
        def __init__(self, entities=None):
            self.entities = list(entities or [])

    class DeclareLaunchArgument:
        def __init__(self, name, *, default_value=None, description="", choices=None):
            self.name, self.default_value, self.description = name, default_value, description
            self.choices = choices

        def execute(self, context):
            if self.name not in context.launch_configurations:
                if self.default_value is None:
                    raise RuntimeError(f"Required launch argument {self.name!r} not provided")
                context.launch_configurations[self.name] = self.default_value
            if self.choices is not None and \
                    context.launch_configurations[self.name] not in self.choices:
                raise RuntimeError(f"{self.name}: not one of {self.choices}")

    class OpaqueFunction:
        def __init__(self, *, function, args=None, kwargs=None):
            self.function, self.args, self.kwargs = function, args or [], kwargs or {}

        def execute(self, context):
            return self.function(context, *self.args, **self.kwargs)

    class LaunchConfiguration:
        def __init__(self, variable_name, *, default=None):
            self.variable_name, self.default = variable_name, default

        def perform(self, context):
            if self.variable_name not in context.launch_configurations:
                if self.default is None:
                    raise RuntimeError(f"launch configuration {self.variable_name!r} missing")
                return self.default
            return context.launch_configurations[self.variable_name]

    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        return mod

    actions = module("launch.actions", DeclareLaunchArgument=DeclareLaunchArgument,
                     OpaqueFunction=OpaqueFunction, IncludeLaunchDescription=RecordedInclude)
    substitutions = module("launch.substitutions", LaunchConfiguration=LaunchConfiguration)
    sources = module("launch.launch_description_sources",
                     PythonLaunchDescriptionSource=_SourceStandIn)
    launch = module("launch", LaunchDescription=LaunchDescription, LaunchContext=LaunchContext,
                    actions=actions, substitutions=substitutions,
                    launch_description_sources=sources)
    ros_actions = module("launch_ros.actions", Node=RecordedNode)
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch.launch_description_sources": sources,
            "launch_ros": module("launch_ros", actions=ros_actions),
            "launch_ros.actions": ros_actions}


def run_launch(path: Path, monkeypatch, patch: dict[str, Any] | None = None,
               **arguments: str) -> list:
    """Declare the arguments of ``path``'s description (``arguments`` override the defaults),
    then run its OpaqueFunction; returns the actions it made (RecordedNode/RecordedInclude).
    ``patch``: module attributes replaced after loading (e.g. a share-directory lookup)."""
    real = REAL_LAUNCH
    if not real:
        for name, mod in _standin_modules().items():
            monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location(f"launch_file_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "Node", RecordedNode)
    for attr, value in (patch or {}).items():
        monkeypatch.setattr(module, attr, value)
    if hasattr(module, "IncludeLaunchDescription"):
        monkeypatch.setattr(module, "IncludeLaunchDescription", RecordedInclude)
        monkeypatch.setattr(module, "PythonLaunchDescriptionSource", _SourceStandIn)
    launch = importlib.import_module("launch")
    description = module.generate_launch_description()
    declared = [e for e in description.entities if hasattr(e, "default_value")]
    unknown = set(arguments) - {e.name for e in declared}
    assert not unknown, f"{path.name} declares no argument {sorted(unknown)}"
    context = launch.LaunchContext()
    context.launch_configurations.update(arguments)
    for entity in declared:
        entity.execute(context)
    actions = []
    for entity in description.entities:
        if entity not in declared:
            actions += entity.execute(context) or []
    if real:
        from launch_ros.actions import Node

        for action in actions:
            if isinstance(action, RecordedNode):
                Node(package=action.package, executable=action.executable, name=action.name,
                     output=action.output, arguments=action.arguments or None,
                     parameters=action.parameters or None,
                     remappings=action.remappings or None)
    return actions


def _nodes(actions) -> dict[str, RecordedNode]:
    nodes = [a for a in actions if isinstance(a, RecordedNode)]
    names = [n.name or n.executable for n in nodes]
    assert len(names) == len(set(names)), f"two nodes named alike: {names}"
    return dict(zip(names, nodes, strict=True))


#: executable -> the dataclass its ROS parameters are declared from (declare_config)
def _param_classes() -> dict[str, type]:
    from clawgym_ros.evaluation.ros_mode import PolicyNodeConfig
    from clawgym_ros.nodes.calibration_node import CalibrationNodeOptions
    from clawgym_ros.nodes.coordinator_node import CoordinatorOptions
    from clawgym_ros.nodes.evaluator_node import EvaluatorNodeOptions
    from clawgym_ros.nodes.planner_node import PlannerNodeConfig
    from clawgym_ros.nodes.synthesis_node import SynthesisNodeOptions
    from clawgym_ros.nodes.trainer_node import TrainerNodeOptions
    from clawgym_ros.safety import SafetyLimits
    from clawgym_ros.sim.session import SimNodeConfig

    return {"sim_node": SimNodeConfig, "planner_node": PlannerNodeConfig,
            "synthesis_node": SynthesisNodeOptions, "trainer_node": TrainerNodeOptions,
            "evaluator_node": EvaluatorNodeOptions, "coordinator_node": CoordinatorOptions,
            "policy_node": PolicyNodeConfig, "safety_node": SafetyLimits,
            "calibration_node": CalibrationNodeOptions}


def _flat(doc: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in doc.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out.add(f"{prefix}{key}")
    return out


def _check_parameters(nodes: dict[str, RecordedNode]) -> None:
    """Every parameter a node gets (dict or file) is one it declares; files exist and hold a
    block for that node name."""
    from clawgym_ros.ros_io.params import _flatten

    classes = _param_classes()
    for name, node in nodes.items():
        if node.package != PACKAGE:
            continue
        given = set(node.param_dict())
        for path in node.param_files():
            assert path.is_file(), f"{name}: parameter file {path} missing"
            doc = yaml.safe_load(path.read_text())
            assert set(doc) == {node.name}, f"{path.name}: blocks {set(doc)}, node {node.name}"
            given |= _flat(doc[node.name]["ros__parameters"])
        if not given:
            continue
        assert node.executable in classes, f"no parameter class known for {node.executable}"
        declared = {field_name for field_name, _, _ in _flatten(classes[node.executable])}
        unknown = given - declared
        assert not unknown, f"{name} gets undeclared parameters {sorted(unknown)}"


# ------------------------------------------------------------------------ clawgym_launch.py

CLAWGYM = ROOT / "launch" / "clawgym_launch.py"
INTERPOSERS = {"sensor_noise_node", "gps_dropout_node", "lighting_node", "dynamics_node"}
SERVERS = {"sim_node", "planner_node", "synthesis_node", "trainer_node", "evaluator_node",
           "calibration_node"}


def test_clawgym_launch_defaults(monkeypatch):
    nodes = _nodes(run_launch(CLAWGYM, monkeypatch))
    assert set(nodes) == SERVERS | INTERPOSERS | {"coordinator_node"}
    for name, node in nodes.items():
        assert (node.package, node.executable) == (PACKAGE, name)
    _check_parameters(nodes)
    sim = nodes["sim_node"]
    # sim_node is a lifecycle node nothing else activates: without --autostart it served only
    # its lifecycle services (no sensors, no /clock, no sim services).
    assert "--autostart" in sim.arguments
    assert sim.param_dict() == {"scenario": "tabletop"}
    assert sim.remappings == []  # the interposers turn raw topics into clean ones
    assert nodes["planner_node"].param_dict() == {"scene": "tabletop"}
    run_dir = str((Path.cwd() / "runs/loop").resolve())
    for name in ("synthesis_node", "trainer_node", "evaluator_node", "calibration_node"):
        assert nodes[name].param_dict() == {"run_dir": run_dir}
    coordinator = nodes["coordinator_node"].param_dict()
    assert coordinator["run_dir"] == run_dir and "seed" not in coordinator
    assert Path(coordinator["config"]).is_file()
    assert Path(coordinator["config"]).name == "pick_place.yaml"
    # every server that is a lifecycle node starts itself (autostart in its params file)
    for name in ("planner_node", "synthesis_node", "trainer_node", "evaluator_node",
                 "calibration_node"):
        doc = yaml.safe_load(nodes[name].param_files()[0].read_text())
        assert doc[name]["ros__parameters"].get("autostart", name == "planner_node"), name


def test_clawgym_launch_without_interposers_or_coordinator(monkeypatch, tmp_path):
    from clawgym_ros.sim.topics import raw_to_clean_remaps

    nodes = _nodes(run_launch(CLAWGYM, monkeypatch, scene="outdoor", perturbations="false",
                              coordinator="false", run_dir=str(tmp_path / "r")))
    assert set(nodes) == SERVERS
    _check_parameters(nodes)
    sim = nodes["sim_node"]
    assert "--autostart" in sim.arguments
    assert sim.param_dict() == {"scenario": "outdoor"}
    assert sim.remappings == raw_to_clean_remaps()
    assert (C.TOPIC_JOINT_STATES_RAW, C.TOPIC_JOINT_STATES) in sim.remappings
    assert nodes["planner_node"].param_dict() == {"scene": "outdoor"}
    assert nodes["trainer_node"].param_dict() == {"run_dir": str(tmp_path / "r")}


def test_clawgym_launch_coordinator_seed_and_config_path(monkeypatch, tmp_path):
    config = tmp_path / "loop.yaml"
    config.write_text("{}\n")
    nodes = _nodes(run_launch(CLAWGYM, monkeypatch, seed="7", loop_config=str(config)))
    params = nodes["coordinator_node"].param_dict()
    assert params["seed"] == 7 and params["config"] == str(config)
    _check_parameters(nodes)


def test_clawgym_launch_rejects_an_unknown_scene(monkeypatch):
    with pytest.raises(RuntimeError, match="scene='moon'"):
        run_launch(CLAWGYM, monkeypatch, scene="moon")


# ---------------------------------------------------------------------------- hil_launch.py

HIL = ROOT / "launch" / "hil_launch.py"


def test_hil_launch_defaults_need_a_checkpoint(monkeypatch):
    with pytest.raises(RuntimeError, match="checkpoint"):
        run_launch(HIL, monkeypatch)


def test_hil_launch_runs_the_policy_free_through_safety_node(monkeypatch, tmp_path):
    nodes = _nodes(run_launch(HIL, monkeypatch, checkpoint="abc123", run_dir=str(tmp_path)))
    # no evaluator: it would score simulated episodes (in_process), not the robot
    assert set(nodes) == {"sensor_noise_node", "gps_dropout_node", "policy_node",
                          "safety_node"}
    _check_parameters(nodes)
    policy = nodes["policy_node"]
    # policy_node's parameter is "policy" (checkpoint_id was ignored and the node exited)
    assert policy.param_dict() == {"policy": "abc123", "run_dir": str(tmp_path),
                                   "scene": "tabletop", "mode": "free"}
    remap = dict(policy.remappings)
    assert remap[C.TOPIC_JOINT_TRAJECTORY] == C.TOPIC_JOINT_TRAJECTORY_IN
    assert remap[C.TOPIC_CMD_VEL] == C.TOPIC_CMD_VEL_IN
    assert remap[C.TOPIC_JOINT_STATES] == "perturbed/joint_states"
    assert remap[C.TOPIC_OBJECT_POSES] == "perturbed/object_poses"
    noise = dict(nodes["sensor_noise_node"].remappings)
    assert noise[C.TOPIC_JOINT_STATES_RAW] == "/joint_states"
    assert noise[C.TOPIC_OBJECT_POSES_RAW] == "/object_poses"
    assert noise[C.TOPIC_JOINT_STATES] == remap[C.TOPIC_JOINT_STATES]
    safety = dict(nodes["safety_node"].remappings)
    assert safety[C.TOPIC_JOINT_TRAJECTORY] == "/joint_trajectory"
    assert safety[C.TOPIC_CMD_VEL] == "/cmd_vel"
    # only safety_node writes the robot's arm and base command topics
    for name, node in nodes.items():
        if name != "safety_node":
            targets = {new for _, new in node.remappings}
            assert not targets & {"/joint_trajectory", "/cmd_vel"}, name


def test_hil_launch_robot_topics_and_mobile_base(monkeypatch, tmp_path):
    nodes = _nodes(run_launch(HIL, monkeypatch, checkpoint="scripted:gps_nav", scene="outdoor",
                              run_dir=str(tmp_path), joint_states="/robot/joint_states",
                              cmd_vel="/robot/cmd_vel", estop="/robot/estop",
                              gps="/robot/gps"))
    assert nodes["policy_node"].param_dict()["scene"] == "outdoor"
    safety = dict(nodes["safety_node"].remappings)
    assert safety[C.TOPIC_CMD_VEL] == "/robot/cmd_vel"
    assert safety[C.TOPIC_ESTOP] == "/robot/estop"
    assert safety[C.TOPIC_JOINT_STATES] == "/robot/joint_states"
    assert dict(nodes["gps_dropout_node"].remappings)[C.TOPIC_GPS_RAW] == "/robot/gps"
    with pytest.raises(RuntimeError, match="scene"):
        run_launch(HIL, monkeypatch, checkpoint="x", scene="moon")


def test_hil_launch_task_gives_the_policy_its_task_state(monkeypatch, tmp_path):
    """A pick_place checkpoint observes place_goal: task:=pick_place sets policy_node's task
    and its task_state comes from the robot side's topic."""
    nodes = _nodes(run_launch(HIL, monkeypatch, checkpoint="abc", run_dir=str(tmp_path),
                              task="pick_place", task_state="/robot/task_state"))
    _check_parameters(nodes)
    policy = nodes["policy_node"]
    assert policy.param_dict()["task"] == "pick_place"
    assert dict(policy.remappings)[C.TOPIC_TASK_STATE] == "/robot/task_state"


# ------------------------------------------------------------------------- gazebo_launch.py

GAZEBO = ROOT / "launch" / "gazebo_launch.py"




def _gazebo(monkeypatch, tmp_path, **arguments) -> list:
    """gazebo_launch's actions; ros_gz_sim's share directory is faked (not installed here)
    and the rendered bridge config lands in ``tmp_path``."""
    import tempfile

    pytest.importorskip("xacro")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    share = tmp_path / "ros_gz_sim"
    return run_launch(GAZEBO, monkeypatch, patch={"_ros_gz_sim_share": lambda: str(share)},
                      **arguments)


def test_gazebo_launch_defaults(monkeypatch, tmp_path):
    actions = _gazebo(monkeypatch, tmp_path)
    includes = [a for a in actions if isinstance(a, RecordedInclude)]
    assert len(includes) == 1
    assert includes[0].source.path == str(tmp_path / "ros_gz_sim/launch/gz_sim.launch.py")
    gz_args = includes[0].launch_arguments["gz_args"]
    assert gz_args == f"-s -r {ROOT / 'worlds' / 'tabletop.sdf'}"  # headless by default
    nodes = _nodes(actions)
    assert {(n.package, n.executable) for n in nodes.values()} == {
        ("robot_state_publisher", "robot_state_publisher"), ("ros_gz_sim", "create"),
        ("ros_gz_bridge", "parameter_bridge")}
    rsp = nodes["robot_state_publisher"].param_dict()
    assert rsp["use_sim_time"] is True
    # bolted to the world, at the scene's base pose (TF "world" = gz-sim's world); spawned at 0
    robot = ET.fromstring(rsp["robot_description"])
    joint = next(j for j in robot.findall("joint") if j.find("parent").get("link") == "world")
    assert joint.get("type") == "fixed" and joint.find("child").get("link") == "base_link"
    xyz = [float(v) for v in joint.find("origin").get("xyz").split()]
    assert xyz == pytest.approx(list(S.load_scene("tabletop").robot.pos))
    create = nodes["create"].arguments
    flags = dict(zip(create[::2], create[1::2], strict=True))
    assert flags["-world"] == "tabletop" and flags["-name"] == "claw_arm"
    assert [float(flags[k]) for k in ("-x", "-y", "-z", "-Y")] == [0.0, 0.0, 0.0, 0.0]
    assert flags["-string"] == rsp["robot_description"]
    bridge = nodes["parameter_bridge"].param_dict()
    config = yaml.safe_load(Path(bridge["config_file"]).read_text())
    poses = {e["ros_topic_name"]: e["gz_topic_name"] for e in config}
    assert poses[C.TOPIC_OBJECT_POSES_RAW] == "/world/tabletop/dynamic_pose/info"


def test_gazebo_launch_outdoor_with_gui(monkeypatch, tmp_path):
    actions = _gazebo(monkeypatch, tmp_path, scene="outdoor", headless="false")
    include = next(a for a in actions if isinstance(a, RecordedInclude))
    assert include.launch_arguments["gz_args"] == f"-r {ROOT / 'worlds' / 'outdoor.sdf'}"
    nodes = _nodes(actions)
    create = nodes["create"].arguments
    flags = dict(zip(create[::2], create[1::2], strict=True))
    assert flags["-world"] == "outdoor" and flags["-name"] == "mobile_base"
    base = S.load_scene("outdoor").robot
    assert [float(flags[k]) for k in ("-x", "-y", "-z", "-Y")] == pytest.approx(
        [*base.pos, base.yaw])
    # the mobile base must stay free
    assert '<link name="world"' not in nodes["robot_state_publisher"].param_dict()[
        "robot_description"]
    bridge = nodes["parameter_bridge"].param_dict()
    config = yaml.safe_load(Path(bridge["config_file"]).read_text())
    poses = {e["ros_topic_name"]: e["gz_topic_name"] for e in config}
    # was /world/tabletop/... for every scene
    assert poses[C.TOPIC_OBJECT_POSES_RAW] == "/world/outdoor/dynamic_pose/info"
    with pytest.raises(RuntimeError, match="scene='moon'"):
        _gazebo(monkeypatch, tmp_path, scene="moon")


def test_every_launch_file_is_run_by_a_test():
    text = Path(__file__).read_text()
    for path in LAUNCH_FILES:
        constant = {"clawgym_launch.py": "CLAWGYM", "hil_launch.py": "HIL",
                    "gazebo_launch.py": "GAZEBO"}.get(path.name)
        assert constant and f"run_launch({constant}," in text, \
            f"{path.name} is not run by a test"
