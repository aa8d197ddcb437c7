"""Options of the built-in policy types (``mlp``, ``cnn``): plain dataclasses without torch,
so that a loop config or a CLI's ``--policy-option`` is checked without loading a network
library (:func:`clawgym_ros.training.registry.check_policy_options`). The types themselves
live in :mod:`clawgym_ros.training.policies`.
"""

from __future__ import annotations

import dataclasses

from clawgym_ros import constants as C
from clawgym_ros.config import check_choice, check_int, check_range

#: What relative action parts are relative to (:class:`MLPOptions` ``relative_base``).
RELATIVE_BASE_OBSERVATION = "observation"
RELATIVE_BASE_COMMAND = "command"
RELATIVE_BASES: tuple[str, ...] = (RELATIVE_BASE_OBSERVATION, RELATIVE_BASE_COMMAND)


@dataclasses.dataclass(frozen=True)
class MLPOptions:
    """Options of the ``mlp`` policy (the ``cnn`` policy's include them).

    Attributes:
        relative_base: what relative action parts (``action_mode: delta``: joint targets) are
            relative to: ``observation`` (default: the measured joint positions) or ``command``
            (the previous joint target the policy sent; the measured positions only for an
            episode's first chunk). With ``observation`` every chunk's targets carry the
            encoders' noise and bias into the command; with ``command`` they reach the command
            only through the network's input (docs/results/2026-12-05-relative-base.md).
    """

    relative_base: str = RELATIVE_BASE_OBSERVATION

    def __post_init__(self) -> None:
        check_choice("policy_options.relative_base", self.relative_base, RELATIVE_BASES)


@dataclasses.dataclass(frozen=True)
class CNNOptions(MLPOptions):
    """Image augmentation of the ``cnn`` policy (training only; acting sees plain frames),
    beside :class:`MLPOptions` (``relative_base``).

    Attributes:
        shift_pad: random shift of each training image by up to this many pixels in x and y
            (edge pixels repeated; DrQ's pad-and-crop), [0, 32]; 0 = off.
        brightness: each training image's pixel values scaled by a factor drawn from
            [1 - brightness, 1 + brightness], [0, 1]; 0 = off. The default 1.0 (scale U(0, 2);
            0.3 before 2026-12-06) makes the policy hold up under the lighting perturbation:
            on pick_place at lighting intensity 1.0 success went 0.47 -> 0.90, nominal 0.78 ->
            0.88 (docs/results/2026-12-06-vision-lighting-demos.md).
        downsample: the policy keeps every this-many-th pixel row and column of the camera
            image (training and acting alike; like rendering it that much smaller), [1, 8];
            1 = off. 2 turns 84x84 into 42x42: the convolutions and the augmentation then
            cost about a quarter. ``shift_pad`` counts pixels of the downsampled image.
    """

    shift_pad: int = 4
    brightness: float = 1.0
    downsample: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("policy_options.shift_pad", self.shift_pad, 0, 32)
        check_range("policy_options.brightness", self.brightness, 0.0, 1.0)
        check_int("policy_options.downsample", self.downsample, 1, 8)


#: Built-in policy type -> its options class (the types' ``Options`` attribute is the same).
BUILTIN_OPTIONS: dict[str, type] = {C.POLICY_MLP: MLPOptions, C.POLICY_CNN: CNNOptions}
