"""Fit a log's parameters: multi-start bounded least squares on replayed trajectories.

Residuals are the arm's reported joint positions (with the encoder biases), velocities and
efforts minus the simulated ones at every joint state stamp after ``settle_s``, each channel
(quantity x joint) divided by its noise level. Levels start at fixed guesses (1 mrad,
10 mrad/s, 0.1 N m) and are re-estimated from the residuals before each refinement, so that
no channel dominates by its unit.

The starts fit positions and velocities only: efforts react to each held command's step
within milliseconds, so their residuals jump whenever a trial latency moves a command switch
across a sample, and a start far from the true latency gets lost in those jumps (measured:
effort RMSE 1.8-6.6 N m for any latency 2-12 ms off, 0.05 N m at the true one). Positions
and velocities change smoothly with the latency; once they have placed it, two refinements
add the efforts.

Optimizer: ``scipy.optimize.least_squares`` (dogbox trust region, bounds; measured: trf
needed 40 evaluations where dogbox took 19 on a 10 s log), from the
nominal values and ``starts - 1`` points drawn from ``seed``, uniformly within a quarter of the
bounds' width around the nominal value (clipped to the bounds; the encoder biases start at 0:
they enter linearly). The starts run on the log's first
``start_window_s`` (cheaper); the best is then refined on the whole log.
Jacobian: forward differences of the physical parameters, all in one batched MuJoCo rollout;
the encoder biases' columns are exact (a bias only shifts its joint's reported position).

Uncertainty, per parameter:

* Laplace / sandwich: covariance ``H^-1 S H^-1`` with ``H = J^T J`` and ``S`` the Newey-West
  (Bartlett) long-run covariance of the per-sample score ``J_t^T r_t``. Residuals left by
  model error are correlated in time; the bandwidth is twice the lag at which their mean
  autocorrelation falls below 0.05. With white residuals this is the usual ``s^2 (J^T J)^-1``.
* model error: the replay averages a command over the physics step in which it switches; the
  estimates' shift under the other plausible choice (each switch on the nearest step
  boundary), from one Gauss-Newton step at the fit, bounds what that approximation costs. It
  is zero when every switch falls on a step boundary.
* spread across restarts: the range of the starts that reached the best cost (within 0.1%).
* the reported 95% interval: value +- (1.96 sd + model error), widened to cover that range,
  clipped to the bounds.

A parameter is *not identifiable from this log* when its Jacobian column is zero (the log does
not excite it) or its interval's half-width exceeds a quarter of its bounds' width; its
interval is then the bounds, and a warning says so. Pairs of parameters whose estimates are
correlated beyond 0.95 are named too.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.calibration.log import LogError, RobotLog
from clawgym_ros.calibration.replay import Prediction, Replay, observe
from clawgym_ros.sim.calibration_params import BIAS_PREFIX, PARAMS, PHYSICS

Z95 = 1.959963984540054
GROUPS = ("position", "velocity", "effort")
INITIAL_NOISE = {"position": 1e-3, "velocity": 1e-2, "effort": 0.1}
UNITS = {"position": "rad", "velocity": "rad/s", "effort": "N m"}
#: interval half-width above this share of the bounds' width = not identifiable
IDENTIFIABLE_SHARE = 0.25
CONVERGED_REL = 1e-3


@dataclasses.dataclass(frozen=True)
class FitConfig:
    """Options of :func:`calibrate`."""

    params: tuple[str, ...]
    bounds: Mapping[str, tuple[float, float]]
    seed: int = 0
    starts: int = 3
    settle_s: float = 1.0
    threads: int = 2
    max_nfev: int = 25
    start_window_s: float = 20.0
    scene: str = C.SCENE_TABLETOP


@dataclasses.dataclass
class ParamFit:
    """The result for one parameter (natural units)."""

    name: str
    value: float
    nominal: float
    low: float
    high: float
    unit: str
    sd: float
    model_error: float
    ci_low: float
    ci_high: float
    restart_low: float
    restart_high: float
    identifiable: bool
    note: str = ""


@dataclasses.dataclass
class FitResult:
    """What :func:`calibrate` found."""

    params: list[ParamFit]
    rmse_before: dict[str, list[float]]
    rmse_after: dict[str, list[float]]
    noise: dict[str, list[float]]
    starts: list[dict[str, Any]]
    warnings: list[str]
    samples: int
    duration_s: float
    bandwidth: int
    rollouts: int
    wall_s: float
    contacts: bool
    objects_moved_m: float
    traces: dict[str, np.ndarray]

    def value(self, name: str) -> float:
        return next(p.value for p in self.params if p.name == name)

    def summary_rmse(self, which: str = "after", group: str = "position") -> float:
        """RMS over the arm joints of one group's per-joint RMSE."""
        values = np.asarray((self.rmse_after if which == "after" else self.rmse_before)[group])
        return float(np.sqrt(np.mean(values ** 2)))


