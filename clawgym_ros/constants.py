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
CAMERA_SCENE = "scene_camera"        # fixed tabletop overview (Gymnasium render camera)

# --- Simulation scenes and Gymnasium ids (config/scenes/<scene>.yaml) ----------------------
SCENE_TABLETOP = "tabletop"
SCENE_OUTDOOR = "outdoor"
ENV_TABLETOP = "clawgym/Tabletop-v0"
ENV_MOBILE_BASE = "clawgym/MobileBase-v0"
ENV_PICK_PLACE = "clawgym/PickPlace-v0"
ENV_PEG_INSERT = "clawgym/PegInsert-v0"
ENV_PILL_HANDOVER = "clawgym/PillHandover-v0"
ENV_GPS_NAV = "clawgym/GpsNav-v0"

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
#: sim_node only: the base's true pose and twist (world frame), for the evaluator
TOPIC_ODOM_TRUTH = "ground_truth/odom"
TOPIC_CLOCK = "/clock"
TOPIC_JOINT_TRAJECTORY = "joint_trajectory"
TOPIC_GRIPPER_COMMAND = "gripper_command"
TOPIC_CMD_VEL = "cmd_vel"
TOPIC_OBJECT_POSES = "object_poses"
TOPIC_OBJECT_POSES_RAW = "object_poses_raw"
TOPIC_PERTURBATION_STATE = "perturbation_state"
TOPIC_EVAL_SUMMARY = "eval_summary"
TOPIC_LOOP_STATUS = "loop_status"
TOPIC_SKILL_CALLS = "skill_calls"
TOPIC_ESTOP = "estop"
#: safety_node: policy commands in (remap the policy's outputs here), its verdicts out.
TOPIC_CMD_VEL_IN = "cmd_vel_in"
TOPIC_JOINT_TRAJECTORY_IN = "joint_trajectory_in"
TOPIC_SAFETY_STATUS = "safety_status"
TOPIC_TOOL_POSE = "tool_pose"
#: sim_node in a task world: the task's state (clawgym_interfaces/TaskState; latched, one per
#: step in lockstep): template, goal, stages reached, success, contact force, task observation
#: keys.
TOPIC_TASK_STATE = "task_state"
#: sim_node, lockstep mobile base: the base command stamped with the observation it acts on
#: (geometry_msgs/TwistStamped), so a lockstep step can wait for exactly its command.
TOPIC_CMD_VEL_STAMPED = "cmd_vel_stamped"
#: sim_node in a task world with a disturbance configured: the event and its recovery after
#: every step (clawgym_interfaces/PerturbationState; same QoS as task_state).
TOPIC_DISTURBANCE_STATE = "disturbance_state"

# --- Services -------------------------------------------------------------------------------
SRV_RESET = "sim/reset"
SRV_STEP = "sim/step"
SRV_SET_LIGHTING = "sim/set_lighting"
SRV_SET_DYNAMICS = "sim/set_dynamics"
SRV_SET_CAMERA_POSE = "sim/set_camera_pose"
#: sim_node: the disturbance of the next episodes (clawgym_interfaces/SetPerturbation).
SRV_SET_DISTURBANCE = "sim/set_disturbance"
SRV_SET_PERTURBATION = "set_perturbation"
SRV_PLAN_MOTION = "plan_motion"
SRV_SAFETY_RESET = "safety/reset"

# --- Actions --------------------------------------------------------------------------------
ACTION_SYNTHESIZE = "synthesize"
ACTION_TRAIN = "train"
ACTION_EVALUATE = "evaluate"
ACTION_CALIBRATE = "calibrate"

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
NODE_SAFETY = "safety_node"
NODE_CALIBRATION = "calibration_node"

# --- Perturbation families ------------------------------------------------------------------
FAMILY_NONE = "none"
FAMILY_LIGHTING = "lighting"
FAMILY_SENSOR_NOISE = "sensor_noise"
FAMILY_GPS_DROPOUT = "gps_dropout"
FAMILY_DYNAMICS = "dynamics"
FAMILY_DISTURBANCE = "disturbance"   # mid-episode events (perturbations/disturbance.py)
FAMILY_CAMERA_POSE = "camera_pose"   # camera mount offsets (perturbations/camera.py)
FAMILY_COLOUR = "colour"             # object and scene colours (perturbations/colour.py)
# PERTURBATION_FAMILIES ('none', then every registered family) and OBSERVATION_FAMILIES
# (families that act on what the policy observes: interposed on sensor topics, samples may be
# dropped, training-time hardening emulates them) are derived from the family registry
# (clawgym_ros.perturbations): see __getattr__ at the end of this module.
SCHEDULES: tuple[str, ...] = ("constant", "stepped", "random")
#: Sensor-noise intensity training-time hardening draws rows up to, unless configured (the
#: top of the pick_place suites' sensor-noise sweep).
DEFAULT_HARDENING_INTENSITY = 0.3

