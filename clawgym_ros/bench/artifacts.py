"""Artifact store throughput: commit and verify rate for MB-sized artifacts."""

from __future__ import annotations

import tempfile
import time
from typing import Any

import numpy as np


def bench_artifacts(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore

    rng = np.random.default_rng(seed)
    count = 5 if quick else 20
    size = 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        payloads = [rng.bytes(size) for _ in range(count)]
        start = time.perf_counter()
        arts = [store.put_files(C.KIND_DATASET, {"data.bin": p}, seeds={"bench": seed})
                for p in payloads]
        commit_s = time.perf_counter() - start
        start = time.perf_counter()
        for art in arts:
            store.verify(art)
        verify_s = time.perf_counter() - start
    return {
        "artifacts": count,
        "artifact_bytes": size,
        "commit_per_s": round(count / commit_s, 2),
        "verify_mb_per_s": round(count * size / verify_s / 1e6, 1),
    }
