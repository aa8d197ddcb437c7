"""Gazebo path: gz-sim with a generated world, the robot from its xacro, ros_gz_bridge.

ROS workstation only (launch, launch_ros, ros_gz_sim, ros_gz_bridge, robot_state_publisher).
The bridge (config/ros_gz_bridge.yaml, written with the scene's world name filled in) exposes
exactly the topics of sim_node (clawgym_ros.sim.topics.SIM_TOPICS), so every other node works
unchanged. The arm's URDF (use_gazebo) fixes its base to the world where it is spawned.

    ros2 launch clawgym_ros gazebo_launch.py scene:=tabletop
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

SCENES = ("tabletop", "outdoor")


def _share() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("clawgym_ros"))
    except Exception:  # source checkout without an install
        return Path(__file__).resolve().parents[1]


def _setup(context, *args, **kwargs):
    import xacro
    import yaml

    share = _share()
    scene_name = LaunchConfiguration("scene").perform(context)
    if scene_name not in SCENES:
        raise RuntimeError(f"scene={scene_name!r}; allowed: {', '.join(SCENES)}")
    headless = LaunchConfiguration("headless").perform(context).lower() == "true"
    spec = yaml.safe_load((share / "config" / "scenes" / f"{scene_name}.yaml").read_text())
    robot = spec["robot"]
    x, y, z = robot.get("pos", [0.0, 0.0, 0.0])
    yaw = float(robot.get("yaw", 0.0))
    mappings = {"use_gazebo": "true"}
    if "arm" in Path(robot["urdf"]).name:  # clawgym_ros.sim.scene_spec.Robot.is_arm
        # The arm is bolted to the world by its URDF's world joint, which carries the base
        # pose (so robot_state_publisher's "world" is gz-sim's); the model spawns at 0.
        mappings.update(world_xyz=f"{x} {y} {z}", world_rpy=f"0 0 {yaw}")
        x = y = z = yaw = 0.0
    urdf = xacro.process_file(str(share / robot["urdf"]),
                              mappings=mappings).toprettyxml(indent="  ")
    world = share / "worlds" / f"{scene_name}.sdf"
    gz_sim = Path(_ros_gz_sim_share()) / "launch" / "gz_sim.launch.py"
    gz_args = f"{'-s ' if headless else ''}-r {world}"
    return [
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(gz_sim)),
                                 launch_arguments={"gz_args": gz_args}.items()),
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf, "use_sim_time": True}],
             remappings=[("joint_states", "joint_states_raw")], output="screen"),
        Node(package="ros_gz_sim", executable="create", output="screen",
             arguments=["-world", scene_name, "-name", spec["robot"]["urdf"].split("/")[-1]
                        .split(".")[0], "-string", urdf, "-x", str(x), "-y", str(y),
                        "-z", str(z), "-Y", str(yaw)]),
        Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen",
             parameters=[{"config_file": str(_bridge_config(share, scene_name)),
                          "use_sim_time": True}]),
    ]


def _bridge_config(share: Path, world: str) -> Path:
    """config/ros_gz_bridge.yaml with the world name filled in, written to the temp dir."""
    import tempfile

    import yaml

    from clawgym_ros.sim.topics import bridge_config_for_world

    entries = yaml.safe_load((share / "config" / "ros_gz_bridge.yaml").read_text())
    path = Path(tempfile.gettempdir()) / f"clawgym_ros_gz_bridge_{world}.yaml"
    path.write_text(yaml.safe_dump(bridge_config_for_world(entries, world), sort_keys=False))
    return path


def _ros_gz_sim_share() -> str:
    from ament_index_python.packages import get_package_share_directory

    return get_package_share_directory("ros_gz_sim")


def generate_launch_description() -> LaunchDescription:
    """gz-sim + robot spawn + bridge for one scene."""
    return LaunchDescription([
        DeclareLaunchArgument("scene", default_value="tabletop",
                              description="scene name: " + ", ".join(SCENES)),
        DeclareLaunchArgument("headless", default_value="true",
                              description="run gz-sim server only (no GUI)"),
        OpaqueFunction(function=_setup),
    ])
