"""The loop driver (pure): plan, synthesize, train, (fine-tune), evaluate, persist; resume
after a crash.

:class:`LoopRunner` owns the run directory's ``loop/state.json`` (rewritten atomically after
every completed step) and ``loop/decisions.jsonl`` (one record per decision), and calls an
:class:`Executor` for the long steps. ``coordinator_node`` implements the executor with
the Synthesize, Train and Evaluate actions of the other nodes; tests implement it in process.

Resume: a rerun loads the state and continues at the first step without an artifact id, with
the goal it records before starting a step. Every seed derives from the loop seed and the
iteration, so a redone step yields the same content-addressed artifact. Before running a
step, an artifact produced by an identical goal (same generation config and seed, same
datasets/seed/steps, same checkpoint/suite/seed) is looked up and reused, so a step that
completed while the coordinator was down is not recomputed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from clawgym_ros import constants as C
from clawgym_ros.artifacts import ArtifactStore, atomic_write_json
from clawgym_ros.artifacts.atomic import append_line
from clawgym_ros.artifacts.store import content_id
from clawgym_ros.coordinator.config import LoopConfig
from clawgym_ros.coordinator.plan import (
    PHASE_DONE,
    PHASE_EVALUATE,
    PHASE_FINETUNE,
    PHASE_IDLE,
    PHASE_SYNTHESIZE,
    PHASE_TRAIN,
    LoopState,
    Plan,
    initial_state,
    next_plan,
)
from clawgym_ros.errors import ClawgymError

FILE_LOOP_CONFIG = "loop.json"
FILE_STATUS = "status.json"

#: progress(done, total, text) for the step in flight.
ProgressFn = Callable[[int, int, str], None]


class LoopError(ClawgymError):
    """A loop step failed, or the run directory holds an incompatible loop."""


@dataclasses.dataclass(frozen=True)
class SynthesizeGoal:
    """What a Synthesize action goal carries."""

    mixture: tuple[dict, ...]
    episodes: int
    seed: int
    workers: int
    record_images: bool
    run_dir: str
    #: recovery demonstrations from this report's failure states (the mixture is ignored)
    from_report: str = ""
    #: calibration artifact the simulator runs at ("" = nominal / the node's own)
    calibration_id: str = ""
    #: expert options of every episode (LoopConfig.synthesis_options)
    options: dict = dataclasses.field(default_factory=dict)

    @property
    def options_json(self) -> str:
        """The Synthesize action's ``options_json``."""
        return options_json(self.options)


def options_json(options: Mapping[str, Any]) -> str:
    """Settings as an action goal's JSON-object field: "" when there are none."""
    return json.dumps(dict(options), sort_keys=True) if options else ""


@dataclasses.dataclass(frozen=True)
class TrainGoal:
    """What a Train action goal carries (group weights resolved to dataset groups)."""

    dataset_ids: tuple[str, ...]
    steps: int
    seed: int
    policy: str
    group_weights: dict
    frozen_groups: tuple[str, ...]
    hardening_share: float
    hardening_intensity: float
    init_checkpoint_id: str
    run_dir: str
    #: the policy type's options (LoopConfig.policy_options)
    policy_options: dict = dataclasses.field(default_factory=dict)

    @property
    def policy_options_json(self) -> str:
        """The Train action's ``policy_options_json`` (what the trainer reads back with
        :func:`~clawgym_ros.training.registry.policy_options_from_json`)."""
        return options_json(self.policy_options)


@dataclasses.dataclass(frozen=True)
class FinetuneGoal:
    """What a Train action goal with ``finetune: rl`` carries: RL fine-tuning of a checkpoint
    (:func:`clawgym_ros.training.rl.finetune`)."""

    checkpoint_id: str
    task: str
    steps: int
    seed: int
    workers: int
    run_dir: str
    #: FinetuneConfig settings (LoopConfig.rl.options)
    options: dict = dataclasses.field(default_factory=dict)
    #: calibration artifact the envs run at ("" = nominal / the node's own)
    calibration_id: str = ""

    @property
    def options_json(self) -> str:
        """The Train action's ``finetune_options_json``."""
        return options_json(self.options)


