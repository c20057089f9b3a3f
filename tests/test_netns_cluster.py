"""The MPI program across hosts made of network namespaces, on links shaped with tc (mpi/netns_cluster.sh).

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2's ``ip`` and ``tc``, util-linux's ``unshare``
and the MPI extra; without them every test here is skipped and says why. Every run is bounded by
the script's ``--timeout`` and by the subprocess timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coded_shuffle.network import Network

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
TIMEOUT = 180


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) to create network namespaces and shape links with tc"
    for tool in ("ip", "tc", "unshare", "timeout"):
        if shutil.which(tool) is None:
            return f"needs '{tool}' (iproute2 / util-linux / coreutils) on PATH"
    if not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None:
        return "needs mpiexec beside the interpreter and mpi4py: pip install 'coded_shuffle[mpi]'"
    probe = f"csprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if made.returncode:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=30)
    return None


MISSING = _missing()
pytestmark = [pytest.mark.mpi, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


def cluster(*args: str, timeout: float = TIMEOUT) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the script; return its result and its pid (which names its namespaces: cs<pid>-...)."""
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.Popen(
        [str(CLUSTER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the script's trap deletes its namespaces
        out, err = proc.communicate(timeout=60)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def namespaces_of(pid: int) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=True)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.startswith(f"cs{pid}-")]


#: The program's test-only entry, which takes the options of the faults (``--fail-rank``).
FAULTS = "coded_shuffle.mpi_faults"


def program(*args: str, entry: str = "coded_shuffle.mpi_program") -> list[str]:
    return [sys.executable, "-m", "mpi4py", "-m", entry, *args]


def test_all_modes_cross_the_shaped_links(tmp_path):
    K, N, B, mbit = 2, 3000, 1024, 80  # the master's uplink at 10 MB/s
    out = tmp_path / "rows.jsonl"
    proc, pid = cluster(
        "-K", str(K), "--master-up-mbit", str(mbit), "--worker-down-mbit", "400", "--timeout", "150", "--",
        *program("--points", str(N), "--record-bytes", str(B), "--transitions", "1", "--mode", "all",
                 "--count-links", "--json", str(out)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert namespaces_of(pid) == []  # torn down
    assert [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("links:")] == [
        f"h{i}" for i in range(K + 1)
    ]
    rows = {r["mode"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert list(rows) == ["coded", "uncoded", "exchange"] and all(r["verified"] for r in rows.values())
    coded, uncoded, a2a = rows["coded"], rows["uncoded"], rows["exchange"]
    # The kernel's counters of each host's interface: the traffic really crossed the links.
    # Coded: the master emits the broadcast once (a chain, not one copy per worker: below 1.5x,
    # where MPICH's default for K = 2 would send it twice), and every worker receives all of it.
    up = coded["link_tx_bytes"][0]
    assert coded["wire_bytes"] <= up < 1.5 * coded["wire_bytes"]
    assert all(rx >= coded["wire_bytes"] for rx in coded["link_rx_bytes"][1:])
    # Uncoded: each moved record leaves the master once, to its new holder only.
    assert uncoded["wire_bytes"] <= uncoded["link_tx_bytes"][0] < 1.2 * uncoded["wire_bytes"]
    assert sum(uncoded["link_rx_bytes"][1:]) >= uncoded["wire_bytes"]
    # The exchange: the workers send each other the moved records; the master's uplink stays quiet.
    assert a2a["exchange_bytes"] == a2a["uncoded_symbols"] * B
    assert sum(a2a["link_tx_bytes"][1:]) >= a2a["exchange_bytes"] + a2a["exchange_header_bytes"]
    assert a2a["link_tx_bytes"][0] < 0.05 * a2a["exchange_bytes"]
    # The master's uplink is shaped: its bytes cannot have left faster than the rate allows
    # (beyond the tbf bucket of 128 KiB). A bound from physics, not a time limit. It holds for the
    # master's clock (from before its first byte to the workers' last report); a worker's own
    # delivery clock starts when it leaves the barrier, which can be after the first bytes left.
    rate, bucket = mbit * 1e6 / 8, 131072
    for r in (coded, uncoded):
        assert r["seconds"] >= (r["wire_bytes"] - bucket) / rate


def test_the_probe_reads_the_shaped_links_no_faster_than_their_shaping(tmp_path):
    K, n, master, up, down = 3, 2_000_000, 200, 40, 400  # Mbit/s of the tbf shapers
    out = tmp_path / "rows.jsonl"
    proc, pid = cluster(
        "-K", str(K), "--master-up-mbit", str(master), "--worker-up-mbit", str(up), "--worker-down-mbit",
        str(down), "--timeout", "150", "--",
        *program("--points", "600", "--transitions", "1", "--probe", str(n), "--json", str(out),
                 "--network", f"master={master},up={up},down={down}"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert namespaces_of(pid) == []
    first, *rows = map(json.loads, out.read_text().splitlines())
    probe, took = first["probe"], first["probe"]["phase_seconds"]
    assert [r["verified"] for r in rows] == [True]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("probe: the links reached ")]
    assert f"--network says master={master},up={up},down={down}" in line

    # Each phase's bytes crossed links shaped by tbf: no faster than the rate allows beyond the
    # bucket (128 KiB at these rates). Bounds from physics, not time limits.
    def least(nbytes: float, mbit: float) -> float:
        return (nbytes - 131072) / (mbit * 1e6 / 8)

    assert took["master_all"] >= least(K * n, master)
    assert took["master_one"] >= least(n, min(master, down))
    assert took["ring"] >= least(n, up)
    assert took["incast"] >= max(least(n, down), least(n / (K - 1), up))
    assert probe["rates_mbit"]["up"] <= up * n / (n - 131072) * 1.005
    assert Network.parse(probe["network"]).up == probe["rates_mbit"]["up"]


def test_scoped_groups_spare_each_downlink_what_it_does_not_decode(tmp_path):
    K = 4
    out = tmp_path / "rows.jsonl"
    proc, pid = cluster(
        "-K", str(K), "--igmp-snooping", "--master-up-mbit", "400", "--timeout", "150", "--",
        *program("--points", "8000", "--transitions", "2", "--multicast", "239.77.3.0:7300", "--count-links",
                 "--link-mbps", "400", "--network", "master=400,down=1000,multicast,snooping",
                 "--json", str(out)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert namespaces_of(pid) == []
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["verified"] for r in rows] == [True, True]
    for r in rows:
        # --multicast-scope auto scoped the groups, the SPEC saying that the switch snoops.
        # The kernel's counters: the master sent every byte once, and the bridge, forwarding each
        # group to its members, gave each worker about its pairs' half of them (K = 4: 3 of the 6
        # pairs, and the framing and the cycles' symbols), where a broadcast would give it all.
        assert r["wire_bytes"] <= r["link_tx_bytes"][0] < 1.1 * r["wire_bytes"]
        assert max(r["link_rx_bytes"][1:]) < 0.75 * r["wire_bytes"]


def test_tear_down_after_a_failing_job():
    proc, pid = cluster(
        "-K",
        "2",
        "--timeout",
        "120",
        "--",
        *program("--points", "300", "--transitions", "2", "--fail-rank", "1", entry=FAULTS),
    )
    assert proc.returncode != 0 and "deliberate failure" in proc.stderr
    assert namespaces_of(pid) == []


def test_tear_down_after_the_timeout():
    proc, pid = cluster("-K", "1", "--timeout", "2", "--", "sleep", "60", timeout=90)
    assert proc.returncode == 124 and "ran past --timeout 2 s" in proc.stderr
    assert namespaces_of(pid) == []


def strays(token: str) -> list[int]:
    """The processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile
                pass
    return found


def test_tear_down_stops_what_the_job_left_running(tmp_path):
    """A program that leaves a process behind on every host (its files closed, so the job ends):
    the script stops it before it deletes the namespaces, where it would outlive them."""
    token = f"stray-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "stray.py").write_text(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    null = os.open(os.devnull, os.O_RDWR)\n"
        "    for fd in (0, 1, 2):\n"
        "        os.dup2(null, fd)\n"
        "    os.closerange(3, 65536)\n"
        "    time.sleep(120)\n"
    )
    try:
        proc, pid = cluster("-K", "1", "--timeout", "60", "--", sys.executable, str(tmp_path / "stray.py"),
                            token)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert namespaces_of(pid) == []
        assert strays(token) == []
    finally:
        for p in strays(token):
            os.kill(p, 9)


def test_tear_down_when_interrupted():
    import signal
    import time

    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.Popen(
        [str(CLUSTER), "-K", "1", "--timeout", "120", "--", "sleep", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        for _ in range(300):  # at most 30 s for the hosts to come up
            if len(namespaces_of(proc.pid)) == 3 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert len(namespaces_of(proc.pid)) == 3  # switch, h0, h1
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    assert proc.returncode == 143
    assert namespaces_of(proc.pid) == []


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["-K", "0", "--", "true"], "-K"),
        (["-K", "two", "--", "true"], "-K"),
        (["-K", "2", "--master-up-mbit", "fast", "--", "true"], "--master-up-mbit"),
        (["-K", "2", "--bcast", "tree", "--", "true"], "--bcast"),
        (["-K", "2", "--tcp-cc", "Cubic!", "--", "true"], "--tcp-cc"),
        (["-K", "1", "--tcp-cc", "nosuchcc", "--", "true"], "--tcp-cc"),  # refused once the hosts exist
        (["-K", "4", "--racks", "3x2", "--", "true"], "--racks"),
        (["-K", "4", "--peers", "--racks", "2x", "--", "true"], "--racks"),
        (["-K", "4", "--racks", "2+0+2", "--", "true"], "--racks"),
        (["-K", "4", "--racks", "2x2", "--rack-up-mbit", "-1", "--", "true"], "--rack-up-mbit"),
        (["-K", "4", "--rack-up-mbit", "100", "--", "true"], "--rack-up-mbit"),
        (["-K", "4", "--racks", "2x2", "--igmp-snooping", "--", "true"], "--igmp-snooping"),
        (["-K", "2", "--timeout", "0", "--", "true"], "--timeout"),
        (["-K", "2", "--color", "red", "--", "true"], "--color"),
        (["-K", "2"], "no program"),
    ],
)
def test_usage_errors(args, word):
    proc, pid = cluster(*args, timeout=60)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and word in errors[0]
    assert namespaces_of(pid) == []


def _plan_between_racks(N: int, B: int, K: int, M: int, spec: str | None, rack: list[int]) -> dict:
    """The first transition's exchange among peers as the job plans it: every unit's sender and
    wanter, counted here, unit by unit, into the bytes each rack sends out and takes in."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.engine.state import storage_pieces
    from coded_shuffle.orders import OrderSpec, auto_order

    net = None if spec is None else Network.parse(spec)
    scheme = scheme_for("exchange", K=K, storage=M, peers=True, record_bytes=B, network=net)
    placement = scheme_for("coded", K=K, storage=M, record_bytes=B)
    epochs = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(auto_order("auto", N)), scheme=placement)
    first = epochs.epoch(0)
    _, wanter, _, assigned = scheme.exchange_plan(first.held, epochs.epoch(1, first).held)
    width = storage_pieces(B, K, M)[1]
    out, into, sent = [0] * (max(rack) + 1), [0] * (max(rack) + 1), [0] * K
    for s, w in zip(assigned.sender.tolist(), wanter.tolist(), strict=True):
        sent[s] += width
        if rack[s] != rack[w]:
            out[rack[s]] += width
            into[rack[w]] += width
    return {"out": out, "into": into, "max_sent": max(sent)}


def test_racks_carry_between_them_what_the_exchange_plans(tmp_path):
    # Two racks of 2 peers, shaped uplinks to the spine, storage M = 2: each missing piece has two
    # holders and the senders are chosen on the racks' links (--network with racks). The kernel's
    # counters of each rack's uplink and downlink against the plan's units that change racks.
    K, M, N, B = 4, 2, 64, 3 * 131072  # 3 pieces of 128 KiB a record: the bytes dwarf the control
    spec = "up=1000,down=1000,racks=2x2,rack-up=400"
    out = tmp_path / "rows.jsonl"
    proc, pid = cluster(
        "-K", str(K), "--peers", "--racks", "2x2", "--rack-up-mbit", "400", "--timeout", "150", "--",
        *program("--points", str(N), "--record-bytes", str(B), "--transitions", "1", "--mode", "exchange",
                 "--storage", str(M), "--network", spec, "--json", str(out)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert namespaces_of(pid) == []  # the racks' namespaces too
    (row,) = map(json.loads, out.read_text().splitlines())
    assert row["verified"]
    counted = {}
    for line in proc.stderr.splitlines():
        if line.startswith("links: rack"):
            name, _, up, _, down, _ = line.split()[1:]
            counted[name] = (int(up), int(down))
    assert list(counted) == ["rack0", "rack1"]
    rack = [0, 0, 1, 1]
    aware = _plan_between_racks(N, B, K, M, spec, rack)
    assert aware["max_sent"] == row["max_sent_bytes"]  # the plan counted here is the job's
    blind = _plan_between_racks(N, B, K, M, None, rack)
    for r, name in enumerate(counted):
        up, down = counted[name]
        # At least the planned payload crossed; at most it, its frames' headers and the TCP/IP
        # headers (under 5 %: segments of up to 64 KiB on these links), the acknowledgements of
        # what came the other way (under 2 %), and the whole job's start-up and control messages
        # (the checksums of 384 pieces, one warm-up of 16 records of 8 bytes: under 256 KiB).
        assert aware["out"][r] <= up <= 1.05 * aware["out"][r] + 0.02 * aware["into"][r] + 262144
        assert aware["into"][r] <= down <= 1.05 * aware["into"][r] + 0.02 * aware["out"][r] + 262144
        # Senders blind to the racks would have sent more out of this rack than crossed.
        assert up < blind["out"][r]
