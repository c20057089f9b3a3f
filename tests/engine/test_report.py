"""The transition report (coded_shuffle.engine.report): its keys as docs/cli.md and docs/mpi.md list
them, frozen, its sections where they apply; and the rows of ``coded-shuffle run``'s table.

Each row's counts are in its own mode's units and each bound its own mode's; the oracle is the
placements themselves: what each worker misses, counted record by record (or piece by piece).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.bounds import lower_bound
from coded_shuffle.engine import simulate
from coded_shuffle.engine.report import KEYS, TABLE_COLUMNS, table_cells, table_legend
from coded_shuffle.engine.state import storage_pieces
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import piece_placement

ROOT = Path(__file__).resolve().parents[2]


def _row(rep) -> dict[str, str]:
    return dict(zip(TABLE_COLUMNS, table_cells(rep.to_dict()), strict=True))


def _brute(N: int, K: int, seed: int) -> tuple[int, int, int]:
    """``(W, the most records a worker misses, the most only one worker holds for the others)``,
    record by record."""
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    misses, gives, W = [0] * K, [0] * K, 0
    for r in range(N):
        a, b = int(p0.owner[r]), int(p1.owner[r])
        if a != b:
            W += 1
            misses[b] += 1
            gives[a] += 1  # one batch: the old holder is the only one to give it
    return W, max(misses), max(gives)


@pytest.mark.parametrize("mode", ["coded", "uncoded", "exchange"])
def test_each_row_counts_its_own_units_against_its_own_bound(mode):
    N, K, seed = 120, 3, 5
    rep = simulate(K=K, N=N, record_bytes=16, epochs=1, seed=seed, mode=mode).transitions[0]
    row = _row(rep)
    W, down, up = _brute(N, K, seed)
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    L = int(lower_bound(shuffle_matrix(p0, p1)).value)
    if mode == "coded":
        assert row["unit"] == "symbols" and row["sent"] == row["planned"] == str(rep.coded_symbols)
        coded = rep.coded_symbols
        assert row["busiest d/u"] == f"{coded}/{coded}"  # a broadcast: every worker hears all of it
        assert row["bound d/u"].rstrip("*") == f"{down}/{L}"
    elif mode == "uncoded":
        assert row["unit"] == "records" and row["sent"] == row["planned"] == str(W)
        assert row["busiest d/u"] == f"{down}/{W}" and row["bound d/u"] == f"{down}/{W}"
    else:  # every moved record sent once, from its one holder: the exchange meets both bounds
        assert row["unit"] == "records" and row["sent"] == row["planned"] == str(W)
        assert row["busiest d/u"] == f"{down}/{up}" and row["bound d/u"] == f"{down}/{up}"
    legend = table_legend([rep.to_dict()])
    assert legend[0].startswith("unit: ") and "records of 16 B" in legend[0]
    assert any(line.strip().startswith(f"{mode}: ") for line in legend)


def test_with_storage_the_rows_count_pieces_and_say_so():
    N, K, M, B, seed = 60, 4, 2, 2048, 1
    P, width = storage_pieces(B, K, M)
    assert P > 1
    rep = simulate(K=K, N=N, record_bytes=B, epochs=1, seed=seed, mode="exchange", storage=M).transitions[0]
    row = _row(rep)
    # piece by piece: what each worker lacks of its next batch
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    held = piece_placement(p0, M=M, pieces=P)
    misses = []
    for j in range(K):
        mine = set(held.held_by(j).tolist())
        want = [r * P + p for r in np.flatnonzero(p1.owner == j).tolist() for p in range(P)]
        misses.append(sum(u not in mine for u in want))
    assert row["unit"] == "pieces" and row["sent"] == row["planned"] == str(sum(misses))
    assert row["busiest d/u"].split("/")[0] == row["bound d/u"].split("/")[0] == str(max(misses))
    assert f"pieces of {width} B, {P} a record of {B} B" in table_legend([rep.to_dict()])[0]


def test_a_split_row_counts_both_halves_against_its_own_bound():
    from coded_shuffle.engine.schemes.split import split_placements
    from coded_shuffle.network import Network, split_share

    N, K, seed = 150, 3, 4
    net = Network.parse("master=1000,up=200,down=1000,multicast")
    rep = simulate(K=K, N=N, record_bytes=16, epochs=1, seed=seed, mode="split", network=net).transitions[0]
    row = _row(rep)
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    coded_half, exchanged = split_placements(p0, p1, split_share(shuffle_matrix(p0, p1), network=net))
    L = int(lower_bound(shuffle_matrix(p0, coded_half)).value)
    gives = [0] * K  # record by record: what each worker sends of the exchanged half
    for r in range(N):
        if p0.owner[r] != exchanged.owner[r]:
            gives[int(p0.owner[r])] += 1
    W, down, _ = _brute(N, K, seed)
    assert 0 < sum(gives) < W and rep.split.split_uplink_bound == max(L, max(gives))
    assert row["unit"] == "sym+rec" and row["planned"] == str(rep.planned_symbols + sum(gives))
    assert row["bound d/u"] == f"{down}/{max(L, max(gives))}"


def _documented_keys(path: str, heading: str) -> set[str]:
    """The keys a docs page's table of the transition report names (its first column)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    rows = text[text.index(heading) :].split("\n| key | meaning |\n| --- | --- |\n", 1)[1]
    keys: set[str] = set()
    for line in rows.split("\n"):
        if not line.startswith("|"):
            break
        keys |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return keys


