"""The rank's memory sampler: samples while a cell is on, none after it ends, one thread for all cells."""

from __future__ import annotations

import threading
import time

from labkit.ranks.sampler import Sampler


def test_samples_while_a_cell_runs_none_after_and_one_thread_for_every_cell():
    sent: list[tuple[float, dict]] = []
    sampler = Sampler(lambda kind, **fields: sent.append((time.monotonic(), fields)), {}, interval=0.01)
    threads_before = threading.active_count()
    sampler.start()
    time.sleep(0.1)
    sampler.stop()
    ended = time.monotonic()
    during = [s for t, s in sent if t < ended]
    assert len(during) >= 4, "about one sample per interval while the cell runs"
    assert "tensor_bytes" in during[-1], "the last one, at the end of the cell, counts tensors (main thread)"
    time.sleep(0.05)
    assert [t for t, _ in sent if t >= ended] == [], "no background sample once the cell is over"
    thread = sampler._thread
    for _ in range(20):  # a warm session's cells: the same thread, asleep in between
        sampler.start()
        sampler.stop()
    assert sampler._thread is thread and threading.active_count() == threads_before + 1
    assert sum("tensor_bytes" in s for _, s in sent) == 21  # each cell's end sample


def test_no_interval_no_thread():
    sent: list[dict] = []
    sampler = Sampler(lambda kind, **fields: sent.append(fields), {}, interval=0)
    sampler.start()
    sampler.stop()
    assert sampler._thread is None and len(sent) == 1