class _Problem:
    """Residuals and Jacobian of one log (see the module docstring)."""

    def __init__(self, log: RobotLog, config: FitConfig, groups: Sequence[str] = GROUPS,
                 replay: Replay | None = None) -> None:
        self.replay = replay or Replay(log, config.scene, threads=config.threads)
        self.names = list(config.params)
        self.phys = [i for i, n in enumerate(self.names) if PARAMS[n].kind == PHYSICS]
        self.bias = [i for i, n in enumerate(self.names) if n.startswith(BIAS_PREFIX)]
        self.low = np.array([config.bounds[n][0] for n in self.names])
        self.high = np.array([config.bounds[n][1] for n in self.names])
        cols = log.arm()
        self.sel = np.flatnonzero(log.t - log.t[0] >= config.settle_s)
        if len(self.sel) < 10:
            raise LogError(f"{log.source}: {len(self.sel)} joint states after the first "
                           f"{config.settle_s:g} s; a longer log is needed")
        rec = {"position": log.position[:, cols], "velocity": log.velocity[:, cols],
               "effort": log.effort[:, cols]}
        # groups the log carries (a robot without effort sensing fits positions/velocities)
        self.groups = [g for g in groups if np.isfinite(rec[g][self.sel]).all()]
        if not self.groups:
            raise LogError(f"{log.source}: {C.TOPIC_JOINT_STATES} carries none of "
                           f"{', '.join(groups)} for every arm joint")
        self.rec = {g: rec[g][self.sel] for g in self.groups}
        self.noise = {g: np.full(7, INITIAL_NOISE[g]) for g in self.groups}
        self.cache: OrderedDict[tuple[float, ...], Prediction] = OrderedDict()
        self.rollouts = 0

    def values(self, x: np.ndarray) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.names, x, strict=True)}

    def _key(self, x: np.ndarray) -> tuple[float, ...]:
        return tuple(float(x[i]) for i in self.phys)

    def predict_many(self, xs: Sequence[np.ndarray]) -> list[Prediction]:
        todo = [x for x in xs if self._key(x) not in self.cache]
        if todo:
            preds = self.replay.run([self.values(x) for x in todo])
            self.rollouts += len(todo)
            for x, p in zip(todo, preds, strict=True):
                self.cache[self._key(x)] = p
                while len(self.cache) > 64:
                    self.cache.popitem(last=False)
        return [self.cache[self._key(x)] for x in xs]

    def raw(self, x: np.ndarray, pred: Prediction | None = None) -> dict[str, np.ndarray]:
        """Unweighted residuals (simulated - recorded) per group, (n_sel, 7)."""
        pred = pred or self.predict_many([x])[0]
        sim = {"position": observe(pred, self.values(x)), "velocity": pred.velocity,
               "effort": pred.effort}
        return {g: sim[g][self.sel] - self.rec[g] for g in self.groups}

    def residuals(self, x: np.ndarray, pred: Prediction | None = None) -> np.ndarray:
        raw = self.raw(x, pred)
        return np.concatenate([(raw[g] / self.noise[g]).ravel() for g in self.groups])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        base = self.residuals(x)
        jac = np.zeros((len(base), len(self.names)))
        shifted, steps = [], []
        for i in self.phys:
            h = 1e-3 * (self.high[i] - self.low[i])
            if x[i] + h > self.high[i]:
                h = -h
            xi = x.copy()
            xi[i] += h
            shifted.append(xi)
            steps.append(h)
        self.predict_many(shifted)
        for i, xi, h in zip(self.phys, shifted, steps, strict=True):
            jac[:, i] = (self.residuals(xi) - base) / h
        n = len(self.sel)
        if "position" in self.groups:
            for i in self.bias:
                j = C.ARM_JOINTS.index(self.names[i][len(BIAS_PREFIX):])
                col = np.zeros((n, 7))
                col[:, j] = 1.0 / self.noise["position"][j]
                jac[:n * 7, i] = col.ravel()
        return jac