@dataclasses.dataclass(frozen=True)
class EvaluateGoal:
    """What an Evaluate action goal carries."""

    checkpoint_id: str
    suite: str
    seed: int
    mode: str
    workers: int
    run_dir: str
    #: calibration artifact the simulator runs at ("" = nominal / the node's own)
    calibration_id: str = ""


@dataclasses.dataclass(frozen=True)
class CalibrateGoal:
    """What a Calibrate action goal carries (online distillation: a new robot log)."""

    bag: str
    params: tuple[str, ...]
    bounds: dict
    seed: int
    starts: int
    run_dir: str

    @property
    def params_text(self) -> str:
        """The Calibrate action's ``params`` (comma-separated)."""
        return ",".join(self.params)

    @property
    def bounds_json(self) -> str:
        """The Calibrate action's ``bounds_json``."""
        return options_json(self.bounds)


class Executor(Protocol):
    """Runs the long steps; each returns the committed artifact id or raises (``finetune``
    only when the config's RL lever is on, ``calibrate`` only with online distillation)."""

    def synthesize(self, goal: SynthesizeGoal, progress: ProgressFn) -> str: ...

    def train(self, goal: TrainGoal, progress: ProgressFn) -> str: ...

    def finetune(self, goal: FinetuneGoal, progress: ProgressFn) -> str: ...

    def evaluate(self, goal: EvaluateGoal, progress: ProgressFn) -> str: ...

    def calibrate(self, goal: CalibrateGoal, progress: ProgressFn) -> str: ...


def resolve_group_weights(patterns: Mapping[str, float], groups: Sequence[str]
                          ) -> dict[str, float]:
    """Expand ``task/template/family`` patterns (``*`` = any) to the datasets' group names.

    A group matched by several patterns takes the largest weight; groups matched by none are
    left out (the trainer weighs them 1.0).
    """
    out: dict[str, float] = {}
    for group in groups:
        for pattern, value in patterns.items():
            if fnmatch.fnmatchcase(group, pattern):
                out[group] = max(out.get(group, value), value)
    return dict(sorted(out.items()))


def read_report(store: ArtifactStore, report_id: str) -> dict[str, Any]:
    """The report.json of a report artifact."""
    art = store.get(report_id, C.KIND_REPORT)
    return json.loads(art.file(C.FILE_REPORT_JSON).read_text())


