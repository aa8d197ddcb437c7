"""The small Policy protocol the evaluator consumes (training implements it).

Observations and actions are dicts keyed by the names in :mod:`clawgym_ros.constants`
(``OBS_*``, ``ACT_*``) holding numpy arrays, exactly as the Gymnasium envs produce and accept.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

Observation = dict[str, Any]
Action = dict[str, np.ndarray]


@runtime_checkable
class Policy(Protocol):
    """Anything with ``reset()`` and ``act(obs) -> action`` can be evaluated."""

    def reset(self) -> None:
        """Called at the start of every episode (clears action chunks, filters, ...)."""

    def act(self, obs: Observation) -> Action:
        """Return the next action for ``obs``."""
