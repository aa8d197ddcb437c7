"""A synthetic, physics-free pick-and-place episode generator with injectable faults.

It produces records with the exact shape of a real expert's (9 joints, state observations,
joint-target + gripper actions, stages, skill calls, goal and achieved poses) from a seed alone,
in well under a millisecond per step. It serves the tests and benchmarks of the synthesis and
dataset layers until the simulator-backed experts exist, and documents by example what an
expert must produce. It is not a task: nothing here is physically simulated.

Options read from ``spec.options``:
    steps (int, default 120): number of control steps (multiple of 6 is tidy).
    images (bool): add 24x32 RGB frames from ``wrist_camera``.
    fault (str): one of :data:`FAULTS`, to test that sign-off rejects it.
"""

from __future__ import annotations

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.synthesis.episode import EpisodeRecord, EpisodeRecorder, EpisodeSpec
from clawgym_ros.synthesis.signoff import (
    DualSignoff,
    FeasibilityCheck,
    JointLimit,
    PhysicalLimits,
    SemanticValidator,
)

DT = 0.05
TEMPLATES = ("cube_small", "cube_large", "cylinder")
STAGES = ("reach", "grasp", "lift", "transport", "place", "release")
#: skill called in each stage (``lift`` is its own skill; reach/transport are ``move_to``).
STAGE_SKILLS = ("move_to", "grasp", "lift", "move_to", "place", "release")
GRAMMAR = "move_to grasp lift move_to+ place release"
FAULTS = (
    "gripper_open_mid_transport", "false_success", "joint_limit", "velocity", "effort", "nan",
    "collision", "contact_force", "energy_blowup",
)
ARM_LIMIT = JointLimit(lower=-2.8, upper=2.8, velocity=2.0, effort=60.0)
FINGER_LIMIT = JointLimit(lower=0.0, upper=0.04, velocity=0.2, effort=40.0)
LIMITS = PhysicalLimits(
    joints={**{j: ARM_LIMIT for j in C.ARM_JOINTS}, **{j: FINGER_LIMIT for j in C.GRIPPER_JOINTS}},
    max_contact_force=100.0,
)
#: The sign-off that matches this generator.
SIGNOFF = DualSignoff(
    semantic={C.TASK_PICK_PLACE: SemanticValidator(STAGES, GRAMMAR, goal_tolerance=0.02)},
    physical=FeasibilityCheck(LIMITS),
)


