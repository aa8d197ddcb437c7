"""The ``--calibration ID`` option of the commands that simulate (synth, eval).

Kept apart from :mod:`clawgym_ros.calibration.apply` (which loads and activates an artifact
and imports the simulator) so that building the CLI's parser imports neither MuJoCo nor the
fit: ``clawgym --help`` and a refused option stay fast.
"""

from __future__ import annotations

from typing import Any


def add_calibration_argument(parser: Any) -> None:
    """``--calibration ID`` of the commands that simulate (synth, eval)."""
    parser.add_argument("--calibration", metavar="ID", default="",
                        help="run the simulator at this calibration artifact's fitted values "
                             "(in --out's store; clawgym calibrate); its id joins the ids of "
                             "what the run makes")
