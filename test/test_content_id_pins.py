"""Content ids of small synthesis and evaluation runs, pinned (issue 27).

The scripted experts, synthesis, replay and the evaluator drive the task envs through their
Dict interface (``control_mode="dict"``), constructed directly or with ``gym.make``. Changing
what ``gym.make(ID)`` returns by default (a flat Box action for RL libraries) must leave
these runs bit for bit the same: one episode per task and a 24-episode in-process
evaluation, ~8 s on 2 cores. A pin that changes means the datasets or reports of every
earlier run are no longer reproduced: fix the cause, do not update the pin.
"""

from __future__ import annotations

import pytest

import clawgym_ros.sim  # noqa: F401  (registers the envs)
from clawgym_ros import constants as C
from clawgym_ros.cli import main as cli_main
from clawgym_ros.tasks.synth import SynthRequest, synthesize

#: task -> dataset id of ``synthesize(episodes=1, seed=5, workers=1)``
DATASET_IDS = {
    C.TASK_PICK_PLACE: "4968a6be43e421e133b6b83836506220304d180ee4044dde731c0446ed3afe6b",
    C.TASK_PEG_INSERT: "2d38d24cee7233b13527a9a21708aa4ee27f3597712871a8ebfb9a42c585c826",
    C.TASK_PILL_HANDOVER: "71a9f62a8434c2b72e11ea1c74a49ade4dedf835e586b66f14c5b781cfbe3754",
    C.TASK_GPS_NAV: "5d1e26d80884041aaeb2a23a32362513487eea72355ccd892cc5c6ba533c0ca7",
}
#: report id of the smoke suite, scripted pick_place policy, seed 3, 60 steps, in-process
REPORT_ID = "8957ddbc17763007e2f39e363015d8aa03c6fbd81c35065686ad25929594216f"


@pytest.mark.parametrize("task", sorted(DATASET_IDS))
def test_synthesis_dataset_id_is_pinned(task, tmp_path):
    artifact, summary = synthesize(SynthRequest(out=str(tmp_path), episodes=1, seed=5,
                                                task=task, workers=1))
    assert summary.accepted == 1
    assert artifact.id == DATASET_IDS[task]


def test_in_process_evaluation_report_id_is_pinned(tmp_path, capsys):
    assert cli_main(["eval", "--policy", "scripted:pick_place:grasp_height=0.015",
                     "--suite", "smoke", "--seed", "3", "--out", str(tmp_path),
                     "--workers", "1", "--max-steps", "60"]) == 0
    assert capsys.readouterr().out.split()[0] == REPORT_ID
