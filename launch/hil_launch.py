"""Hardware in the loop: a policy and perturbation interposers on a real robot, every arm and
base command through safety_node (velocity and workspace limits, latched e-stop).

ROS workstation only (launch, launch_ros). The robot's driver provides the sensor topics and
accepts the commands; the interposers perturb what the policy sees; policy_node runs free (on
its timer at control_rate: a robot has no lockstep clock) and its arm and base commands go to
safety_node (joint_trajectory_in / cmd_vel_in); only safety_node publishes to the robot's
trajectory and twist topics. A True on the e-stop topic stops the robot until
`ros2 service call /safety/reset std_srvs/srv/Trigger`; with estop_timeout_s > 0 (safety.yaml)
a silent e-stop topic stops it too. Gripper commands (gripper_command) go straight to the
robot's topic: safety_node has no gripper input, so the e-stop does not hold the gripper.

No evaluator runs here: evaluator_node scores episodes in a simulator it resets (in_process or
its own sim_node), never on the robot, so it would report simulated numbers as HIL results.

    ros2 launch clawgym_ros hil_launch.py checkpoint:=<id> run_dir:=runs/hil \
        joint_states:=/robot/joint_states cmd_vel:=/robot/cmd_vel estop:=/robot/estop

A checkpoint trained on a task that observes keys no sensor carries (pick_place's
``place_goal``) needs ``task:=pick_place`` and a publisher of ``task_state`` on the robot side
(sim_node publishes it; test/test_hil_graph.py runs this graph against sim_node).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "clawgym_ros"
#: launch argument -> (default robot topic, what it is)
ROBOT_TOPICS = {
    "joint_states": ("/joint_states", "robot joint states (sensor_msgs/JointState)"),
    "image": ("/camera/image_raw", "robot camera (sensor_msgs/Image)"),
    "imu": ("/imu/data", "robot IMU (sensor_msgs/Imu)"),
    "gps": ("/gps/fix", "robot GPS (sensor_msgs/NavSatFix)"),
    "odom": ("/odom", "robot odometry (nav_msgs/Odometry)"),
    "tool_pose": ("/tool_pose", "measured tool pose, base frame (geometry_msgs/PoseStamped)"),
    "object_poses": ("/object_poses", "object poses from perception (geometry_msgs/PoseArray)"),
    "cmd_vel": ("/cmd_vel", "robot base command (geometry_msgs/Twist)"),
    "joint_trajectory": ("/joint_trajectory", "robot arm command (JointTrajectory)"),
    "gripper_command": ("/gripper_command",
                        "robot gripper command (clawgym_interfaces/GripperCommand)"),
    "estop": ("/estop", "e-stop (std_msgs/Bool, True = stop)"),
    "task_state": ("/task_state", "task state with the task's observation keys such as "
                   "place_goal (clawgym_interfaces/TaskState, latched; read when task is "
                   "set)"),
}
SCENES = ("tabletop", "outdoor")


def _share() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # source checkout without an install
        return Path(__file__).resolve().parents[1]


def _setup(context, *args, **kwargs):
    from clawgym_ros import constants as C

    share = _share()
    topic = {k: LaunchConfiguration(k).perform(context) for k in ROBOT_TOPICS}
    run_dir = str(Path(LaunchConfiguration("run_dir").perform(context)).resolve())
    checkpoint = LaunchConfiguration("checkpoint").perform(context)
    scene = LaunchConfiguration("scene").perform(context)
    task = LaunchConfiguration("task").perform(context)
    if scene not in SCENES:
        raise RuntimeError(f"scene={scene!r}; allowed: {', '.join(SCENES)}")
    if not checkpoint:
        raise RuntimeError("checkpoint is empty; give checkpoint:=<artifact id> (or "
                           "scripted:<task>)")
    safety_params = str(share / "config" / "params" / "safety.yaml")
    policy_params = {"policy": checkpoint, "run_dir": run_dir, "scene": scene, "mode": "free"}
    if task:
        # The policy observes the task's keys (e.g. place_goal) from task_state.
        policy_params["task"] = task
    return [
        # Interposers: robot sensor topics in, perturbed topics out (what the policy sees).
        Node(package=PACKAGE, executable="sensor_noise_node", name="sensor_noise_node",
             output="screen",
             remappings=[(C.TOPIC_JOINT_STATES_RAW, topic["joint_states"]),
                         (C.TOPIC_IMAGE_RAW, topic["image"]), (C.TOPIC_IMU_RAW, topic["imu"]),
                         (C.TOPIC_OBJECT_POSES_RAW, topic["object_poses"]),
                         (C.TOPIC_JOINT_STATES, "perturbed/joint_states"),
                         (C.TOPIC_IMAGE, "perturbed/image"), (C.TOPIC_IMU, "perturbed/imu"),
                         (C.TOPIC_OBJECT_POSES, "perturbed/object_poses")]),
        Node(package=PACKAGE, executable="gps_dropout_node", name="gps_dropout_node",
             output="screen",
             remappings=[(C.TOPIC_GPS_RAW, topic["gps"]), (C.TOPIC_GPS, "perturbed/gps")]),
        # The policy reads the perturbed topics and writes to safety_node's inputs; free-running
        # (lockstep would wait for a simulator's reset and clock forever).
        Node(package=PACKAGE, executable="policy_node", name="policy_node", output="screen",
             parameters=[policy_params],
             remappings=[(C.TOPIC_JOINT_STATES, "perturbed/joint_states"),
                         (C.TOPIC_IMAGE, "perturbed/image"), (C.TOPIC_IMU, "perturbed/imu"),
                         (C.TOPIC_GPS, "perturbed/gps"), (C.TOPIC_ODOM, topic["odom"]),
                         (C.TOPIC_OBJECT_POSES, "perturbed/object_poses"),
                         (C.TOPIC_CMD_VEL, C.TOPIC_CMD_VEL_IN),
                         (C.TOPIC_JOINT_TRAJECTORY, C.TOPIC_JOINT_TRAJECTORY_IN),
                         (C.TOPIC_GRIPPER_COMMAND, topic["gripper_command"]),
                         (C.TOPIC_TASK_STATE, topic["task_state"])]),
        # The only node that commands the robot's arm and base.
        Node(package=PACKAGE, executable="safety_node", name="safety_node", output="screen",
             parameters=[safety_params],
             remappings=[(C.TOPIC_JOINT_STATES, topic["joint_states"]),
                         (C.TOPIC_ODOM, topic["odom"]), (C.TOPIC_TOOL_POSE, topic["tool_pose"]),
                         (C.TOPIC_ESTOP, topic["estop"]), (C.TOPIC_CMD_VEL, topic["cmd_vel"]),
                         (C.TOPIC_JOINT_TRAJECTORY, topic["joint_trajectory"])]),
    ]


def generate_launch_description() -> LaunchDescription:
    """Interposers, policy and safety filter against a real robot's topics."""
    return LaunchDescription([
        *[DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text) in ROBOT_TOPICS.items()],
        DeclareLaunchArgument("checkpoint", default_value="",
                              description="checkpoint artifact id the policy runs (required)"),
        DeclareLaunchArgument("scene", default_value="tabletop",
                              description="observation layout: tabletop (arm) or outdoor "
                                          "(mobile base)"),
        DeclareLaunchArgument("task", default_value="",
                              description="task whose observation keys the policy reads from "
                                          "task_state (e.g. pick_place: place_goal); empty = "
                                          "sensor keys only"),
        DeclareLaunchArgument("run_dir", default_value="runs/hil",
                              description="run directory (holds the checkpoint's artifacts)"),
        OpaqueFunction(function=_setup),
    ])
