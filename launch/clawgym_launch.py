"""The whole ClawGym graph on MuJoCo: simulator, perturbation interposers, planner, the
synthesis / trainer / evaluator action servers and the loop coordinator.

ROS workstation only (launch, launch_ros). The same graph without launch: `clawgym loop`.

    ros2 launch clawgym_ros clawgym_launch.py loop_config:=pick_place run_dir:=runs/loop
    ros2 launch clawgym_ros clawgym_launch.py perturbations:=false coordinator:=false
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "clawgym_ros"
SCENES = ("tabletop", "outdoor")


def _share() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # source checkout without an install
        return Path(__file__).resolve().parents[1]


def _params(share: Path, name: str) -> str:
    return str(share / "config" / "params" / f"{name}.yaml")


def _setup(context, *args, **kwargs):
    from clawgym_ros.sim.topics import raw_to_clean_remaps

    share = _share()
    arg = {name: LaunchConfiguration(name).perform(context) for name in (
        "scene", "run_dir", "loop_config", "perturbations", "coordinator", "seed")}
    if arg["scene"] not in SCENES:
        raise RuntimeError(f"scene={arg['scene']!r}; allowed: {', '.join(SCENES)}")
    run_dir = str(Path(arg["run_dir"]).resolve())
    loop_config = arg["loop_config"]
    if not loop_config.endswith((".yaml", ".yml")):
        loop_config = str(share / "config" / "loop" / f"{loop_config}.yaml")
    perturb = arg["perturbations"].lower() == "true"
    nodes = [
        # sim_node is a lifecycle node and nothing here manages it: --autostart configures
        # and activates it (else it serves only its lifecycle services: no sensors, no clock).
        Node(package=PACKAGE, executable="sim_node", name="sim_node", output="screen",
             arguments=["--autostart"],
             parameters=[_params(share, "sim"), {"scenario": arg["scene"]}],
             # Without interposers the raw sensor topics are the clean ones.
             remappings=[] if perturb else raw_to_clean_remaps()),
        Node(package=PACKAGE, executable="planner_node", name="planner_node", output="screen",
             parameters=[_params(share, "planner"), {"scene": arg["scene"]}]),
        Node(package=PACKAGE, executable="synthesis_node", name="synthesis_node",
             output="screen", parameters=[_params(share, "synthesis"), {"run_dir": run_dir}]),
        Node(package=PACKAGE, executable="trainer_node", name="trainer_node", output="screen",
             parameters=[_params(share, "trainer"), {"run_dir": run_dir}]),
        Node(package=PACKAGE, executable="evaluator_node", name="evaluator_node",
             output="screen", parameters=[_params(share, "evaluator"), {"run_dir": run_dir}]),
        Node(package=PACKAGE, executable="calibration_node", name="calibration_node",
             output="screen", parameters=[_params(share, "calibration"), {"run_dir": run_dir}]),
    ]
    if perturb:
        nodes += [
            Node(package=PACKAGE, executable="sensor_noise_node", name="sensor_noise_node",
                 output="screen"),
            Node(package=PACKAGE, executable="gps_dropout_node", name="gps_dropout_node",
                 output="screen"),
            Node(package=PACKAGE, executable="lighting_node", name="lighting_node",
                 output="screen"),
            Node(package=PACKAGE, executable="dynamics_node", name="dynamics_node",
                 output="screen"),
        ]
    if arg["coordinator"].lower() == "true":
        params = {"config": loop_config, "run_dir": run_dir}
        if arg["seed"]:
            params["seed"] = int(arg["seed"])
        nodes.append(Node(package=PACKAGE, executable="coordinator_node",
                          name="coordinator_node", output="screen",
                          parameters=[_params(share, "coordinator"), params]))
    return nodes


def generate_launch_description() -> LaunchDescription:
    """All ClawGym nodes on the embedded MuJoCo simulator."""
    return LaunchDescription([
        DeclareLaunchArgument("scene", default_value="tabletop",
                              description="scene: " + ", ".join(SCENES)),
        DeclareLaunchArgument("run_dir", default_value="runs/loop",
                              description="run directory (artifacts/, loop/, logs/)"),
        DeclareLaunchArgument("loop_config", default_value="pick_place",
                              description="loop config: a name in config/loop/ or a YAML path"),
        DeclareLaunchArgument("seed", default_value="",
                              description="loop seed override (empty = the config's)"),
        DeclareLaunchArgument("perturbations", default_value="true",
                              description="start the perturbation interposers (else raw "
                                          "sensor topics are remapped to the clean names)"),
        DeclareLaunchArgument("coordinator", default_value="true",
                              description="start the loop coordinator (false = servers only)"),
        OpaqueFunction(function=_setup),
    ])
