"""`clawgym bench planning`: seeded random feasible problems around a wall on the table.

Each problem: a start configuration whose tool is over the left half of the table (y > 0.12)
and a goal configuration whose tool is over the right half (y < -0.12), both collision-free
and within joint limits (drawn by rejection sampling from one seeded generator). The wall
(clawgym_ros.planning.scene.WALL_OBSTACLES) lies between them. Reported: success rate, median
and p95 planning time, the fraction of returned trajectories that pass a dense re-check
(joint steps of 0.002 rad, zero padding, every state checked: independent of the planner's
certified re-check), mean joint-space path length and trajectory duration, and the collision
rate of the straight joint-space line between the same start and goal, for contrast. Under
``variants``: the same problems planned with planner settings that change plans (e.g. OMPL's
motion-check spacing), so their effect is measured in the same run.

Cost accounting (issue 24: every benchmark as a ratio to its bound, measured in the same run):
exact state checks and clearance probes per problem, and the validity-checker-only time: the
first problems are planned again with the checker's two entry points timed (the same solves:
the planner's seed state is replayed), giving microseconds per check and per probe and the
ratio of planning time to the time spent in the checker within the same replayed solves
(1.0 = nothing but checking).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from clawgym_ros.planning.ompl_planner import OmplPlanner, OmplPlannerConfig
from clawgym_ros.planning.scene import (
    WALL_OBSTACLES,
    build_planning_model,
    describe_obstacles,
    home_qpos,
)
from clawgym_ros.planning.types import PlanRequest
from clawgym_ros.sim.collision import CollisionChecker

DENSE_STEP = 0.002
#: Problems planned again with the checker timed (the validity-checker-only bound).
BOUND_PROBLEMS = 20
TOOL_X = (0.35, 0.75)
TOOL_Z = (0.45, 0.85)
SIDE_Y = 0.12


def sample_problem(checker: CollisionChecker, rng: np.random.Generator,
                   max_tries: int = 200000) -> tuple[np.ndarray, np.ndarray]:
    """A (start, goal) pair on either side of the wall; both valid with the checker's padding."""
    def draw(left: bool) -> np.ndarray:
        for _ in range(max_tries):
            q = rng.uniform(checker.lower, checker.upper)
            pos, _ = checker.tool_pose(q)
            side = pos[1] > SIDE_Y if left else pos[1] < -SIDE_Y
            if (side and TOOL_X[0] < pos[0] < TOOL_X[1] and TOOL_Z[0] < pos[2] < TOOL_Z[1]
                    and checker.is_valid(q)):
                return q
        raise RuntimeError("no feasible configuration found")  # pragma: no cover

    return draw(True), draw(False)


def bench_planning(quick: bool = False, seed: int = 0, problems: int | None = None,
                   planner_id: str = "", variants: bool = True) -> dict[str, Any]:
    """Run the planning benchmark.

    Args:
        quick: 20 problems instead of 200.
        seed: seed of the problem generator and of the planner.
        problems: explicit problem count (overrides ``quick``).
        planner_id: ompl_planning.yaml name (default: the group's default, RRTConnect).
        variants: also plan the same problems with each of :data:`VARIANTS` (planner
            settings that change plans; reported under ``variants``).

    Returns:
        The JSON-able result.
    """
    n = problems if problems is not None else (20 if quick else 200)
    model, spec = build_planning_model()
    home = home_qpos(model, spec)
    planner = OmplPlanner(model, OmplPlannerConfig(seed=seed), scene_qpos=home)
    checker = planner.checker
    rng = np.random.default_rng(seed)
    checker.set_padding(0.0)
    cases = [sample_problem(checker, rng) for _ in range(n)]
    straight_hit = [not checker.motion_valid(start, goal, DENSE_STEP) for start, goal in cases]
    result = _plan_all(planner, cases, planner_id, timed_checker=True)
    result.update({
        "area": "planning",
        "problems": n,
        "planner": planner.moveit.resolve_planner("arm", planner_id).name,
        "dense_recheck_step_rad": DENSE_STEP,
        "straight_line_collision_rate": float(np.mean(straight_hit)),
        "obstacles": describe_obstacles(WALL_OBSTACLES),
        "seed": seed,
    })
    if variants:
        result["variants"] = {
            name: {"config": config, **_plan_all(
                OmplPlanner(model, OmplPlannerConfig(seed=seed, **config), scene_qpos=home),
                cases, planner_id, timed_checker=False)}
            for name, config in VARIANTS.items()}
    return result