def synthetic_episode(spec: EpisodeSpec) -> EpisodeRecord:
    """Generate one synthetic pick-and-place episode for ``spec`` (deterministic in spec).

    Raises:
        ValueError: unknown fault name.
    """
    rng = np.random.default_rng(spec.seed)
    steps = int(spec.options.get("steps", 120))
    fault = spec.options.get("fault")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {FAULTS}")
    template = spec.template or TEMPLATES[int(rng.integers(len(TEMPLATES)))]
    noise_std = 0.02 * spec.intensity if spec.family == C.FAMILY_SENSOR_NOISE else 0.0
    params = _perturbation_params(spec)
    seg = max(1, steps // len(STAGES))
    # Joint waypoints: start, above object, grasp, lifted, above bin, place, retreat.
    # Amplitude scaled to the stage duration keeps peak joint speeds near pi/2 rad/s.
    amplitude = 0.5 * min(1.0, seg * DT)
    waypoints = rng.uniform(-amplitude, amplitude, size=(len(STAGES) + 1, len(C.ARM_JOINTS)))
    object_xyz = np.array([0.5, 0.0, 0.02]) + rng.uniform(-0.1, 0.1, 3) * [1, 1, 0]
    bin_xyz = np.array([0.3, 0.4, 0.02]) + rng.uniform(-0.05, 0.05, 3) * [1, 1, 0]
    rec = EpisodeRecorder(spec, C.ARM_JOINTS + C.GRIPPER_JOINTS, template=template,
                          perturbation_params=params)
    holding = False
    dropped = False
    obj = object_xyz.copy()
    prev_q = waypoints[0]
    for step in range(steps):
        stage_i = min(step // seg, len(STAGES) - 1)
        frac = min(1.0, (step - stage_i * seg + 1) / seg)
        s = 0.5 - 0.5 * np.cos(np.pi * frac)
        q = waypoints[stage_i] + s * (waypoints[stage_i + 1] - waypoints[stage_i])
        dq = (q - prev_q) / DT
        prev_q = q
        stage = STAGES[stage_i]
        finger = 0.04 if stage in ("reach", "release") or dropped else 0.012
        if stage == "grasp":
            finger = 0.04 - 0.028 * s
        transport_mid = stage == "transport" and frac >= 0.5
        if fault in ("gripper_open_mid_transport", "false_success") and transport_mid:
            dropped = True
        holding = stage in ("lift", "transport", "place") and not dropped
        if holding:
            obj = object_xyz + (bin_xyz - object_xyz) * (
                0 if stage == "lift" else s if stage == "transport" else 1.0)
            obj = obj + [0, 0, 0.1 if stage != "place" else 0.1 * (1 - s)]
        elif dropped:
            obj = np.array([obj[0], obj[1], 0.02])
        tau = 5.0 * np.sin(q) + 0.5 * dq
        grip_force = 20.0 if holding else 0.0
        t = step * DT
        q_full = np.concatenate([q, [finger / 2, finger / 2]])
        dq_full = np.concatenate([dq, [0.0, 0.0]])
        tau_full = np.concatenate([tau, [grip_force, grip_force]])
        obs = {
            C.OBS_JOINT_POS: q + rng.normal(0, noise_std, q.shape) if noise_std else q,
            C.OBS_JOINT_VEL: dq,
            C.OBS_GRIPPER: [finger],
            C.OBS_TOOL_POSE: np.concatenate([np.tanh(q[:3]), [1.0, 0.0, 0.0, 0.0]]),
            C.OBS_OBJECT_POSES: np.concatenate([obj, [1.0, 0.0, 0.0, 0.0]]),
        }
        next_i = min((step + 1) // seg, len(STAGES) - 1)
        action = {C.ACT_JOINT_TARGET: waypoints[next_i + 1] if step + 1 < steps else q,
                  C.ACT_GRIPPER: [finger]}
        images = {C.CAMERA_WRIST: _frame(obj, q, spec.intensity)} \
            if spec.options.get("images") else None
        energy = 0.5 * float(dq @ dq) + 9.81 * 0.1 * float(obj[2])
        rec.step(t, obs=obs, action=action, joint_position=q_full, joint_velocity=dq_full,
                 joint_effort=tau_full, contact_force=grip_force, collision=False,
                 energy=energy, images=images)
        if frac >= 1.0 and not (dropped and stage_i >= STAGES.index("transport")):
            rec.stage(stage, t)
            name = STAGE_SKILLS[stage_i]
            args = {"target": [round(float(x), 6) for x in waypoints[stage_i + 1]]}
            rec.skill(name, args, start=stage_i * seg * DT, end=t)
        if dropped and transport_mid and not any(c.name == "release" for c in rec.skill_calls):
            rec.skill("release", {}, start=t, end=t, outcome=C.SKILL_OK,
                      detail="gripper opened mid-transport")
    record = rec.finish(
        success=not dropped or fault == "false_success",
        reason="object dropped during transport" if dropped and fault != "false_success"
        else "",
        goal={"object_xyz": bin_xyz.tolist(), "in_bin": True},
        achieved={"object_xyz": obj.tolist(), "in_bin": not dropped or fault == "false_success"},
    )
    return _inject(record, fault)


def _perturbation_params(spec: EpisodeSpec) -> dict[str, float]:
    if spec.family == C.FAMILY_LIGHTING:
        return {"diffuse_scale": 1.0 - 0.8 * spec.intensity}
    if spec.family == C.FAMILY_SENSOR_NOISE:
        return {"joint_pos_std": 0.02 * spec.intensity}
    if spec.family == C.FAMILY_DYNAMICS:
        return {"friction_scale": 1.0 - 0.5 * spec.intensity}
    if spec.family == C.FAMILY_GPS_DROPOUT:
        return {"outage_s": 10.0 * spec.intensity}
    return {}


def _frame(obj: np.ndarray, q: np.ndarray, intensity: float) -> np.ndarray:
    ys, xs = np.mgrid[0:24, 0:32]
    level = 1.0 - 0.8 * intensity
    frame = np.empty((24, 32, 3), dtype=np.uint8)
    frame[..., 0] = (xs * 8 * level).astype(np.uint8)
    frame[..., 1] = (ys * 10 * level).astype(np.uint8)
    frame[..., 2] = int(128 + 100 * np.tanh(obj[0] + q[0]))
    return frame


def _inject(record: EpisodeRecord, fault: str | None) -> EpisodeRecord:
    mid = record.num_steps // 2
    if fault == "joint_limit":
        record.joint_position[mid:mid + 3, 1] = 3.0
    elif fault == "velocity":
        record.joint_velocity[mid, 2] = 3.5
    elif fault == "effort":
        record.joint_effort[mid, 3] = 150.0
    elif fault == "nan":
        record.joint_velocity[mid, 0] = np.nan
    elif fault == "collision":
        record.collision[mid:mid + 2] = True
    elif fault == "contact_force":
        record.contact_force[mid] = 500.0
    elif fault == "energy_blowup":
        assert record.energy is not None
        record.energy[mid:] += 1e4
    return record