# --- Evaluation dimensions ------------------------------------------------------------------
DIM_FUNCTIONAL = "functional"
DIM_ROBUSTNESS = "robustness"
DIM_GENERALIZATION = "generalization"
DIM_PREFERENCE = "preference"
DIMENSIONS: tuple[str, ...] = (DIM_FUNCTIONAL, DIM_ROBUSTNESS, DIM_GENERALIZATION, DIM_PREFERENCE)

# --- Ablation's final evaluation (clawgym ablate; clawgym_ros.coordinator.ablation) -----------
#: Suite seed of the ablation's final evaluation: episodes no loop steered by (every loop
#: evaluates with a seed derived from its own loop seed).
ABLATION_FINAL_SEED = 7777
#: Episodes per cell of the final evaluation (the loop suites use 6, too few to compare arms).
ABLATION_FINAL_EPISODES = 20
#: The design's headline figures after 12 closed-loop iterations, against which `clawgym
#: ablate` sets its final evaluation (issue "the 12-iteration evidence run"): closed - open
#: functional success relative to the open loop's, the closed loop's generalization (held-out /
#: in-distribution success) over the open loop's, and the closed loop's stability under
#: combined lighting + sensor noise (combined-cell success / nominal success).
DESIGN_FUNCTIONAL_GAIN = 0.224
DESIGN_GENERALIZATION_RATIO = 1.8
DESIGN_COMBINED_STABILITY = 0.867

# --- Evaluation vocabulary (tasks, splits, skill outcomes, stages, modes) ----------------------
TASK_PICK_PLACE = "pick_place"
TASK_PEG_INSERT = "peg_insert"
TASK_PILL_HANDOVER = "pill_handover"
TASK_GPS_NAV = "gps_nav"
# TASKS (every task name, built-in ones first) is derived from the task registry: see
# __getattr__ at the end of this module.
SPLIT_TRAIN = "train"
SPLIT_HELD_OUT = "held_out"
SPLITS: tuple[str, ...] = (SPLIT_TRAIN, SPLIT_HELD_OUT)
SKILL_OK = "ok"
SKILL_FAILED = "failed"
SKILL_SKIPPED = "skipped"
SKILL_OUTCOMES: tuple[str, ...] = (SKILL_OK, SKILL_FAILED, SKILL_SKIPPED)
#: Pseudo-stage where a failed episode stopped when all stages passed but success did not.
STAGE_FINAL_CHECK = "final_check"
EVAL_MODES: tuple[str, ...] = ("in_process", "ros")