class LoopRunner:
    """Drives one loop in a run directory.

    Args:
        cfg: the loop config.
        run_dir: the run directory (artifacts/, loop/).
        executor: runs synthesis, training and evaluation.
        on_status: called with (state, message, progress) after each state change and on
            step progress; progress is ``(done, total)`` or None.
    """

    def __init__(self, cfg: LoopConfig, run_dir: str | Path, executor: Executor,
                 on_status: Callable[[LoopState, str, tuple[int, int] | None], None]
                 | None = None):
        self.cfg = cfg
        self.run_dir = Path(run_dir).resolve()
        self.store = ArtifactStore(self.run_dir)
        self.executor = executor
        self.on_status = on_status or (lambda *_: None)
        self.loop_dir = self.run_dir / C.DIR_LOOP
        self.state_path = self.loop_dir / C.FILE_LOOP_STATE
        self.decisions_path = self.loop_dir / C.FILE_DECISIONS

    # --- persistence -------------------------------------------------------------------------
    def config_files(self, portable: bool = True) -> dict[str, bytes]:
        """The config artifact's files: ``loop.json`` and the evaluation suite file.

        A suite given as a file is stored as ``suite/<name>``, and ``loop.json`` names that
        stored copy (``portable``), so the artifact id follows the suite's content, not the
        folder the checkout lives in: the same loop has the same ids in every clone. The
        path the suite was read from stays in the manifest's config. ``portable=False`` gives
        the files of run directories made before 2026-12-07 (the absolute path in
        ``loop.json``), which still resume from the checkout they were made in.
        """
        data = self.cfg.to_dict()
        files = {}
        suite = Path(self.cfg.eval_suite)
        if suite.is_file():
            files[f"suite/{suite.name}"] = suite.read_bytes()
            if portable:
                data["eval_suite"] = f"suite/{suite.name}"
        files[FILE_LOOP_CONFIG] = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
        return files

    def config_artifact(self) -> str:
        """Commit the loop config (and its evaluation suite file) as a config artifact."""
        art = self.store.put_files(C.KIND_CONFIG, self.config_files(), config=self.cfg,
                                   seeds={"loop": self.cfg.seed},
                                   summary={"loop": self.cfg.name, "mode": self.cfg.mode})
        return art.id

    def config_ids(self) -> tuple[str, str]:
        """This config's artifact id, and the id its files had before ``loop.json`` named the
        stored suite (run directories made before 2026-12-07 resume under it)."""
        return tuple(content_id(C.KIND_CONFIG, {rel: hashlib.sha256(data).hexdigest()
                                                for rel, data in files.items()})
                     for files in (self.config_files(), self.config_files(portable=False)))

    def load(self) -> LoopState:
        """The saved state, or a fresh one (with the config committed as an artifact).

        Raises:
            LoopError: the run directory holds a loop with another config.
        """
        if self.cfg.calibration:
            from clawgym_ros.errors import ArtifactError

            try:
                self.store.resolve(self.cfg.calibration, C.KIND_CALIBRATION)
            except ArtifactError as err:
                raise LoopError(f"calibration: {err}; the loop's simulators run at a "
                                f"calibration of its run directory {self.run_dir} (clawgym "
                                "calibrate --out there)") from None
        if self.state_path.is_file():
            state = LoopState.from_dict(json.loads(self.state_path.read_text()))
            ids = self.config_ids()
            if state.config_id not in ids:
                raise LoopError(
                    f"{self.run_dir} holds a loop with another config (config artifact "
                    f"{state.config_id[:12]}, this one {ids[0][:12]}); use another --out "
                    "or the same config, seed and iterations to resume")
            return state
        state = initial_state(self.cfg, self.config_artifact())
        self.save(state, "new loop")
        return state

    def save(self, state: LoopState, message: str) -> None:
        """Rewrite loop/state.json atomically, then report the status."""
        atomic_write_json(self.state_path, state.to_dict())
        self.status(state, message)

    def status(self, state: LoopState, message: str,
               progress: tuple[int, int] | None = None) -> None:
        """Report a status line (the node publishes it and writes loop/status.json)."""
        self.on_status(state, message, progress)

    def record_decision(self, decision: Mapping[str, Any]) -> None:
        """Append a decision unless one for its iteration is already recorded (resume)."""
        if self.decisions_path.is_file():
            for line in self.decisions_path.read_text().splitlines():
                try:
                    if json.loads(line).get("iteration") == decision["iteration"]:
                        return
                except ValueError:
                    continue  # a torn last line from a crash: ignore it
        append_line(self.decisions_path, json.dumps(decision, sort_keys=True))

    # --- the loop ----------------------------------------------------------------------------
    def run(self) -> LoopState:
        """Run (or resume) the loop to its end; returns the final state."""
        state = self.load()
        while not state.done:
            state = self.step(state)
        return state

    def step(self, state: LoopState) -> LoopState:
        """Do the next unfinished step and persist the state."""
        cur = state.current
        if cur is None:
            return self._plan(state)
        plan = cur["plan"]
        if not cur.get("dataset_id"):
            return self._synthesize(state, cur, plan)
        if plan.get("recovery_episodes") and not cur.get("recovery_dataset_id"):
            return self._synthesize_recovery(state, cur, plan)
        if not cur.get("checkpoint_id"):
            return self._train(state, cur, plan)
        if plan.get("rl_episodes") and not cur.get("rl_checkpoint_id"):
            return self._finetune(state, cur, plan)
        return self._evaluate(state, cur, plan)

    def _replace_current(self, state: LoopState, **changes: Any) -> tuple[dict, ...]:
        cur = dict(state.iterations[-1])
        cur.update(changes)
        return (*state.iterations[:-1], cur)

    def _plan(self, state: LoopState) -> LoopState:
        report = read_report(self.store, state.history[-1]["report_id"]) if state.history \
            else None
        judged = None
        if report is not None:   # human judgments that arrived up to now count (delay window)
            from clawgym_ros.evaluation.preference import at_decision

            report, judged = at_decision(self.run_dir, report)
        plan = next_plan(state, report, self.cfg)
        if judged is not None:
            plan = dataclasses.replace(plan, decision={**plan.decision, "judgments": judged})
        distilled = None
        if not plan.stop and self.cfg.distill.enabled:
            distilled, decision = self._distill(state, plan.iteration)
            plan = dataclasses.replace(plan, decision={**plan.decision,
                                                       "calibration": decision})
        self.record_decision(plan.decision)
        if plan.stop:
            return self._finish(state, plan)
        record = {"iteration": plan.iteration, "plan": plan.to_dict(), "dataset_id": "",
                  "checkpoint_id": "", "report_id": "", "goals": {}}
        if distilled is not None:
            record["calibration"] = distilled
        state = dataclasses.replace(
            state, phase=PHASE_SYNTHESIZE, weights=plan.weights, ranges=plan.ranges,
            group_weights=plan.group_weights, frozen_groups=plan.frozen_groups,
            iterations=(*state.iterations, record))
        self.save(state, f"iteration {plan.iteration}: planned "
                  f"({len(plan.mixture)} mixture entries)")
        return state

    def calibration_of(self, iteration: Mapping[str, Any] | None) -> str:
        """The calibration an iteration's simulators run at: the one online distillation
        chose for it, else the config's ("" = nominal)."""
        record = (iteration or {}).get("calibration") or {}
        return record.get("id") or self.cfg.calibration

    def _distill(self, state: LoopState, iteration: int) -> tuple[dict, dict]:
        """Online distillation before iteration ``iteration``: fit the newest robot log of the
        watched folder that no earlier iteration saw (see :class:`DistillConfig`).

        Returns:
            (the iteration's calibration record ``{id, logs}``: the calibration and every log
            seen so far, the decision's ``calibration`` entry).
        """
        from clawgym_ros.calibration.apply import load_calibration
        from clawgym_ros.calibration.artifact import log_digest
        from clawgym_ros.calibration.job import find_calibration, list_logs
        from clawgym_ros.calibration.log import read_log
        from clawgym_ros.sim.calibration_params import PARAMS

        d = self.cfg.distill
        last = state.iterations[-1] if state.iterations else None
        previous = self.calibration_of(last)
        seen = list(((last or {}).get("calibration") or {}).get("logs", []))
        known = {entry["sha256"] for entry in seen}
        new = [(path, digest) for path in list_logs(d.logs)
               if (digest := log_digest(path)) not in known]
        if not new:
            return ({"id": previous, "logs": seen},
                    {"calibration": previous, "changed": False,
                     "reason": f"no new robot log in {d.logs}"})
        seen += [{"name": path.name, "sha256": digest} for path, digest in new]
        path, digest = new[-1]
        entry = {"log": {"name": path.name, "sha256": digest}, "previous": previous,
                 "superseded": [p.name for p, _ in new[:-1]]}
        found = find_calibration(self.store, d.request(str(path), seed=self.cfg.seed), digest)
        if found is not None:          # fitted before (a resumed iteration): read already
            cal_id = found.id
        else:
            try:
                read_log(path)         # a log that cannot be read is refused, not retried
            except ClawgymError as err:
                return ({"id": previous, "logs": seen},
                        {**entry, "calibration": previous, "changed": False,
                         "reason": f"robot log {path.name} refused: {err}"})
            goal = CalibrateGoal(bag=str(path), params=tuple(d.params), bounds=dict(d.bounds),
                                 seed=self.cfg.seed, starts=d.starts,
                                 run_dir=str(self.run_dir))
            self.status(state, f"iteration {iteration}: calibrating from robot log {path.name}")
            cal_id = self.executor.calibrate(goal, self._progress(state, "calibrate"))
        new_cal = load_calibration(self.store, cal_id)
        old = load_calibration(self.store, previous).values if previous else {}
        shift = {name: {"before": float(old.get(name, PARAMS[name].nominal)),
                        "after": float(value),
                        "interval": list(new_cal.intervals.get(name, (value, value)))}
                 for name, value in sorted(new_cal.values.items())}
        return ({"id": new_cal.id, "logs": seen},
                {**entry, "calibration": new_cal.id, "changed": new_cal.id != previous,
                 "reason": f"new robot log {path.name}: the simulator now runs at calibration "
                           f"{new_cal.id[:12]}", "shift": shift})

    def _progress(self, state: LoopState, phase: str) -> ProgressFn:
        def report(done: int, total: int, text: str) -> None:
            self.status(state, f"iteration {state.iteration} {phase}: {text}", (done, total))
        return report

    def _synthesize(self, state: LoopState, cur: dict, plan: dict) -> LoopState:
        goal = SynthesizeGoal(mixture=tuple(plan["mixture"]), episodes=plan["episodes"],
                              seed=plan["seeds"]["synthesize"], workers=self.cfg.workers,
                              record_images=self.cfg.record_images, run_dir=str(self.run_dir),
                              calibration_id=self.calibration_of(cur),
                              options=dict(self.cfg.synthesis_options))
        state = self._start(state, PHASE_SYNTHESIZE, goal)
        dataset_id = find_dataset(self.store, goal) or \
            self.executor.synthesize(goal, self._progress(state, PHASE_SYNTHESIZE))
        state = dataclasses.replace(
            state, phase=PHASE_TRAIN, episodes_used=state.episodes_used + goal.episodes,
            iterations=self._replace_current(state, dataset_id=dataset_id))
        self.save(state, f"iteration {state.iteration}: dataset {dataset_id[:12]}")
        return state

    def _synthesize_recovery(self, state: LoopState, cur: dict, plan: dict) -> LoopState:
        """Recovery demonstrations from the last report's failure states; they count in the
        iteration's episode budget like ordinary ones and come from the same expert (the
        loop's ``synthesis_options``): a policy should not learn one speed profile from its
        nominal demonstrations and another from its recoveries."""
        goal = SynthesizeGoal(mixture=(), episodes=plan["recovery_episodes"],
                              seed=plan["seeds"]["recover"], workers=self.cfg.workers,
                              record_images=False, run_dir=str(self.run_dir),
                              from_report=plan["recovery_report"],
                              calibration_id=self.calibration_of(cur),
                              options=dict(self.cfg.synthesis_options))
        state = self._start(state, PHASE_SYNTHESIZE, goal)
        dataset_id = find_recovery_dataset(self.store, goal) or \
            self.executor.synthesize(goal, self._progress(state, PHASE_SYNTHESIZE))
        state = dataclasses.replace(
            state, episodes_used=state.episodes_used + goal.episodes,
            iterations=self._replace_current(state, recovery_dataset_id=dataset_id))
        self.save(state, f"iteration {state.iteration}: recovery dataset {dataset_id[:12]}")
        return state

    def _train(self, state: LoopState, cur: dict, plan: dict) -> LoopState:
        datasets = [d for it in state.iterations
                    for d in (it["dataset_id"], it.get("recovery_dataset_id")) if d] \
            if self.cfg.accumulate else \
            [d for d in (cur["dataset_id"], cur.get("recovery_dataset_id")) if d]
        previous = state.iterations[-2]["checkpoint_id"] if len(state.iterations) > 1 else ""
        from clawgym_ros.dataset.reader import dataset_group_names

        groups = dataset_group_names(self.store, datasets)
        goal = TrainGoal(
            dataset_ids=tuple(datasets), steps=plan["train_steps"], seed=plan["seeds"]["train"],
            policy=self.cfg.policy, policy_options=dict(self.cfg.policy_options),
            group_weights=resolve_group_weights(plan["group_weights"], groups),
            frozen_groups=tuple(plan["frozen_groups"]),
            # Plans recorded before the hardening lever existed carry no share.
            hardening_share=plan.get("hardening_share", self.cfg.hardening_share),
            hardening_intensity=plan.get("hardening_intensity", C.DEFAULT_HARDENING_INTENSITY),
            init_checkpoint_id=previous if self.cfg.warm_start else "",
            run_dir=str(self.run_dir))
        state = self._start(state, PHASE_TRAIN, goal)
        checkpoint_id = find_checkpoint(self.store, goal) or \
            self.executor.train(goal, self._progress(state, PHASE_TRAIN))
        state = dataclasses.replace(
            state, phase=PHASE_EVALUATE, steps_used=state.steps_used + goal.steps,
            iterations=self._replace_current(state, checkpoint_id=checkpoint_id))
        self.save(state, f"iteration {state.iteration}: checkpoint {checkpoint_id[:12]}")
        return state

    def _finetune(self, state: LoopState, cur: dict, plan: dict) -> LoopState:
        """RL fine-tuning of the iteration's checkpoint for the simulated steps of the
        episodes the plan did not synthesize: ``rl_episodes`` x the mean length (control
        steps) of the iteration's demonstrations. The next iteration warm-starts behaviour
        cloning from the iteration's own (BC) checkpoint; the fine-tuned one is evaluated."""
        from clawgym_ros.dataset.reader import mean_episode_steps

        length = mean_episode_steps(self.store, cur["dataset_id"])
        goal = FinetuneGoal(checkpoint_id=cur["checkpoint_id"], task=plan["rl_task"],
                            steps=max(1, int(round(plan["rl_episodes"] * length))),
                            seed=plan["seeds"][PHASE_FINETUNE], workers=self.cfg.rl.workers,
                            options=dict(self.cfg.rl.options), run_dir=str(self.run_dir),
                            calibration_id=self.calibration_of(cur))
        state = self._start(state, PHASE_FINETUNE, goal)
        checkpoint_id = find_finetuned(self.store, goal) or \
            self.executor.finetune(goal, self._progress(state, PHASE_FINETUNE))
        state = dataclasses.replace(
            state, phase=PHASE_EVALUATE, episodes_used=state.episodes_used + plan["rl_episodes"],
            iterations=self._replace_current(state, rl_checkpoint_id=checkpoint_id,
                                             rl_steps=goal.steps))
        self.save(state, f"iteration {state.iteration}: RL fine-tuned {checkpoint_id[:12]} "
                  f"({goal.steps} steps on {goal.task})")
        return state

    def _evaluate(self, state: LoopState, cur: dict, plan: dict) -> LoopState:
        goal = EvaluateGoal(checkpoint_id=evaluated_checkpoint(cur), suite=self.cfg.eval_suite,
                            seed=plan["seeds"]["evaluate"], mode=self.cfg.eval_mode,
                            workers=self.cfg.workers, run_dir=str(self.run_dir),
                            calibration_id=self.calibration_of(cur))
        state = self._start(state, PHASE_EVALUATE, goal)
        report_id = find_report(self.store, goal) or \
            self.executor.evaluate(goal, self._progress(state, PHASE_EVALUATE))
        scores = read_report(self.store, report_id)["scores"]
        entry = {"iteration": state.iteration, "scores": scores, "report_id": report_id}
        state = dataclasses.replace(
            state, phase=PHASE_IDLE, iteration=state.iteration + 1,
            history=(*state.history, entry),
            iterations=self._replace_current(state, report_id=report_id))
        summary = ", ".join(f"{d} {s['value']:.2f}" for d, s in scores.items()
                            if s.get("value") is not None)
        self.save(state, f"iteration {state.iteration - 1}: report {report_id[:12]} ({summary})")
        return state

    def _start(self, state: LoopState, phase: str, goal: Any) -> LoopState:
        """Record the goal of the step about to run (what a resume will send again)."""
        cur = state.iterations[-1]
        goals = dict(cur.get("goals", {}))
        goals[phase] = dataclasses.asdict(goal)
        state = dataclasses.replace(state, phase=phase,
                                    iterations=self._replace_current(state, goals=goals))
        self.save(state, f"iteration {state.iteration}: {phase}")
        return state

    def _finish(self, state: LoopState, plan: Plan) -> LoopState:
        final_id = ""
        if state.history:
            final_id = write_loop_report(self.store, state, self.cfg)
            art = self.store.get(final_id, C.KIND_REPORT)
            for name in (C.FILE_REPORT_JSON, C.FILE_REPORT_HTML):
                tmp = self.run_dir / f".{name}.copy"
                shutil.copyfile(art.file(name), tmp)
                tmp.replace(self.run_dir / name)
        state = dataclasses.replace(state, phase=PHASE_DONE, done=True,
                                    stop_reason=plan.stop_reason, final_report_id=final_id)
        self.save(state, f"done: {plan.stop_reason}"
                  + (f"; final report {final_id[:12]}" if final_id else ""))
        return state

    def final_report_path(self, state: LoopState) -> Path | None:
        """report.html of the final report artifact (None if the loop stopped before any)."""
        if not state.final_report_id:
            return None
        return self.store.get(state.final_report_id, C.KIND_REPORT).file(C.FILE_REPORT_HTML)