def _reports():
    from coded_shuffle.network import Network

    net = Network.parse("master=1000,up=200,down=1000,multicast")
    yield simulate(K=3, N=60, record_bytes=16, epochs=1, seed=2).transitions[0]
    yield simulate(K=3, N=60, record_bytes=16, epochs=1, seed=2, mode="split", network=net).transitions[0]
    yield simulate(K=4, N=60, record_bytes=2048, epochs=1, seed=2, mode="exchange", storage=2).transitions[0]


def test_to_dict_has_exactly_the_keys_the_docs_list():
    cli = _documented_keys("docs/cli.md", "## The transition report")
    mpi = _documented_keys("docs/mpi.md", "## The report")
    assert cli == mpi == set(KEYS)
    for rep in _reports():
        d = rep.to_dict()
        assert list(d) == list(KEYS)
        assert json.loads(json.dumps(d)) == d  # plain values


def test_a_report_and_its_sections_are_frozen():
    rep = simulate(K=3, N=60, record_bytes=16, epochs=1, seed=2, mode="exchange").transitions[0]
    assert rep.exchange is not None
    for obj, name in ((rep, "verified"), (rep, "wire"), (rep.wire, "frames"), (rep.units, "storage"),
                      (rep.exchange, "exchange_bytes")):  # fmt: skip
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, 0)
    with pytest.raises(TypeError):  # inside too
        rep.timings["plan"] = -1.0  # type: ignore[index]
    d = rep.to_dict()
    d["timings"]["plan"] = -1.0
    assert rep.timings["plan"] >= 0 and type(d["timings"]) is dict  # to_dict's are plain copies


def test_sections_are_there_where_they_apply_and_flatten_to_their_defaults_elsewhere():
    coded, split, stored = _reports()
    assert coded.exchange is None and coded.split is None and coded.on_network is None and coded.job is None
    d = coded.to_dict()
    absent = ("exchange_bytes", "max_sent_bytes", "split_uplink_bound", "network", "digests")
    assert [d[k] for k in absent] == [0, 0, None, None, None]
    assert coded.sent_bytes == d["sent_bytes"] == coded.wire_bytes > 0
    assert split.split is not None and split.exchange is not None and split.on_network is not None
    x = split.exchange
    assert split.sent_bytes == split.wire_bytes + x.exchange_bytes + x.exchange_header_bytes
    assert split.to_dict()["choice"] == split.on_network.choice
    assert stored.units.storage == 2 and stored.wire_bytes == 0 and stored.exchange is not None
    assert stored.to_dict()["piece_bytes"] == stored.units.piece_bytes == -(-2048 // stored.units.subpackets)