#: Planner settings that change plans (and so dataset ids), measured beside the default on
#: the same problems for comparison; none is the default.
VARIANTS: dict[str, dict[str, Any]] = {
    "motion_resolution_0.01": {"motion_resolution": 0.01},
}


def _plan_all(planner: OmplPlanner, cases: list, planner_id: str,
              timed_checker: bool) -> dict[str, Any]:
    """Plan every (start, goal) of ``cases`` in order; metrics of the results."""
    checker = planner.checker
    times, lengths, durations, dense_ok = [], [], [], []
    checks, probes, replay = [], [], []
    reasons: dict[str, int] = {}
    successes = 0
    for start, goal in cases:
        request = PlanRequest(start=tuple(start), joint_goal=tuple(goal),
                              planner_id=planner_id, time_limit=10.0)
        replay.append((request, planner.seed_state))
        before = (checker.checks, checker.probes)
        result = planner.plan(request)
        times.append(result.planning_time)
        checks.append(checker.checks - before[0])
        probes.append(checker.probes - before[1])
        if not result.success:
            reasons[result.reason] = reasons.get(result.reason, 0) + 1
            continue
        successes += 1
        traj = result.trajectory
        checker.set_padding(0.0)
        ok, _ = checker.path_valid(traj.positions, DENSE_STEP, certified=False)
        dense_ok.append(ok)
        lengths.append(traj.path_length())
        durations.append(traj.duration)
    out = {
        "success_rate": successes / len(cases),
        "failure_reasons": reasons,
        "planning_time_median_s": float(np.median(times)),
        "planning_time_p95_s": float(np.percentile(times, 95)),
        "dense_recheck_valid_fraction": float(np.mean(dense_ok)) if dense_ok else 0.0,
        "mean_path_length_rad": float(np.mean(lengths)) if lengths else 0.0,
        "mean_duration_s": float(np.mean(durations)) if durations else 0.0,
        "checks_per_problem": float(np.mean(checks)),
        "probes_per_problem": float(np.mean(probes)),
    }
    if timed_checker:
        bound = _checker_bound(planner, replay[:BOUND_PROBLEMS])
        k = len(bound["checker_s"])
        out.update({
            "us_per_check": bound["us_per_check"],
            "us_per_probe": bound["us_per_probe"],
            "checker_bound_problems": k,
            "checker_bound_median_s": float(np.median(bound["checker_s"])),
            "planning_to_checker_bound_ratio": float(
                np.sum(bound["planning_s"]) / max(np.sum(bound["checker_s"]), 1e-12)),
        })
    return out


def _checker_bound(planner: OmplPlanner, replay: list) -> dict[str, Any]:
    """Plan ``replay``'s requests again from their seed states with the checker's exact check
    and clearance probe timed: per problem the planning time and the seconds spent in the
    checker during that same solve (so load changes cancel), and microseconds per call of
    each (the timer's own cost, ~0.1 us a call, is included in both)."""
    checker = planner.checker
    spent = {"check": [0.0, 0], "probe": [0.0, 0]}
    exact, probe = checker.is_valid, checker._probe

    def timed(name: str, func: Any) -> Any:
        def call(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return func(*args)
            finally:
                spent[name][0] += time.perf_counter() - t0
                spent[name][1] += 1
        return call

    per_problem, planning = [], []
    checker.is_valid = timed("check", exact)
    checker._probe = timed("probe", probe)
    try:
        for request, state in replay:
            before = spent["check"][0] + spent["probe"][0]
            planner.reseed(*state)
            planning.append(planner.plan(request).planning_time)
            per_problem.append(spent["check"][0] + spent["probe"][0] - before)
    finally:
        del checker.is_valid, checker._probe
    return {
        "checker_s": per_problem,
        "planning_s": planning,
        "us_per_check": 1e6 * spent["check"][0] / max(spent["check"][1], 1),
        "us_per_probe": 1e6 * spent["probe"][0] / max(spent["probe"][1], 1),
    }
