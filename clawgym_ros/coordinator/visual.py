"""The visual lever: which perturbation gaps may steer synthesis, given what the policy sees.

A visual perturbation (lighting: level, direction, sudden changes; camera pose: the camera's
mount offset; colour: the objects' and the scene's colours) alters only the camera images.
A policy that reads images (``uses_image``: ``cnn``, or a registered type that declares it)
feels it, so a visual gap in its report steers synthesis exactly like a sensor-noise gap does:
:func:`~clawgym_ros.coordinator.plan.cell_deviation` counts the gap for the cells of its
family, and the plan raises their share by ``1 + mixture_gain * deviation`` (more visually
perturbed demonstrations, recorded with the images the policy trains on). A state policy
cannot feel them: such a gap in its report is sampling noise (two success rates of a few
dozen episodes each), and steering by it would spend synthesis on demonstrations whose only
difference is something the policy never reads. Such gaps are left out of its steering.
A combined gap (lighting + sensor noise) steers every policy: one of its families acts on
what a state policy observes.

Pure: no torch unless the policy type is a plugin (its class says whether it reads images).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clawgym_ros import constants as C
from clawgym_ros.errors import ConfigError

#: Families that change only what a camera sees.
VISUAL_FAMILIES: tuple[str, ...] = (C.FAMILY_LIGHTING, C.FAMILY_CAMERA_POSE, C.FAMILY_COLOUR)


def policy_sees(policy: str) -> bool:
    """Whether the policy type ``policy`` reads camera images (built-in types answered
    without importing torch; a plugin type is loaded and asked).

    Raises:
        ConfigError: an unknown policy type.
    """
    if policy == C.POLICY_MLP:
        return False
    if policy == C.POLICY_CNN:
        return True
    from clawgym_ros.training.registry import policy_class

    return bool(policy_class(policy).uses_image)


def is_visual(gap: Mapping[str, Any]) -> bool:
    """Whether ``gap`` is a perturbation gap of visual families only."""
    families = list(gap.get("families") or ())
    return (gap.get("kind") == "perturbation" and bool(families)
            and all(f in VISUAL_FAMILIES for f in families))


def gap_steers(gap: Mapping[str, Any], sees: bool) -> bool:
    """Whether ``gap`` may steer synthesis for a policy that does (``sees``) or does not read
    camera images: every gap does, except a visual-only one for a policy that does not."""
    return sees or not is_visual(gap)


def ignored_visual_gaps(gaps: Sequence[Mapping[str, Any]], policy: str) -> list[str]:
    """Conditions of the visual gaps that do not steer ``policy`` (for the decision's
    reasons; empty for a policy that sees)."""
    sees = policy_sees(policy)
    return [str(g.get("condition", "")) for g in gaps if not gap_steers(g, sees)]


def check_record_images(policy: str, record_images: bool) -> None:
    """A loop whose policy reads images must record them (else its first training fails,
    after a whole iteration of synthesis).

    Raises:
        ConfigError: naming ``record_images`` and the policy type.
    """
    if not record_images and policy_sees(policy):
        raise ConfigError("record_images", record_images, f"true for the {policy} policy "
                          "(it trains on the wrist camera's frames)")