# --- Observation / action keys --------------------------------------------------------------
OBS_JOINT_POS = "joint_pos"
OBS_JOINT_VEL = "joint_vel"
OBS_GRIPPER = "gripper_width"
OBS_OBJECT_POSES = "object_poses"
OBS_TOOL_POSE = "tool_pose"
OBS_IMU = "imu"
OBS_GPS = "gps"
OBS_ODOM = "odom"
OBS_NAV_GOAL = "nav_goal"            # gps_nav: (latitude, longitude, waypoints left)
OBS_HAND = "hand_state"              # pill_handover: hand pose (7) + closure in [0, 1]
OBS_PLACE_GOAL = "place_goal"        # pick_place: target (x, y, z) of the placed object
ACT_JOINT_TARGET = "joint_target"
ACT_JOINT_VEL = "joint_velocity"
ACT_GRIPPER = "gripper"
ACT_BASE_TWIST = "base_twist"
# --- RL interface of the Gymnasium envs: gym.make(ID, control_mode=, obs_mode=, reward_mode=)
#: today's action dict (joint_target, joint_velocity, gripper / base_twist): what the experts,
#: the evaluator and the ROS path send; with it the step reward stays the stages reached
CONTROL_DICT = "dict"
#: arms, gym.make's default: Box(-1, 1, (8,)) = 7 joint-position deltas + gripper width
CONTROL_JOINT_DELTA = "pd_joint_delta"
#: arms: Box(-1, 1, (8,)) = 7 absolute joint-position targets (over the joint range) + gripper
CONTROL_JOINT_POS = "pd_joint_pos"
#: mobile base, gym.make's default: Box(-1, 1, (2,)) = linear, angular velocity
CONTROL_BASE_TWIST = "base_twist"
ARM_CONTROL_MODES: tuple[str, ...] = (CONTROL_JOINT_DELTA, CONTROL_JOINT_POS, CONTROL_DICT)
BASE_CONTROL_MODES: tuple[str, ...] = (CONTROL_BASE_TWIST, CONTROL_DICT)
OBS_MODE_DICT = "dict"               # the observation dict (default)
OBS_MODE_STATE = "state"             # one float32 vector of the state keys
OBS_MODES: tuple[str, ...] = (OBS_MODE_DICT, OBS_MODE_STATE)
REWARD_DENSE = "dense"               # task progress in [0, 1] (default with a Box action)
REWARD_STAGES = "stages"             # number of stages reached (default with the dict)
REWARD_SHAPED = "shaped"             # weighted stage-wise terms (clawgym_ros.tasks.rewards)
REWARD_MODES: tuple[str, ...] = (REWARD_DENSE, REWARD_STAGES, REWARD_SHAPED)
#: info keys of the RL interface: this step's action was outside [-1, 1] (and clipped); how
#: many steps of this episode were
INFO_ACTION_CLIPPED = "action_clipped"
INFO_CLIPPED_STEPS = "clipped_steps"
INFO_REWARD_TERMS = "reward_terms"   # reward_mode="shaped": the step's unweighted terms
#: Gymnasium info keys of the perturbation wrappers: records on reset, activity per step, and
#: the NavSatStatus of the GPS observation (-1 while an outage holds the last fix).
INFO_PERTURBATIONS = "perturbations"
INFO_PERTURBATIONS_ACTIVE = "perturbations_active"
INFO_GPS_STATUS = "gps_status"
#: info key of the disturbance wrapper: the episode's event and recovery, from its first step
INFO_DISTURBANCE = "disturbance"
#: Fixed order of state observation keys in the training obs vector (keys absent from a
#: dataset are skipped; keys not listed here follow in alphabetical order).
OBS_STATE_KEYS: tuple[str, ...] = (
    OBS_JOINT_POS, OBS_JOINT_VEL, OBS_GRIPPER, OBS_TOOL_POSE, OBS_OBJECT_POSES, OBS_IMU, OBS_GPS,
    OBS_ODOM,
)
#: Fixed order of action keys in the training action vector (same rule as OBS_STATE_KEYS).
ACTION_KEYS: tuple[str, ...] = (ACT_JOINT_TARGET, ACT_JOINT_VEL, ACT_GRIPPER, ACT_BASE_TWIST)
#: How a trained policy predicts joint targets: relative to the observed joint positions
#: (delta, default) or as recorded (absolute).
ACTION_MODE_DELTA = "delta"
ACTION_MODE_ABSOLUTE = "absolute"
ACTION_MODES: tuple[str, ...] = (ACTION_MODE_DELTA, ACTION_MODE_ABSOLUTE)

# --- Synthesis: difficulties and sign-off rejection reasons (stable codes) ----------------------
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
DEFAULT_DIFFICULTY = "medium"
REJECT_STAGE_ORDER = "stage_order"
REJECT_SKILL_SEQUENCE = "illegal_skill_sequence"
REJECT_GOAL = "goal_inconsistent"
REJECT_NOT_SUCCESSFUL = "not_successful"
REJECT_JOINT_POSITION = "joint_position_limit"
REJECT_JOINT_VELOCITY = "joint_velocity_limit"
REJECT_EFFORT = "effort_limit"
REJECT_CONTACT_FORCE = "contact_force"
REJECT_COLLISION = "unintended_collision"
REJECT_UNSTABLE = "unstable_physics"
REJECT_GENERATOR_ERROR = "generator_error"
SEMANTIC_REASONS: tuple[str, ...] = (
    REJECT_STAGE_ORDER, REJECT_SKILL_SEQUENCE, REJECT_GOAL, REJECT_NOT_SUCCESSFUL,
)
PHYSICAL_REASONS: tuple[str, ...] = (
    REJECT_JOINT_POSITION, REJECT_JOINT_VELOCITY, REJECT_EFFORT, REJECT_CONTACT_FORCE,
    REJECT_COLLISION, REJECT_UNSTABLE,
)
REJECTION_REASONS: tuple[str, ...] = (
    *SEMANTIC_REASONS, *PHYSICAL_REASONS, REJECT_GENERATOR_ERROR,
)

