"""Tests of coded_shuffle.transport: the in-process broadcast link."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.codec import encode_plan_arrays, load_dataset
from coded_shuffle.transport import LINKS, InProcessTransport, LinkStats, Transport, frame_symbols


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


# --------------------------------------------------------------------------- the workers' exchange
# One body (tests/transport/link_exchange_prog.py) over every link: in process here, MPI and torch in
# their launchers.

from tests.transport import link_exchange_prog as contract  # noqa: E402


@pytest.mark.parametrize("K", [1, 2, 4])
def test_the_in_process_exchange_delivers_every_offer_in_sender_order(K):
    link = InProcessTransport(K)
    for rnd in range(4):
        for k in range(K):  # every worker offers before any collects: the driver's order
            link.offer(k, contract.offered(k, K, rnd), rounds=contract.schedule(k, K, rnd))
        for k in range(K):  # in process every frame is there at once: in worker order
            contract.check(link.collect(k) if rnd < 3 else list(link.collect_each(k)), k, K, rnd)
    assert link.exchanged_bytes == sum(contract.sent(k, K, 4) for k in range(K))


def test_an_offer_is_checked_by_name():
    link = InProcessTransport(3)
    with pytest.raises(ValueError, match="must map other workers"):
        link.offer(1, {1: [np.zeros(4, np.uint8)]})
    with pytest.raises(ValueError, match="must map other workers"):
        link.offer(1, {3: [np.zeros(4, np.uint8)]})
    with pytest.raises(TypeError, match="1-D uint8"):
        link.offer(0, {1: [np.zeros(4, np.int32)]})
    with pytest.raises(ValueError, match="'worker' must be less than K = 3"):
        link.collect(3)
    one = {2: [np.zeros(4, np.uint8)] * 2}
    with pytest.raises(ValueError, match="'rounds' must send every frame offered, each once"):
        link.offer(1, one, rounds=[(2, 1, -1)])
    with pytest.raises(ValueError, match="'rounds' must name other workers"):
        link.offer(1, one, rounds=[(2, 2, 1)])
    with pytest.raises(ValueError, match="'rounds' sends worker 0 frames that were not offered"):
        link.offer(1, one, rounds=[(2, 2, -1), (0, 1, -1)])
    with pytest.raises(TypeError, match="'rounds' must hold"):
        link.offer(1, one, rounds=[(2, 2)])
    with pytest.raises(TypeError, match="'rounds' must be a sequence"):
        link.offer(1, one, rounds=3)
    link.offer(1, one, rounds=[(2, 1, 0), (-1, 0, -1), (2, 1, -1)])


ROOT = Path(__file__).resolve().parents[2]


def _launch_contract(cmd: list[str], kind: str) -> None:
    """Run the contract's program on 3 workers and a master; every worker must print ``ok``."""
    proc = subprocess.run(
        [*cmd, str(ROOT / "tests" / "transport" / "link_exchange_prog.py"), kind],
        capture_output=True, text=True, timeout=180, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the workers' lines may interleave on the launcher's standard output
    assert sorted(re.findall(r"ok \d+", proc.stdout)) == ["ok 0", "ok 1", "ok 2"], proc.stdout


def _mpi() -> list[str] | None:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists() or importlib.util.find_spec("mpi4py") is None:
        return None
    return [str(mpiexec), "-n", "4", sys.executable, "-m", "mpi4py"]


def _torchrun() -> list[str] | None:
    if importlib.util.find_spec("torch") is None:
        return None
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4"]
    return [*cmd, "--monitor-interval=0.5"]


#: How to start 4 ranks of each kind of link (None: not here), and the contract's runs over it.
LAUNCHERS = {"mpi": (_mpi, ("mpi", "mpi-rounds")), "torch": (_torchrun, ("torch",))}


def test_every_kind_of_link_has_a_launcher_for_the_contract():
    assert set(LAUNCHERS) == set(LINKS)


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=getattr(pytest.mark, name)) for name in LAUNCHERS]
)
def test_every_link_passes_the_link_contract(name):
    launcher, kinds = LAUNCHERS[name]
    cmd = launcher()
    if cmd is None:
        pytest.skip(f"needs the launcher of the {name} link")
    for kind in kinds:
        _launch_contract(cmd, kind)


@pytest.mark.torch
def test_the_torch_link_names_a_rank_that_never_makes_it(capsys):
    """The ranks meet in the store before the link's gloo group forms (which would wait for a
    missing rank without naming it): the first rank present names the missing ones in one line."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs PyTorch (pip install 'torch==2.13.0+cpu')")
    from torch.distributed import HashStore

    from coded_shuffle.transport import TorchTransport
    from coded_shuffle.transport.torch_dist import meet

    store = HashStore()
    assert meet(store, 0, 3, 0.05) == [1, 2]
    store.set("here/2", "1")
    assert meet(store, 1, 3, 0.05) == []  # ranks 0 and 2 marked already
    link = TorchTransport.__new__(TorchTransport)  # no process group: only the line is made
    link.rank, link.root, link.peers = 0, 0, False

    def abort(status):
        raise SystemExit(status)

    link.abort = abort
    with pytest.raises(SystemExit):
        link._absent([2], 3, 3.0)
    assert capsys.readouterr().err == (
        "coded_shuffle.transport: error: the master (rank 0): rank 2 (worker 1) did not make its link "
        "within 3 s; ending the job\n"
    )


def test_a_multicast_link_wraps_a_link_between_processes_only():
    from coded_shuffle.transport import MulticastLink

    with pytest.raises(TypeError, match="Argument 'link' must be a FramedLink, not InProcessTransport"):
        MulticastLink(InProcessTransport(2), "239.1.2.3", 5000)  # type: ignore[arg-type]
