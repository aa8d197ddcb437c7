"""Colour: the objects and the fixed scene (table, bins) in other colours than the ones the
demonstrations show (another batch of parts, a repainted fixture, another tablecloth),
producing :class:`~clawgym_ros.sim.backend.ColourSettings` once per episode.

Model (``s`` = episode intensity; parameters at intensity 1): every free object's colour is
blended from its default toward a uniformly random colour with weight ``object_mix * s * m``,
every fixed shape's with ``static_mix * s * m``, each with its own colour and magnitude
``m ~ U(0.5, 1)``. Colours are drawn for :data:`SLOTS` objects and fixed shapes whatever the
scene holds (the i-th draw is the i-th object's), so an episode's colours depend on its seed
only. Only images change: a state expert's demonstrations under it are the nominal ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clawgym_ros import constants as C
from clawgym_ros.config import check_range
from clawgym_ros.perturbations.base import Perturbation, PerturbationConfig, _help
from clawgym_ros.sim.backend import ColourSettings

#: Colours drawn per episode for objects and for fixed shapes (more than any scene holds).
SLOTS = 16


@dataclasses.dataclass(frozen=True)
class ColourConfig(PerturbationConfig):
    """Colour blend weights at intensity 1."""

    family: str = dataclasses.field(
        default=C.FAMILY_COLOUR, metadata=_help("colour, or 'none' to disable"))
    object_mix: float = dataclasses.field(
        default=1.0, metadata=_help("largest blend of an object toward its new colour, [0, 1]"))
    static_mix: float = dataclasses.field(
        default=0.5, metadata=_help("largest blend of a fixed shape (table, bins), [0, 1]"))

    FAMILY = C.FAMILY_COLOUR

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("object_mix", self.object_mix, 0.0, 1.0)
        check_range("static_mix", self.static_mix, 0.0, 1.0)


class Colour(Perturbation):
    """Per-episode object and scene colours; see the module docstring for the model."""

    config_cls = ColourConfig

    def _restore(self) -> None:
        self._settings = ColourSettings()

    def _sample_episode(self, rng: np.random.Generator) -> None:
        c, s = self.config, self.intensity

        def blends(mix: float) -> tuple[tuple[float, float, float, float], ...]:
            rgb = rng.uniform(0.0, 1.0, (SLOTS, 3))
            weight = mix * s * rng.uniform(0.5, 1.0, SLOTS)
            return tuple((*map(float, rgb[i]), float(weight[i])) for i in range(SLOTS))

        self._settings = ColourSettings(objects=blends(c.object_mix),
                                        statics=blends(c.static_mix))

    def settings(self) -> ColourSettings:
        """The episode's colours (no change when disabled)."""
        return self._settings

    def _parameters(self) -> dict[str, float]:
        objects, statics = self._settings.objects, self._settings.statics
        out = {"object_mix": float(objects[0][3]) if objects else 0.0,
               "static_mix": float(statics[0][3]) if statics else 0.0}
        if objects:
            out.update({f"object_{a}": float(v) for a, v in zip("rgb", objects[0][:3],
                                                                strict=True)})
        return out