# --- Dataset files and episode MCAP topics ------------------------------------------------------
DIR_EPISODES = "episodes"
DIR_CACHE = "cache"
FILE_DATASET_INFO = "info.json"
FILE_DATASET_STATS = "stats.json"
FILE_EPISODE_INDEX = "episodes.jsonl"
FILE_REJECTED_INDEX = "rejected.jsonl"
TOPIC_EPISODE_OBSERVATION = "episode/observation"
TOPIC_EPISODE_ACTION = "episode/action"
TOPIC_EPISODE_PHYSICS = "episode/physics"
TOPIC_EPISODE_STAGES = "episode/stages"
MCAP_METADATA_EPISODE = "clawgym_episode"

# --- Training: policy types, parameter groups, checkpoint tree -----------------------------
OBS_IMAGE = "image"
POLICY_MLP = "mlp"
POLICY_CNN = "cnn"
#: The task-conditioned mlp of ``clawgym train --sequence`` (union layout + task one-hot).
POLICY_TASK_MLP = "task_mlp"
PARAM_GROUP_ENCODER = "encoder"
PARAM_GROUP_TRUNK = "trunk"
PARAM_GROUP_HEAD = "head"
FILE_MODEL = "model.safetensors"
FILE_CHECKPOINT_CONFIG = "config.json"
FILE_TRAINING_STATE = "training_state.safetensors"
FILE_TRAINING_STATE_JSON = "training_state.json"
FILE_LAST = "last"
FILE_TRAIN_SUMMARY = "summary.json"
DIR_TRAIN_WORK = "train"
DIR_TENSORBOARD = "tensorboard"

# --- Artifacts and run directory ------------------------------------------------------------
KIND_DATASET = "dataset"
KIND_CHECKPOINT = "checkpoint"
KIND_REPORT = "report"
KIND_CONFIG = "config"
KIND_CALIBRATION = "calibration"
ARTIFACT_KINDS: tuple[str, ...] = (KIND_DATASET, KIND_CHECKPOINT, KIND_REPORT, KIND_CONFIG,
                                   KIND_CALIBRATION)
DIR_ARTIFACTS = "artifacts"
DIR_STAGING = ".staging"
DIR_LOOP = "loop"
DIR_LOGS = "logs"
FILE_MANIFEST = "manifest.json"
FILE_LOOP_STATE = "state.json"
FILE_DECISIONS = "decisions.jsonl"
FILE_REPORT_JSON = "report.json"
FILE_REPORT_HTML = "report.html"
FILE_FAILURE_STATES = "failure_states.safetensors"
#: ROS-mode evaluation: seconds to wait for any single answer of the lockstep graph (a reset,
#: a step, a sample). 30 s: a graph that hangs is still caught, while a node starved by a
#: loaded 2-core machine (10 s was measured to run out under a parallel test suite) is not.
ROS_ANSWER_TIMEOUT_S = 30.0
DIR_FAILURE_FRAMES = "failure_frames"
DIR_PREFERENCES = "preferences"
FILE_JUDGMENTS = "judgments.jsonl"
DIR_SUITES = "suites"
DIR_RENDERED_REPORTS = "reports"

# --- Environment variables ------------------------------------------------------------------
ENV_RUN_DIR = "CLAWGYM_RUN_DIR"
DEFAULT_RUN_DIR = "runs/default"


def __getattr__(name: str):
    """Names derived from the registries, read at each access (so tasks and families
    registered later, by decorator or entry point, are included): ``TASKS`` (the task
    registry's names), ``PERTURBATION_FAMILIES`` and ``OBSERVATION_FAMILIES`` (the family
    registry's)."""
    if name == "TASKS":
        from clawgym_ros.tasks.registry import task_names

        return task_names()
    if name == "PERTURBATION_FAMILIES":
        from clawgym_ros.perturbations import family_names

        return (FAMILY_NONE, *family_names())
    if name == "OBSERVATION_FAMILIES":
        from clawgym_ros.perturbations import observation_families

        return observation_families()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