def write_loop_report(store: ArtifactStore, state: LoopState, cfg: LoopConfig) -> str:
    """The loop's final report: the last evaluation report with the iteration history.

    Parents: the loop config, then every report, checkpoint and dataset of the loop, so that
    ``clawgym lineage`` reaches every artifact, config and seed.

    Returns:
        The report artifact id.
    """
    from clawgym_ros.report.build import read_report_files, write_report_files
    from clawgym_ros.report.schema import validate_report

    last = state.history[-1]["report_id"]
    report = read_report(store, last)
    report["history"] = [{"iteration": h["iteration"], "scores": h["scores"],
                          "report_id": h["report_id"]} for h in state.history]
    validate_report(report)
    # The last report's failure states and frames travel with it.
    blob, frames = read_report_files(store.get(last, C.KIND_REPORT), report)
    parents = [state.config_id]
    for it in state.iterations:
        parents += [it[k] for k in ("report_id", "rl_checkpoint_id", "checkpoint_id",
                                    "dataset_id") if it.get(k)]
        calibration = (it.get("calibration") or {}).get("id")
        if calibration and calibration not in parents:
            parents.append(calibration)
    summary = {"loop": cfg.name, "mode": cfg.mode, "iterations": len(state.history),
               "final_of": last,
               **{d: report["scores"][d]["value"] for d in C.DIMENSIONS}}
    with store.stage(C.KIND_REPORT) as staging:
        write_report_files(staging.path, report, blob, frames)
        art = staging.commit(config={"loop": cfg.to_dict(), "final_of": last},
                             seeds={"loop": cfg.seed}, parents=parents, summary=summary)
    return art.id


