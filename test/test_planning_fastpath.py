"""The collision checker's fast path gives the answers of the plain per-state check: the
allowed-collision matrix compiled into contype/conaffinity bits, and the certified dense path
checks (clearance probes) against checking every interpolated state, including motions that
end a hair before or after a contact, with padding and with an attached object."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym_ros.planning.base import GRIPPER_TOUCH_LINKS
from clawgym_ros.planning.moveit_config import load_moveit_config
from clawgym_ros.planning.scene import build_planning_model, home_qpos
from clawgym_ros.sim.collision import CollisionChecker

STEP = 0.002


@pytest.fixture(scope="module")
def wall():
    model, spec = build_planning_model()
    return model, spec, home_qpos(model, spec)


def _checker(wall) -> CollisionChecker:
    model, _, qpos = wall
    return CollisionChecker(model, disabled_pairs=load_moveit_config().srdf.disabled_collisions,
                            scene_qpos=qpos)


def _dense(chk: CollisionChecker, q0: np.ndarray, q1: np.ndarray) -> bool:
    n = max(1, int(np.ceil(np.max(np.abs(q1 - q0)) / STEP)))
    return all(chk.is_valid(q0 + (q1 - q0) * (k / n)) for k in range(n + 1))


def _boundary_motions(chk: CollisionChecker, rng: np.random.Generator, count: int):
    """Motions from a valid state toward an invalid one, ending just before, at and just past
    the first contact (found by bisection)."""
    out = []
    while len(out) < count:
        q0 = rng.uniform(chk.lower, chk.upper)
        if not chk.is_valid(q0):
            continue
        q1 = q0 + rng.normal(0.0, 0.4, q0.size)
        if chk.is_valid(q1):
            continue
        lo, hi = 0.0, 1.0
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if chk.is_valid(q0 + (q1 - q0) * mid) else (lo, mid)
        for eps in (-2e-3, -1e-4, 0.0, 1e-4):
            out.append((q0, q0 + (q1 - q0) * min(1.0, max(0.0, lo + eps))))
    return out


def test_allowed_pairs_are_never_generated_and_answers_match_the_contact_filter(wall):
    chk = _checker(wall)
    assert chk._acm_bits
    bent = np.array([0.0, 0.0, 0.0, -3.0, 0.0, 3.7, 0.0])   # folded: adjacent links overlap
    rng = np.random.default_rng(0)
    states = [bent, *rng.uniform(chk.lower - 0.05, chk.upper + 0.05, (400, 7))]
    for padding in (0.0, 0.01):
        chk.set_padding(padding)
        for q in states:
            valid = chk.is_valid(q)
            assert valid == (chk.within_limits(q) and not chk.contacts(q))
            if chk.within_limits(q):
                bodies = chk.model.geom_bodyid[chk.data.contact.geom[:chk.data.ncon]]
                assert not chk._allowed[bodies[:, 0], bodies[:, 1]].any()
            assert chk.is_valid(list(q)) == valid            # plain sequences too


@pytest.mark.parametrize("case", ["bare", "padding", "attached"])
def test_certified_dense_checks_give_the_per_state_answer(wall, case):
    model, spec, qpos = wall
    chk = _checker(wall)
    if case == "padding":
        chk.set_padding(0.01)
    if case == "attached":
        home = np.array(spec.robot.home)
        tool, _ = chk.tool_pose(home)
        scene = qpos.copy()
        adr = model.jnt_qposadr[model.joint("cube_red_joint").id]
        scene[adr:adr + 3] = tool + [0.0, 0.0, -0.03]
        chk.set_scene_qpos(scene)
        chk.attach("cube_red", home, GRIPPER_TOUCH_LINKS)
    rng = np.random.default_rng(11)
    motions = _boundary_motions(chk, rng, 100)
    iterations = model.opt.ccd_iterations
    answers = []
    for q0, q1 in motions:
        dense = _dense(chk, q0, q1)
        assert chk.motion_valid(q0, q1, STEP) == dense
        answers.append(dense)
        assert chk.motion_valid(q0, q1, STEP, certified=False) == dense
    assert 0 < sum(answers) < len(answers)                   # both outcomes near contacts
    assert chk.model.opt.ccd_iterations == iterations        # probe settings restored
    # Polylines: same verdict and same first bad segment as segment-by-segment checking.
    for _ in range(30):
        path = [rng.uniform(chk.lower, chk.upper)]
        for _ in range(8):
            path.append(np.clip(path[-1] + rng.normal(0.0, 0.05, 7), chk.lower, chk.upper))
        path = np.array(path)
        first = next((i for i in range(len(path) - 1) if not _dense(chk, path[i], path[i + 1])),
                     -1)
        assert chk.path_valid(path, STEP) == (first < 0, first)
    # Far from obstacles a probe stands for many states.
    q0 = np.array(spec.robot.home)
    q1 = q0 + np.array([0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    checks, probes = chk.checks, chk.probes
    assert chk.motion_valid(q0, q1, STEP)
    assert (chk.checks - checks) + (chk.probes - probes) < 150 / 5


def test_probe_settings_are_restored_after_an_error(wall, monkeypatch):
    chk = _checker(wall)
    before = (chk.model.opt.ccd_iterations, chk.model.opt.ccd_tolerance)

    def boom(q):
        raise RuntimeError("probe failed")

    monkeypatch.setattr(chk, "_probe", boom)
    q0 = np.array(wall[1].robot.home)
    with pytest.raises(RuntimeError):
        chk.motion_valid(q0, q0 + 0.2, STEP)
    assert (chk.model.opt.ccd_iterations, chk.model.opt.ccd_tolerance) == before


def _densify_by_state(positions: np.ndarray, max_step: float) -> np.ndarray:
    """The per-state densify that timing.densify replaces."""
    out = [positions[0]]
    for a, b in zip(positions[:-1], positions[1:], strict=True):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step)))
        out += [a + (b - a) * (i / n) for i in range(1, n + 1)]
    return np.array(out)


def test_lean_toppra_passes_give_toppras_own_trajectory(monkeypatch):
    """timing's lean TOPP-RA passes make the same solver calls with the same arithmetic as
    toppra's compute_trajectory: bit-identical trajectories (else plans and dataset ids
    would change)."""
    from clawgym_ros import constants as C
    from clawgym_ros.planning import timing

    rng = np.random.default_rng(4)
    vmax = np.array([2.0, 2.0, 2.0, 2.0, 2.5, 2.5, 2.5])
    amax = np.array([3.75, 1.875, 2.5, 3.125, 3.75, 5.0, 5.0])
    cases = []
    for _ in range(12):
        waypoints = np.cumsum(rng.normal(0.0, 0.6, (int(rng.integers(2, 7)), 7)), axis=0)
        cases.append((waypoints, vmax * rng.uniform(0.2, 1.0), amax * rng.uniform(0.2, 1.0)))
    lean = [timing.time_parameterize(w, C.ARM_JOINTS, v, a) for w, v, a in cases]
    monkeypatch.setattr(timing, "_LEAN_SOLVER", "none")      # toppra's own passes,
    monkeypatch.setattr(timing, "_LEAN_CONSTRAINTS", False)  # constraints and densify
    monkeypatch.setattr(timing, "densify", _densify_by_state)
    for (w, v, a), mine in zip(cases, lean, strict=True):
        theirs = timing.time_parameterize(w, C.ARM_JOINTS, v, a)
        assert mine is not None and theirs is not None
        for field in ("times", "positions", "velocities", "accelerations"):
            assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field


@pytest.mark.parametrize("padding", [0.0, 0.01])
def test_clearance_certificates_hold_at_their_edge(wall, padding):
    """Every state a probe certifies is valid: states pushed in random directions to 0.89 of
    the certificate's limit (the walk certifies below 0.9) from states close to contacts."""
    chk = _checker(wall)
    chk.set_padding(padding)
    rng = np.random.default_rng(5)
    starts = [q0 + (q1 - q0) * rng.uniform(0.8, 1.0)
              for q0, q1 in _boundary_motions(chk, rng, 120)[::4]]
    certified = 0
    for q in starts:
        chk._probe_mode(True)
        try:
            rows, gaps = chk._probe(q)
        finally:
            chk._probe_mode(False)
        if gaps.min() <= 0.0:
            continue
        for _ in range(20):
            step = rng.normal(0.0, 1.0, q.size)
            step *= 0.89 / np.max((rows @ np.abs(step)) / gaps)
            if chk.within_limits(q + step):
                assert chk.is_valid(q + step), (q, step)
                certified += 1
    assert certified > 300


def test_walk_finds_the_first_invalid_state_behind_a_look_ahead_probe(wall):
    """The walk logic against a synthetic world (invalid where 0.50 <= x < 0.51 on joint 1)
    with exact clearance certificates: probes placed ahead must not skip the thin bad band,
    and the first invalid state is the one reported."""
    chk = _checker(wall)
    band = (0.50, 0.51)

    def probe(q):
        x = float(q[0])
        gap = band[0] - x if x < band[0] else (x - band[1] if x >= band[1] else 0.0)
        return np.eye(7)[:1], np.array([gap])

    def exact(q):
        return not band[0] <= float(q[0]) < band[1]

    chk._probe, chk.is_valid = probe, exact
    for stop in (0.49, 0.505, 1.0):
        states = np.zeros((int(round(stop / 0.002)) + 1, 7))
        states[:, 0] = np.linspace(0.0, stop, len(states))
        first = next((k for k, q in enumerate(states) if not exact(q)), -1)
        assert chk._certified_walk(states) == first