def calibrate(log: RobotLog, config: FitConfig,
              progress: Callable[[str], None] | None = None) -> FitResult:
    """Fit ``config.params`` to ``log`` (see the module docstring).

    Raises:
        LogError: the log does not fit the scene's robot or is too short.
    """
    from scipy.optimize import least_squares

    start_wall = time.perf_counter()
    say = progress or (lambda _msg: None)
    window = _head(log, config.start_window_s) \
        if log.duration > 1.5 * config.start_window_s else log
    trial = _Problem(window, config, groups=("position", "velocity"))
    prob = _Problem(log, config, replay=trial.replay if window is log else None)
    nominal = np.array([PARAMS[n].nominal for n in prob.names])
    rng = np.random.default_rng([config.seed, 0xCA11B])
    starts = [nominal.copy()]
    for _ in range(config.starts - 1):
        half = 0.25 * (prob.high - prob.low)
        x0 = np.clip(rng.uniform(nominal - half, nominal + half), prob.low, prob.high)
        x0[prob.bias] = nominal[prob.bias]
        starts.append(x0)

    def solve(problem: _Problem, x0: np.ndarray, max_nfev: int) -> Any:
        return least_squares(problem.residuals, x0, jac=problem.jacobian,
                             bounds=(problem.low, problem.high),
                             x_scale=problem.high - problem.low, method="dogbox",
                             max_nfev=max_nfev, xtol=1e-8, ftol=1e-8, gtol=1e-10)

    runs = []
    for k, x0 in enumerate(starts):
        sol = solve(trial, x0, config.max_nfev)
        runs.append(sol)
        say(f"start {k + 1}/{len(starts)}: cost {sol.cost:.6g} after {sol.nfev} evaluations "
            f"({window.duration:.0f} s of the log)")
    costs = [float(r.cost) for r in runs]
    best = int(np.argmin(costs))
    converged = [r.x for r, c in zip(runs, costs, strict=True)
                 if c <= costs[best] * (1 + CONVERGED_REL) + 1e-12]
    # each channel's noise level from the residuals, then refine on the whole log (twice:
    # the second with the levels the first leaves)
    x = runs[best].x
    for round_ in (1, 2):
        raw = prob.raw(x)
        for g in prob.groups:
            prob.noise[g] = np.maximum(np.sqrt(np.mean(raw[g] ** 2, axis=0)), 1e-12)
        final = solve(prob, x, config.max_nfev)
        x = final.x
        say(f"refinement {round_} on {log.duration:.0f} s: cost {final.cost:.6g} after "
            f"{final.nfev} evaluations")
    x = final.x
    spread = np.array(converged + [x])
    jac = prob.jacobian(x)
    res = prob.residuals(x)
    cov, bandwidth = _sandwich(jac, res, len(prob.sel), len(prob.groups) * 7)
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # model error: how far one Gauss-Newton step moves the estimates when the command
    # switches are put on the nearest physics step instead of averaged over it
    alt = prob.residuals(x, prob.replay.run([prob.values(x)], on_steps=True)[0])
    prob.rollouts += 1
    model_err = np.abs(np.linalg.lstsq(jac, res - alt, rcond=None)[0])
    warnings: list[str] = []
    fits: list[ParamFit] = []
    col_norm = np.linalg.norm(jac, axis=0)
    for i, name in enumerate(prob.names):
        spec = PARAMS[name]
        lo_b, hi_b = prob.low[i], prob.high[i]
        r_lo, r_hi = float(spread[:, i].min()), float(spread[:, i].max())
        half = Z95 * sd[i] + model_err[i]
        ci_lo = max(lo_b, min(x[i] - half, r_lo))
        ci_hi = min(hi_b, max(x[i] + half, r_hi))
        note = ""
        identifiable = True
        if col_norm[i] <= 1e-9 * max(1.0, col_norm.max()):
            identifiable, note = False, "not excited: the log does not depend on it"
            if name == "object_mass_scale" and not prob.replay.contacts:
                note = ("not excited: no object moved in this log (largest displacement "
                        f"{prob.replay.moved * 1000:.2f} mm); record one that moves objects")
        elif half > IDENTIFIABLE_SHARE * (hi_b - lo_b) or not np.isfinite(half):
            identifiable = False
            note = (f"not identifiable from this log: 95% half-width {half:.3g} "
                    f"{spec.unit} exceeds a quarter of the bounds' width")
        if not identifiable:
            ci_lo, ci_hi = float(lo_b), float(hi_b)
            warnings.append(f"{name}: {note}; its interval is the bounds [{lo_b:g}, {hi_b:g}]")
        fits.append(ParamFit(name=name, value=float(x[i]), nominal=spec.nominal,
                             low=float(lo_b), high=float(hi_b), unit=spec.unit,
                             sd=float(sd[i]), model_error=float(model_err[i]),
                             ci_low=float(ci_lo), ci_high=float(ci_hi),
                             restart_low=r_lo, restart_high=r_hi, identifiable=identifiable,
                             note=note))
    safe = np.where(sd > 0, sd, 1.0)
    corr = cov / np.outer(safe, safe)
    for i in range(len(fits)):
        for j in range(i + 1, len(fits)):
            if fits[i].identifiable and fits[j].identifiable and abs(corr[i, j]) > 0.95:
                warnings.append(f"{fits[i].name} and {fits[j].name} are correlated "
                                f"({corr[i, j]:+.2f}): the log tells mostly their combination")
    raw_after = prob.raw(x)
    raw_before = prob.raw(nominal)
    rmse = {k: {g: np.sqrt(np.mean(r[g] ** 2, axis=0)).tolist() for g in prob.groups}
            for k, r in (("before", raw_before), ("after", raw_after))}
    traces = {"t": log.t[prob.sel] - log.t[0], "recorded": prob.rec["position"]
              if "position" in prob.rec else np.zeros((len(prob.sel), 7)),
              "before": prob.rec["position"] + raw_before["position"],
              "after": prob.rec["position"] + raw_after["position"]}
    start_rows = [{"x0": dict(zip(prob.names, map(float, x0), strict=True)),
                   "x": dict(zip(prob.names, map(float, r.x), strict=True)),
                   "cost": c, "nfev": int(r.nfev),
                   "converged": bool(c <= costs[best] * (1 + CONVERGED_REL) + 1e-12)}
                  for x0, r, c in zip(starts, runs, costs, strict=True)]
    return FitResult(
        params=fits, rmse_before=rmse["before"], rmse_after=rmse["after"],
        noise={g: prob.noise[g].tolist() for g in prob.groups}, starts=start_rows,
        warnings=warnings, samples=len(prob.sel), duration_s=log.duration,
        bandwidth=bandwidth,
        rollouts=trial.rollouts + prob.rollouts,
        wall_s=time.perf_counter() - start_wall, contacts=prob.replay.contacts,
        objects_moved_m=prob.replay.moved, traces=traces)