def evaluated_checkpoint(iteration: Mapping[str, Any]) -> str:
    """The checkpoint an iteration evaluates: the RL fine-tuned one when the iteration has one,
    else the one training made."""
    return iteration.get("rl_checkpoint_id") or iteration["checkpoint_id"]


# --- reuse of artifacts made by an identical goal (idempotent steps) ------------------------
def _manifest_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def find_dataset(store: ArtifactStore, goal: SynthesizeGoal) -> str | None:
    """A dataset whose recorded generation (mixture, episodes, seed) equals the goal's."""
    from clawgym_ros.synthesis.mixture import MixtureSpec

    want = {"seed": goal.seed, "episodes": goal.episodes,
            "mixture": MixtureSpec.from_entries(goal.mixture).to_dict()}
    options: dict[str, Any] = dict(goal.options)
    if goal.record_images:
        options["images"] = True
    if goal.calibration_id:
        from clawgym_ros.calibration.apply import load_calibration
        from clawgym_ros.sim.active_calibration import OPTION_KEY

        options[OPTION_KEY] = load_calibration(store, goal.calibration_id).to_dict()
    folder = store.root / C.KIND_DATASET
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not (path / C.FILE_MANIFEST).is_file():
            continue
        info = _manifest_json(path / C.FILE_DATASET_INFO) or {}
        gen = info.get("generation") or {}
        if all(gen.get(k) == v for k, v in want.items()) and gen.get("options",
                                                                       options) == options:
            return path.name
    return None


