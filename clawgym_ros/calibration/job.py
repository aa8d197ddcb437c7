"""One calibration job: a robot log in, a committed ``calibration`` artifact out.

What ``clawgym calibrate --bag``, the ``calibrate`` action of ``calibration_node`` and the
loop's online distillation run (one function, so all three make the same artifact from the same
log, parameters, bounds and seed):

* :class:`CalibrateRequest` - the job, checked before anything is read or written (parameter
  names, bounds containing the nominal values, seed, starts, scene);
* :func:`run_calibration` - read the log, fit, commit; returns the artifact and the summary the
  CLI prints and the action returns;
* :func:`find_calibration` - an artifact of the store made by the same request from a log with
  the same content (the fit is skipped: a job redone after a crash, a log already seen);
* :func:`list_logs` - the robot logs of a folder (``.mcap`` files and rosbag2 folders), in name
  order, for the loop's watched folder.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, json_object
from clawgym_ros.errors import ConfigError

#: scenes with an arm (what the calibration models)
ARM_SCENES = (C.SCENE_TABLETOP,)
DEFAULT_STARTS = 3
MAX_STARTS = 20


@dataclasses.dataclass(frozen=True)
class CalibrateRequest:
    """A calibration job (``clawgym calibrate --bag``, a Calibrate goal, a loop's new log).

    Attributes:
        bag: an ``.mcap`` file or a rosbag2 folder.
        params: parameter names to fit (``encoder_bias`` = the seven joints); empty = defaults.
        bounds: ``{name: [low, high]}`` replacing default bounds (each containing the nominal).
        seed: seed of the extra optimizer starts.
        starts: optimizer starts, [1, 20].
        scene: the scene the robot is modelled in.
        source: where ``bounds`` came from (named in errors).
    """

    bag: str
    params: tuple[str, ...] = ()
    bounds: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    starts: int = DEFAULT_STARTS
    scene: str = C.SCENE_TABLETOP
    source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.bag, str) or not self.bag:
            raise ConfigError("bag", self.bag, "an .mcap file or a rosbag2 folder")
        check_int("seed", self.seed, 0, 2**32 - 1)
        check_int("starts", self.starts, 1, MAX_STARTS)
        check_choice("scene", self.scene, ARM_SCENES)
        if not isinstance(self.bounds, Mapping):
            raise ConfigError("bounds", self.bounds, "a mapping name: [low, high]", self.source)

    def fit_config(self):
        """The :class:`~clawgym_ros.calibration.fit.FitConfig` (names and bounds checked).

        Raises:
            ConfigError: an unknown parameter name, or bounds that are malformed, for a
                parameter not fitted, or exclude the nominal value.
        """
        from clawgym_ros.calibration.fit import FitConfig
        from clawgym_ros.sim import calibration_params as P

        names = P.expand_names(self.params or P.DEFAULT_PARAMS)
        bounds = P.resolve_bounds(names, self.bounds, self.source)
        return FitConfig(params=names, bounds=bounds, seed=self.seed, starts=self.starts,
                         scene=self.scene)


def request_from_fields(bag: str, params: str = "", bounds_json: str = "", seed: int = 0,
                        starts: int = 0, scene: str = "") -> CalibrateRequest:
    """A request from text fields (a Calibrate goal): params comma-separated, bounds as a JSON
    object, 0 / "" = defaults.

    Raises:
        ConfigError: a malformed field (named).
    """
    bounds = json_object(bounds_json, "bounds_json")
    names = tuple(p for p in (s.strip() for s in params.split(",")) if p) if params else ()
    return CalibrateRequest(bag=bag, params=names, bounds=bounds, seed=int(seed),
                            starts=int(starts) or DEFAULT_STARTS,
                            scene=scene or C.SCENE_TABLETOP, source="bounds_json")


def summary(result: Any, artifact: Any) -> dict[str, Any]:
    """What the CLI prints and the action returns: values, intervals, parameters the log does
    not pin down, position RMSE before / after, warnings, wall time, the HTML page."""
    from clawgym_ros.calibration.artifact import FILE_HTML

    return {"values": {p.name: p.value for p in result.params},
            "intervals": {p.name: [p.ci_low, p.ci_high] for p in result.params},
            "not_identifiable": [p.name for p in result.params if not p.identifiable],
            "position_rmse_before": result.summary_rmse("before"),
            "position_rmse_after": result.summary_rmse("after"),
            "warnings": result.warnings, "wall_s": round(result.wall_s, 2),
            "html": str(artifact.file(FILE_HTML))}


def stored_summary(artifact: Any) -> dict[str, Any]:
    """:func:`summary` of an artifact already in the store (from its calibration.json)."""
    from clawgym_ros.calibration.artifact import FILE_HTML, FILE_JSON

    data = json.loads(artifact.file(FILE_JSON).read_text())
    params = data.get("params", [])
    return {"values": dict(data.get("values", {})),
            "intervals": {p["name"]: [p["ci_low"], p["ci_high"]] for p in params},
            "not_identifiable": [p["name"] for p in params if not p.get("identifiable", True)],
            "position_rmse_before": data.get("position_rmse_before"),
            "position_rmse_after": data.get("position_rmse_after"),
            "warnings": list(data.get("warnings", [])),
            "wall_s": (artifact.manifest.summary or {}).get("wall_s"),
            "html": str(artifact.file(FILE_HTML)), "reused": True}


def find_calibration(store: Any, request: CalibrateRequest, digest: str | None = None
                     ) -> Any | None:
    """A calibration artifact of ``store`` fitted by the same request (parameters, bounds,
    seed, starts, scene) to a log with the same content as ``request.bag`` (None if none).

    Args:
        digest: the log's sha256 (:func:`~clawgym_ros.calibration.artifact.log_digest`) when
            the caller has it.
    """
    from clawgym_ros.calibration.artifact import log_digest, round_floats

    cfg = request.fit_config()
    digest = digest or log_digest(request.bag)
    want = round_floats({"params": list(cfg.params), "bounds": {k: list(v) for k, v in
                                                          cfg.bounds.items()},
                   "seed": cfg.seed, "starts": cfg.starts})
    folder = store.root / C.KIND_CALIBRATION
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        try:
            config = json.loads((path / C.FILE_MANIFEST).read_text()).get("config") or {}
        except (OSError, ValueError):
            continue
        fit = config.get("fit") or {}
        if ((config.get("log") or {}).get("sha256") == digest
                and config.get("scene") == cfg.scene
                and all(fit.get(k) == v for k, v in want.items())):
            return store.get(path.name, C.KIND_CALIBRATION)
    return None


def run_calibration(run_dir: str | Path, request: CalibrateRequest,
                    progress: Callable[[str], None] | None = None,
                    reuse: bool = False) -> tuple[Any, dict[str, Any]]:
    """Fit ``request`` and commit the artifact in ``run_dir``'s store.

    Everything is checked (names, bounds, the log's topics, stamps and joint names) before the
    fit; nothing is written unless the fit completes. ``progress(text)`` is called after each
    optimizer start and refinement; an exception it raises (a cancel) ends the job, nothing
    committed.

    Args:
        reuse: return an artifact fitted by the same request to the same log content instead
            of fitting again (its summary says ``reused``).

    Returns:
        (the calibration artifact, :func:`summary`).

    Raises:
        ConfigError, LogError: bad request or log (one line naming it).
    """
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.calibration.artifact import commit_calibration, log_digest
    from clawgym_ros.calibration.fit import calibrate
    from clawgym_ros.calibration.log import read_log

    config = request.fit_config()
    store = ArtifactStore(run_dir)
    if reuse:       # a log with the same content was read and fitted already: no re-read
        found = find_calibration(store, request, log_digest(request.bag))
        if found is not None:
            return found, stored_summary(found)
    result = calibrate(read_log(request.bag), config, progress)
    artifact = commit_calibration(store, result, config, request.bag)
    return artifact, summary(result, artifact)


def list_logs(folder: str | Path) -> list[Path]:
    """The robot logs directly in ``folder``: ``*.mcap`` files and rosbag2 folders (a
    ``metadata.yaml`` inside), sorted by name; hidden entries (a writer's temporary files)
    are skipped.

    Raises:
        ConfigError: ``folder`` is not a directory.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError("logs", str(folder), "a directory of robot logs (.mcap files or "
                          "rosbag2 folders)")
    out = []
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        if (path.is_file() and path.suffix == ".mcap") or (
                path.is_dir() and (path / "metadata.yaml").is_file()):
            out.append(path)
    return out
