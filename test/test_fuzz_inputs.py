"""Property tests over the config inputs (issue 18), seeded and bounded (no hypothesis in the
venv): every shipped config, mutated at the value and at the byte level, loads or fails with
one ClawgymError line, quickly. Never a traceback, never a hang.

``CLAWGYM_FUZZ_SEED`` / ``CLAWGYM_FUZZ_N`` run other or more cases (e.g. N=20000 overnight).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from clawgym_ros.errors import ClawgymError

ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("CLAWGYM_FUZZ_SEED", "18"))
N = int(os.environ.get("CLAWGYM_FUZZ_N", "400"))

WEIRD = [None, True, False, 0, -1, 1, 2**70, -2**70, 0.5, -0.0, float("nan"), float("inf"),
         -float("inf"), "", "x", "nan", "1e999", [], [1], {}, {"a": 1}, [[[]]], "../../etc",
         "\u202e", 1e308, "pick_place", 10**30, "y" * 5000]
TOKENS = [b"&a ", b"*a", b"!!python/object:os.system", b"!!binary", b"\x00", b"\xff", b"{",
          b"[", b"]", b":", b"- ", b"\n  ", b"'", b'"', b"\t", b"%YAML 1.1\n", b"---\n",
          b"...\n", b"? ", b"|", b">", b"<<: ", b"!!set", b"2001-13-45", b"1e999", b"9" * 5000,
          b"\xef\xbb\xbf", b"\r", b"\xc3(", b"1: ", b"on: "]


def loaders() -> list[tuple[str, bytes, Callable[[Path], object], Path | None]]:
    """(file name, bytes, loader, the shipped file it came from or None) per input."""
    from clawgym_ros.coordinator.config import load_loop_config
    from clawgym_ros.evaluation.preference import load_judgments
    from clawgym_ros.evaluation.suites import load_suite
    from clawgym_ros.synthesis.mixture import load_mixture
    from clawgym_ros.training.config import load_group_weights

    out = []
    for folder, load in (("config/loop", load_loop_config), ("config/suites", load_suite),
                         ("config/loop/suites", load_suite)):
        out += [(p.name, p.read_bytes(), load, p)
                for p in sorted((ROOT / folder).glob("*.yaml"))]
    out += [
        ("mixture.yaml", b"mixture:\n- {task: pick_place, template: cube, family: lighting, "
                         b"intensity: 0.5, weight: 2}\n", load_mixture, None),
        ("weights.yaml", b"trunk: 2.0\nhead: 0.5\n", load_group_weights, None),
        ("judgments.csv", b"item_a,item_b,preferred,rater\nx,y,a,r\ny,z,tie,r\n",
         load_judgments, None),
        ("judgments.json", b'{"judgments": [{"item_a": "x", "item_b": "y", "preferred": "b"}]}',
         load_judgments, None),
    ]
    return out


def mutate_value(rng: random.Random, obj: object) -> object:
    if isinstance(obj, dict) and obj:
        obj, key = dict(obj), rng.choice(list(obj))
        roll = rng.random()
        if roll < 0.6:
            obj[key] = mutate_value(rng, obj[key]) if rng.random() < 0.5 else rng.choice(WEIRD)
        elif roll < 0.8:
            del obj[key]
        else:
            obj[rng.choice(["zz", f"{key}_", 1, None])] = rng.choice(WEIRD)
        return obj
    if isinstance(obj, list) and obj:
        obj, i = list(obj), rng.randrange(len(obj))
        roll = rng.random()
        if roll < 0.6:
            obj[i] = mutate_value(rng, obj[i]) if rng.random() < 0.5 else rng.choice(WEIRD)
        elif roll < 0.8:
            del obj[i]
        else:
            obj.append(rng.choice(WEIRD))
        return obj
    return rng.choice(WEIRD)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        roll, i = rng.random(), rng.randrange(len(out) + 1)
        if roll < 0.4:
            out[i:i] = rng.choice(TOKENS)
        elif roll < 0.6:
            del out[i:i + rng.randint(1, 20)]
        elif roll < 0.8 and out:
            out[min(i, len(out) - 1)] = rng.randrange(256)
        else:
            out = out[:i]
    return bytes(out)


def warm_up(cases, tmp_path: Path) -> None:
    """Load every unmutated input once, so the one-off imports some loaders make (torch for a
    loop config's RL lever, plugin entry points) are paid before the timed loads: the time
    limit is there to catch a hang or a parse blow-up, not the first import on a busy
    machine (3.6 s once, with a test suite running beside it)."""
    for name, data, load, path in cases:
        if path is None:
            path = tmp_path / name
            path.write_bytes(data)
        try:
            load(path)
        except ClawgymError:
            pass


def check_one(load: Callable[[Path], object], path: Path) -> None:
    start = time.monotonic()
    try:
        load(path)
    except ClawgymError as err:
        text = str(err)
        assert "\n" not in text and len(text) < 2000, text[:300]
    assert time.monotonic() - start < 2.0, path.read_bytes()[:300]


@pytest.mark.parametrize("level", ["values", "bytes"])
def test_mutated_configs_load_or_fail_with_one_clawgym_error(tmp_path, level):
    rng = random.Random(f"{SEED}-{level}")
    cases = loaders()
    warm_up(cases, tmp_path)
    for _ in range(N):
        name, data, load, _ = rng.choice(cases)
        if level == "values":
            doc = (json.loads(data) if name.endswith(".json") else
                   yaml.safe_load(data) if not name.endswith(".csv") else None)
            if doc is None:
                continue
            for _ in range(rng.randint(1, 3)):
                doc = mutate_value(rng, doc)
            try:
                data = (json.dumps(doc) if name.endswith(".json") else
                        yaml.safe_dump(doc, sort_keys=False)).encode()
            except (TypeError, ValueError, yaml.YAMLError):
                continue
        else:
            data = mutate_bytes(rng, data)
        path = tmp_path / name
        path.write_bytes(data)
        try:
            check_one(load, path)
        except Exception as err:
            raise AssertionError(f"{name} ({level}): {type(err).__name__}: {err}\n"
                                 f"input: {data[:400]!r}") from err