def find_recovery_dataset(store: ArtifactStore, goal: SynthesizeGoal) -> str | None:
    """A recovery dataset made from the same report with the same seed and episodes."""
    report = store.resolve(goal.from_report, C.KIND_REPORT).id
    calibration = _full_id(store, goal.calibration_id)
    folder = store.root / C.KIND_DATASET
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not (path / C.FILE_MANIFEST).is_file():
            continue
        gen = (_manifest_json(path / C.FILE_DATASET_INFO) or {}).get("generation") or {}
        if (gen.get("from_report") == report and gen.get("seed") == goal.seed
                and gen.get("episodes") == goal.episodes
                and gen.get("calibration", "") == calibration
                and gen.get("options", {}) == dict(goal.options)):
            return path.name
    return None


def find_checkpoint(store: ArtifactStore, goal: TrainGoal) -> str | None:
    """A checkpoint trained from the same datasets (+ init), seed, steps, loss weights, frozen
    groups, policy and its options and hardening (share, and intensity when the share is not
    0) as the goal."""
    parents = [store.resolve(d).id for d in goal.dataset_ids]
    if goal.init_checkpoint_id:
        parents.append(store.resolve(goal.init_checkpoint_id).id)
    folder = store.root / C.KIND_CHECKPOINT
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        man = _manifest_json(path / C.FILE_MANIFEST)
        if not man or sorted(man.get("parents", [])) != sorted(parents):
            continue
        config = man.get("config") or {}
        train = config.get("train", config)
        if (man.get("seeds", {}).get("train") == goal.seed and train.get("steps") == goal.steps
                and dict(train.get("group_weights") or {}) == dict(goal.group_weights)
                and list(train.get("frozen_groups") or []) == list(goal.frozen_groups)
                and train.get("policy", C.POLICY_MLP) == goal.policy
                and dict(train.get("policy_options") or {}) == dict(goal.policy_options)
                and float(train.get("hardening_share", 0.0)) == float(goal.hardening_share)
                and (not goal.hardening_share or float(train.get(
                    "hardening_intensity", C.DEFAULT_HARDENING_INTENSITY))
                     == float(goal.hardening_intensity))):
            return path.name
    return None