def _head(log: RobotLog, seconds: float) -> RobotLog:
    """The log's first ``seconds`` (joint states; commands and object poses up to then)."""
    end = log.t[0] + seconds
    js = log.t <= end
    cmd = log.cmd_t <= end
    obj = log.object_t <= end
    return dataclasses.replace(
        log, t=log.t[js], position=log.position[js], velocity=log.velocity[js],
        effort=log.effort[js], cmd_t=log.cmd_t[cmd], cmd_position=log.cmd_position[cmd],
        cmd_velocity=log.cmd_velocity[cmd], object_t=log.object_t[obj],
        object_poses=log.object_poses[obj])


def _sandwich(jac: np.ndarray, res: np.ndarray, n: int, channels: int) -> tuple[np.ndarray, int]:
    """Newey-West covariance of least-squares estimates with residuals correlated in time.

    ``jac`` / ``res`` rows are ordered group-major, then sample, then joint (the layout of
    the residual vector); scores are summed per sample over channels.
    """
    p = jac.shape[1]
    groups = channels // 7
    r = res.reshape(groups, n, 7)
    j = jac.reshape(groups, n, 7, p)
    score = np.einsum("gnc,gncp->np", r, j)
    # bandwidth from the residuals' own autocorrelation (mean over channels)
    rc = r.transpose(1, 0, 2).reshape(n, -1)
    rc = rc - rc.mean(axis=0)
    var = np.maximum((rc ** 2).sum(axis=0), 1e-300)
    max_lag = max(1, n // 5)
    lag = max_lag
    for k in range(1, max_lag):
        acf = float(np.mean((rc[k:] * rc[:-k]).sum(axis=0) / var))
        if acf < 0.05:
            lag = k
            break
    bandwidth = min(max_lag, 2 * lag)
    s = score.T @ score
    for k in range(1, bandwidth + 1):
        w = 1.0 - k / (bandwidth + 1)
        g = score[k:].T @ score[:-k]
        s += w * (g + g.T)
    h = jac.T @ jac
    h_inv = np.linalg.pinv(h)
    return h_inv @ s @ h_inv, bandwidth
