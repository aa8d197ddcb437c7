"""The one vocabulary of clawgym_ros: topic, service, action, frame, key and file names.

Every other module takes names from here; no magic strings elsewhere.
"""

from __future__ import annotations

PACKAGE = "clawgym_ros"
INTERFACES_PACKAGE = "clawgym_interfaces"

# --- Robot description ---------------------------------------------------------------------
ARM_JOINTS: tuple[str, ...] = tuple(f"arm_joint_{i}" for i in range(1, 8))
GRIPPER_JOINTS: tuple[str, ...] = ("gripper_left_finger_joint", "gripper_right_finger_joint")
BASE_WHEEL_JOINTS: tuple[str, ...] = ("left_wheel_joint", "right_wheel_joint")
ARM_GROUP = "arm"
GRIPPER_GROUP = "gripper"

FRAME_WORLD = "world"
FRAME_MAP = "map"
FRAME_ODOM = "odom"
FRAME_BASE = "base_link"
FRAME_TOOL = "tool0"
FRAME_WRIST_CAMERA = "wrist_camera_optical_frame"
FRAME_FRONT_CAMERA = "front_camera_optical_frame"
FRAME_IMU = "imu_link"
FRAME_GPS = "gps_link"

CAMERA_WRIST = "wrist_camera"
CAMERA_FRONT = "front_camera"

# --- Topics (relative names so that namespaces and remapping work) --------------------------
TOPIC_JOINT_STATES_RAW = "joint_states_raw"
TOPIC_JOINT_STATES = "joint_states"
TOPIC_IMAGE_RAW = "image_raw"
TOPIC_IMAGE = "image"
TOPIC_CAMERA_INFO = "camera_info"
TOPIC_IMU_RAW = "imu/data_raw"
TOPIC_IMU = "imu/data"
TOPIC_GPS_RAW = "gps/fix_raw"
TOPIC_GPS = "gps/fix"
TOPIC_ODOM = "odom"
TOPIC_CLOCK = "/clock"
TOPIC_JOINT_TRAJECTORY = "joint_trajectory"
TOPIC_GRIPPER_COMMAND = "gripper_command"
TOPIC_CMD_VEL = "cmd_vel"
TOPIC_OBJECT_POSES = "object_poses"
TOPIC_PERTURBATION_STATE = "perturbation_state"
TOPIC_EVAL_SUMMARY = "eval_summary"
TOPIC_LOOP_STATUS = "loop_status"
TOPIC_SKILL_CALLS = "skill_calls"
TOPIC_ESTOP = "estop"

# --- Services -------------------------------------------------------------------------------
SRV_RESET = "sim/reset"
SRV_STEP = "sim/step"
SRV_SET_LIGHTING = "sim/set_lighting"
SRV_SET_DYNAMICS = "sim/set_dynamics"
SRV_SET_PERTURBATION = "set_perturbation"
SRV_PLAN_MOTION = "plan_motion"

# --- Actions --------------------------------------------------------------------------------
ACTION_SYNTHESIZE = "synthesize"
ACTION_TRAIN = "train"
ACTION_EVALUATE = "evaluate"

# --- Node names -----------------------------------------------------------------------------
NODE_SIM = "sim_node"
NODE_PLANNER = "planner_node"
NODE_SENSOR_NOISE = "sensor_noise_node"
NODE_GPS_DROPOUT = "gps_dropout_node"
NODE_LIGHTING = "lighting_node"
NODE_DYNAMICS = "dynamics_node"
NODE_POLICY = "policy_node"
NODE_SYNTHESIS = "synthesis_node"
NODE_TRAINER = "trainer_node"
NODE_EVALUATOR = "evaluator_node"
NODE_COORDINATOR = "coordinator_node"

# --- Perturbation families ------------------------------------------------------------------
FAMILY_NONE = "none"
FAMILY_LIGHTING = "lighting"
FAMILY_SENSOR_NOISE = "sensor_noise"
FAMILY_GPS_DROPOUT = "gps_dropout"
FAMILY_DYNAMICS = "dynamics"
PERTURBATION_FAMILIES: tuple[str, ...] = (
    FAMILY_NONE,
    FAMILY_LIGHTING,
    FAMILY_SENSOR_NOISE,
    FAMILY_GPS_DROPOUT,
    FAMILY_DYNAMICS,
)
SCHEDULES: tuple[str, ...] = ("constant", "stepped", "random")

# --- Evaluation dimensions ------------------------------------------------------------------
DIM_FUNCTIONAL = "functional"
DIM_ROBUSTNESS = "robustness"
DIM_GENERALIZATION = "generalization"
DIM_PREFERENCE = "preference"
DIMENSIONS: tuple[str, ...] = (DIM_FUNCTIONAL, DIM_ROBUSTNESS, DIM_GENERALIZATION, DIM_PREFERENCE)

# --- Observation / action keys --------------------------------------------------------------
OBS_JOINT_POS = "joint_pos"
OBS_JOINT_VEL = "joint_vel"
OBS_GRIPPER = "gripper_width"
OBS_OBJECT_POSES = "object_poses"
OBS_TOOL_POSE = "tool_pose"
OBS_IMU = "imu"
OBS_GPS = "gps"
OBS_ODOM = "odom"
ACT_JOINT_TARGET = "joint_target"
ACT_JOINT_VEL = "joint_velocity"
ACT_GRIPPER = "gripper"
ACT_BASE_TWIST = "base_twist"

# --- Artifacts and run directory ------------------------------------------------------------
KIND_DATASET = "dataset"
KIND_CHECKPOINT = "checkpoint"
KIND_REPORT = "report"
KIND_CONFIG = "config"
ARTIFACT_KINDS: tuple[str, ...] = (KIND_DATASET, KIND_CHECKPOINT, KIND_REPORT, KIND_CONFIG)
DIR_ARTIFACTS = "artifacts"
DIR_STAGING = ".staging"
DIR_LOOP = "loop"
DIR_LOGS = "logs"
FILE_MANIFEST = "manifest.json"
FILE_LOOP_STATE = "state.json"
FILE_DECISIONS = "decisions.jsonl"
FILE_REPORT_JSON = "report.json"
FILE_REPORT_HTML = "report.html"

# --- Environment variables ------------------------------------------------------------------
ENV_RUN_DIR = "CLAWGYM_RUN_DIR"
DEFAULT_RUN_DIR = "runs/default"
