"""The one table of simulator topics: what sim_node (MuJoCo) and ros_gz_bridge (Gazebo) expose.

sim_node publishes *raw* sensor topics; perturbation interposers turn them into the clean names
(``joint_states_raw`` -> ``joint_states`` ...). Without an interposer a launch remap connects
raw to clean (:func:`raw_to_clean_remaps`). ``config/ros_gz_bridge.yaml`` maps Gazebo topics to
exactly these ROS names and types (a test checks it), so no consumer can tell which simulator
runs.
"""

from __future__ import annotations

import dataclasses

from clawgym_ros import constants as C

PUBLISH = "publish"      # the simulator publishes it
SUBSCRIBE = "subscribe"  # the simulator listens to it


@dataclasses.dataclass(frozen=True)
class SimTopic:
    """One simulator topic.

    Attributes:
        name: ROS topic name (relative, so namespaces apply; /clock is absolute).
        msg_type: ROS type, e.g. ``sensor_msgs/msg/JointState``.
        direction: PUBLISH or SUBSCRIBE (seen from the simulator).
        clean_name: the name consumers read after an interposer (or remap); = name if none.
        gz_topic: Gazebo transport topic bridged to it; None = not bridged (reason in note).
        gz_type: Gazebo message type (``gz.msgs.*``) or None.
        note: why it is not bridged, or anything a user must know.
    """

    name: str
    msg_type: str
    direction: str
    clean_name: str
    gz_topic: str | None
    gz_type: str | None
    note: str = ""


#: stands for the world name in Gazebo topics that gz-sim puts under ``/world/<name>/`` (the
#: scene broadcaster's dynamic_pose/info); :func:`bridge_config_for_world` fills it in.
WORLD_PLACEHOLDER = "{world}"

_TOPICS = (
    SimTopic(C.TOPIC_JOINT_STATES_RAW, "sensor_msgs/msg/JointState", PUBLISH,
             C.TOPIC_JOINT_STATES, "joint_states_raw", "gz.msgs.Model"),
    SimTopic(C.TOPIC_IMAGE_RAW, "sensor_msgs/msg/Image", PUBLISH, C.TOPIC_IMAGE,
             "camera/image", "gz.msgs.Image"),
    SimTopic(C.TOPIC_CAMERA_INFO, "sensor_msgs/msg/CameraInfo", PUBLISH, C.TOPIC_CAMERA_INFO,
             "camera/camera_info", "gz.msgs.CameraInfo"),
    SimTopic(C.TOPIC_IMU_RAW, "sensor_msgs/msg/Imu", PUBLISH, C.TOPIC_IMU,
             "imu/data_raw", "gz.msgs.IMU"),
    SimTopic(C.TOPIC_GPS_RAW, "sensor_msgs/msg/NavSatFix", PUBLISH, C.TOPIC_GPS,
             "gps/fix_raw", "gz.msgs.NavSat"),
    SimTopic(C.TOPIC_ODOM, "nav_msgs/msg/Odometry", PUBLISH, C.TOPIC_ODOM,
             "odom", "gz.msgs.Odometry"),
    SimTopic(C.TOPIC_ODOM_TRUTH, "nav_msgs/msg/Odometry", PUBLISH, C.TOPIC_ODOM_TRUTH, None,
             None, "sim_node only: the base's true pose and twist in the world frame (the "
             "evaluator's ground truth; odom is the robot's own odometry, as the env "
             "observes it); on Gazebo an OdometryPublisher system could provide it"),
    SimTopic(C.TOPIC_CLOCK, "rosgraph_msgs/msg/Clock", PUBLISH, C.TOPIC_CLOCK,
             "/clock", "gz.msgs.Clock"),
    SimTopic(C.TOPIC_OBJECT_POSES_RAW, "geometry_msgs/msg/PoseArray", PUBLISH,
             C.TOPIC_OBJECT_POSES, f"/world/{WORLD_PLACEHOLDER}/dynamic_pose/info",
             "gz.msgs.Pose_V",
             "Gazebo sends every dynamic link's pose (robot links included), not only objects; "
             "the world name is the scene's (gazebo_launch renders the bridge config)"),
    SimTopic(C.TOPIC_TASK_STATE, "clawgym_interfaces/msg/TaskState", PUBLISH,
             C.TOPIC_TASK_STATE, None, None, "sim_node only, in a task world (template, goal, "
             "stages reached, success, contact force, task observation keys such as "
             "place_goal); Gazebo runs no stage tracker"),
    SimTopic(C.TOPIC_DISTURBANCE_STATE, "clawgym_interfaces/msg/PerturbationState", PUBLISH,
             C.TOPIC_DISTURBANCE_STATE, None, None, "sim_node only, in a task world with a "
             "disturbance (sim/set_disturbance): the event and its recovery after every step"),
    SimTopic(C.TOPIC_JOINT_TRAJECTORY, "trajectory_msgs/msg/JointTrajectory", SUBSCRIBE,
             C.TOPIC_JOINT_TRAJECTORY, "joint_trajectory", "gz.msgs.JointTrajectory"),
    SimTopic(C.TOPIC_CMD_VEL, "geometry_msgs/msg/Twist", SUBSCRIBE, C.TOPIC_CMD_VEL,
             "cmd_vel", "gz.msgs.Twist"),
    SimTopic(C.TOPIC_CMD_VEL_STAMPED, "geometry_msgs/msg/TwistStamped", SUBSCRIBE,
             C.TOPIC_CMD_VEL_STAMPED, None, None,
             "sim_node only: the lockstep base command, stamped with the observation it acts "
             "on (a step waits for exactly its command); Gazebo and robots take cmd_vel"),
    SimTopic(C.TOPIC_GRIPPER_COMMAND, "clawgym_interfaces/msg/GripperCommand", SUBSCRIBE,
             C.TOPIC_GRIPPER_COMMAND, None, None,
             "custom type, no ros_gz_bridge mapping: on Gazebo send finger joints in "
             "joint_trajectory"),
)

#: ROS topic name -> SimTopic
SIM_TOPICS: dict[str, SimTopic] = {t.name: t for t in _TOPICS}


def raw_to_clean_remaps() -> list[tuple[str, str]]:
    """(raw, clean) remappings for running without perturbation interposers."""
    return [(t.name, t.clean_name) for t in _TOPICS if t.clean_name != t.name]


def bridged_topics() -> list[SimTopic]:
    """The topics ros_gz_bridge must carry (those with a Gazebo topic)."""
    return [t for t in _TOPICS if t.gz_topic is not None]


def bridge_config_for_world(entries: list[dict], world: str) -> list[dict]:
    """ros_gz_bridge config entries (``config/ros_gz_bridge.yaml``) for one world: the world
    placeholder in Gazebo topic names replaced by ``world`` (= the scene name).

    Raises:
        ConfigError: ``world`` is empty or not a valid gz topic segment.
    """
    from clawgym_ros.errors import ConfigError

    if not world or any(ch in world for ch in "/{} "):
        raise ConfigError("world", world, "a gz world name without '/', '{', '}' or spaces")
    out = []
    for entry in entries:
        entry = dict(entry)
        entry["gz_topic_name"] = str(entry["gz_topic_name"]).replace(WORLD_PLACEHOLDER, world)
        out.append(entry)
    return out
