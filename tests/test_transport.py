"""Tests of coded_shuffle.transport: the in-process broadcast link."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import encode_plan_arrays, load_dataset
from coded_shuffle.transport import InProcessTransport, LinkStats, Transport, frame_symbols


@pytest.fixture
def frames() -> list[np.ndarray]:
    ds = load_dataset(np.arange(40, dtype=np.uint8).reshape(10, 4))
    return [encode_plan_arrays(ds, [0, 1], [2, -1], epoch=1), encode_plan_arrays(ds, [3], [4], epoch=1)]


def test_in_process_is_a_transport():
    assert isinstance(InProcessTransport(3), Transport)


def test_broadcast_counts_once_and_delivers_in_order(frames):
    link = InProcessTransport(3)
    link.send(frames[:1])
    link.send(frames[1:])
    assert link.stats == LinkStats(2, 3, sum(f.size for f in frames))
    got = link.receive(1)
    assert len(got) == 2 and all(np.array_equal(g, f) for g, f in zip(got, frames, strict=True))
    assert np.shares_memory(got[0], frames[0])  # zero-copy
    assert not got[0].flags.writeable
    assert link.receive(1) == []
    link.send([frames[0].tobytes()])
    assert len(link.receive(0)) == 3 and len(link.receive(1)) == 1 and len(link.receive(2)) == 3
    assert link._log == []  # frames every worker has received are forgotten


def test_fault_hook_corrupts_or_drops_per_worker(frames):
    def fault(worker, q, frame):
        if worker == 0:
            return None
        if worker == 1 and q == 1:
            bad = frame.copy()
            bad[-1] ^= 1
            return bad
        return frame

    link = InProcessTransport(3, fault=fault)
    link.send(frames)
    assert link.receive(0) == []
    got = link.receive(1)
    assert got[1][-1] == frames[1][-1] ^ 1 and np.array_equal(got[0], frames[0])
    assert len(link.receive(2)) == 2
    assert link.stats.frames == 2


def test_frame_symbols(frames):
    assert [frame_symbols(f) for f in frames] == [2, 1]
    assert frame_symbols(np.zeros(3, np.uint8)) == 0


def test_in_process_transport_exceptions(frames):
    with pytest.raises(ValueError, match="'K'"):
        InProcessTransport(0)
    with pytest.raises(TypeError, match="'fault'"):
        InProcessTransport(2, fault=3)
    link = InProcessTransport(2)
    with pytest.raises(TypeError, match="'frames'"):
        link.send(frames[0])
    with pytest.raises(TypeError, match="'frames'"):
        link.send([3])
    with pytest.raises(TypeError, match="'frames'"):
        link.send([np.zeros((2, 2), np.uint8)])
    with pytest.raises(ValueError, match="'worker'"):
        link.receive(2)
    with pytest.raises(TypeError, match="'worker'"):
        link.receive("0")