def find_finetuned(store: ArtifactStore, goal: FinetuneGoal) -> str | None:
    """A checkpoint RL fine-tuned from the same checkpoint on the same task with the same
    steps, seed, workers and settings as the goal."""
    from clawgym_ros.training.rl import FinetuneConfig

    base = store.resolve(goal.checkpoint_id).id
    calibration: dict[str, Any] = {}
    if goal.calibration_id:
        from clawgym_ros.calibration.apply import load_calibration

        calibration = {"calibration": load_calibration(store, goal.calibration_id).to_dict()}
    want = FinetuneConfig(base_checkpoint=base, steps=goal.steps, seed=goal.seed,
                          task=goal.task, workers=goal.workers, **goal.options,
                          **calibration).to_json()
    folder = store.root / C.KIND_CHECKPOINT
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        man = _manifest_json(path / C.FILE_MANIFEST)
        if not man or man.get("parents") != [base]:
            continue
        config = dict(man.get("config") or {})
        if config.pop("finetune", None) == "rl" and config == want:
            return path.name
    return None


def find_report(store: ArtifactStore, goal: EvaluateGoal) -> str | None:
    """A report of the same checkpoint, suite, seed and calibration as the goal (not a loop
    report). The suite matches by its file name (``suite_ref``: the checkout may have moved
    since) and by the content of the goal's suite as it reads now (the file may have been
    rewritten since)."""
    from clawgym_ros.evaluation.suites import load_suite, suite_ref

    calibration = _full_id(store, goal.calibration_id)
    # as report.json holds it (lists, not tuples)
    suite_info = dict(json.loads(json.dumps(load_suite(goal.suite).to_dict())), seed=None)
    folder = store.root / C.KIND_REPORT
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        man = _manifest_json(path / C.FILE_MANIFEST)
        if not man or "final_of" in (man.get("summary") or {}):
            continue
        config = man.get("config") or {}
        if (config.get("checkpoint_id") == goal.checkpoint_id
                and suite_ref(config.get("suite") or "") == suite_ref(goal.suite)
                and man.get("seeds", {}).get("suite") == goal.seed
                and (config.get("calibration") or "") == calibration
                and dict(read_report(store, path.name)["suite"], seed=None) == suite_info):
            return path.name
    return None


def _full_id(store: ArtifactStore, ref: str) -> str:
    """The full id of artifact ``ref`` ("" for "")."""
    return store.resolve(ref).id if ref else ""
