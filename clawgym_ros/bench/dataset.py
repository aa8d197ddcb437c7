"""Dataset layer throughput: MCAP episode write/read and training-table build.

Uses the synthetic pick-and-place generator (no physics), so the numbers isolate recording,
reading and caching costs. ``clawgym bench synth`` (with the simulator-backed experts) measures
generation itself.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from mcap.reader import make_reader


def bench_dataset(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    from clawgym_ros import constants as C
    from clawgym_ros.artifacts import ArtifactStore
    from clawgym_ros.dataset.cache import training_table
    from clawgym_ros.dataset.episode_mcap import encode_episode, read_episode
    from clawgym_ros.dataset.writer import synthesize_dataset
    from clawgym_ros.synthesis.mixture import MixtureSpec, plan_episodes
    from clawgym_ros.synthesis.synthetic import SIGNOFF, synthetic_episode

    episodes = 10 if quick else 60
    steps = 120
    specs = plan_episodes(MixtureSpec.single(C.TASK_PICK_PLACE), episodes, seed,
                          options={"steps": steps})
    records = [synthetic_episode(s) for s in specs]
    start = time.perf_counter()
    blobs = [encode_episode(r) for r in records]
    write_s = time.perf_counter() - start
    messages = sum(_message_count(b) for b in blobs)
    start = time.perf_counter()
    for blob in blobs:
        read_episode(blob)
    read_s = time.perf_counter() - start
    image_specs = plan_episodes(MixtureSpec.single(C.TASK_PICK_PLACE), max(2, episodes // 5),
                                seed, options={"steps": steps, "images": True})
    image_records = [synthetic_episode(s) for s in image_specs]
    start = time.perf_counter()
    image_blobs = [encode_episode(r) for r in image_records]
    image_write_s = time.perf_counter() - start
    image_messages = sum(_message_count(b) for b in image_blobs)
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        start = time.perf_counter()
        artifact, summary = synthesize_dataset(store, specs, synthetic_episode, SIGNOFF,
                                               workers=1, generation={"seed": seed})
        dataset_s = time.perf_counter() - start
        assert artifact is not None
        start = time.perf_counter()
        table = training_table(store, [artifact.id])
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        training_table(store, [artifact.id])
        reuse_s = time.perf_counter() - start
    return {
        "episodes": episodes,
        "steps_per_episode": steps,
        "mcap_write_msgs_per_s": round(messages / write_s),
        "mcap_read_msgs_per_s": round(messages / read_s),
        "mcap_write_ms_per_episode": round(1000 * write_s / episodes, 2),
        "mcap_read_ms_per_episode": round(1000 * read_s / episodes, 2),
        "mcap_bytes_per_episode": round(sum(len(b) for b in blobs) / episodes),
        "mcap_write_msgs_per_s_with_24x32_images": round(image_messages / image_write_s),
        "dataset_episodes_per_s_1_worker": round(summary.done / dataset_s, 1),
        "table_rows": len(table),
        "table_build_s": round(build_s, 3),
        "table_rows_per_s": round(len(table) / build_s),
        "table_reuse_s": round(reuse_s, 4),
    }


def _message_count(blob: bytes) -> int:
    import io

    summary = make_reader(io.BytesIO(blob)).get_summary()
    return int(summary.statistics.message_count) if summary and summary.statistics else 0
