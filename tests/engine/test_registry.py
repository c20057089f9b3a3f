"""The registry of schemes: every list of modes is derived from it, a job's ranks are asked of it,
and a scheme of one's own runs wherever a registered one does (by name once registered, or
passed as an object)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from coded_shuffle import network
from coded_shuffle.cli import build_parser
from coded_shuffle.cli.job import add_job_arguments
from coded_shuffle.cli.run import run_command
from coded_shuffle.cli.runner.mpi_job import CODED, MASTER_SENDS, MODES
from coded_shuffle.engine import run, simulate, synthetic_dataset
from coded_shuffle.engine.schemes import REGISTRY, Registered, UncodedScheme, names, resolve
from coded_shuffle.loader import InProcessLoader, PeerLoader
from coded_shuffle.loader._common import check_scheme


class Counted(UncodedScheme):
    """A scheme of one's own: the uncoded delivery under another name, counting its deliveries."""

    name = "counted"

    def __init__(self, holding=None):
        super().__init__(holding)
        self.encoded = 0

    def encode(self, plan, dataset, *, epoch, max_frame_bytes):
        self.encoded += 1
        return super().encode(plan, dataset, epoch=epoch, max_frame_bytes=max_frame_bytes)


def _mode_choices(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    (action,) = [a for a in parser._actions if "--mode" in a.option_strings]
    return tuple(action.choices)


def _command(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# ---- every list of modes is the registry's


def test_every_mode_list_of_the_command_line_is_the_registrys():
    registered = {n for r in REGISTRY.values() for n in (r.name, *r.aliases)}
    program = argparse.ArgumentParser()
    add_job_arguments(program, launcher=False)  # the MPI program's options (mpi_program.parse_args)
    assert set(_mode_choices(program)) == registered | {"both", "all"}
    assert set(_mode_choices(_command("run"))) == registered | {"both", "all", "auto"}
    assert _mode_choices(_command("simulate")) == (*REGISTRY, "auto")
    # the two words of several modes name registered schemes (docs/mpi.md: both = coded and
    # uncoded, all = the three, the master present)
    assert MODES["both"] == ("coded", "uncoded") and MODES["all"] == ("coded", "uncoded", "exchange")
    assert all(m in REGISTRY for modes in MODES.values() for m in modes)


def test_the_registry_gives_what_each_scheme_is():
    # docs/mpi.md: coded and split code what the master sends (--multicast carries it); uncoded
    # sends from the master too; the exchange alone is a job of K peers, or runs beside a master.
    assert set(REGISTRY) == {"coded", "uncoded", "exchange", "split"} == set(names())
    assert CODED == {"coded", "split"} and MASTER_SENDS == {"coded", "uncoded", "split"}
    assert {n: r.where for n, r in REGISTRY.items()} == {
        "coded": "master", "uncoded": "master", "exchange": "both", "split": "master",
    }  # fmt: skip


def test_each_scheme_predicts_with_the_network_layers_function_of_its_mode():
    predicts = {n for n, r in REGISTRY.items() if r.predicted is not None}
    assert predicts == set(network.MODES) == set(network.PREDICTIONS)
    for name in predicts:
        assert REGISTRY[name].predicted is network.PREDICTIONS[name]


@pytest.mark.parametrize(
    ("mode", "ranks"),
    [("coded", 5), ("uncoded", 5), ("exchange", 4), ("alltoallv", 4), ("both", 5), ("all", 5), ("split", 5)],
)
def test_the_launcher_asks_the_schemes_how_many_ranks(mode, ranks):
    # docs/mpi.md: mpiexec -n K+1 with a master, -n K for the exchange alone (a job of peers)
    from coded_shuffle.cli import build_parser

    args = build_parser().parse_args(["run", "-K", "4", "--mode", mode])  # the options run has
    assert run_command(args, "mpiexec")[:3] == ["mpiexec", "-n", str(ranks)]


# ---- a scheme of one's own


def test_a_scheme_object_runs_through_run_simulate_and_the_loader():
    rep = simulate(K=3, N=60, record_bytes=16, epochs=2, seed=1, mode=(mine := Counted()))
    assert rep.verified and [t.mode for t in rep.transitions] == ["counted", "counted"]
    assert mine.encoded == 2  # its own delivery, not a registered one's
    X = np.random.default_rng(0).integers(0, 256, (40, 4), dtype=np.uint8).view(np.float32)
    loader = InProcessLoader(X, K=4, epochs=3, seed=2, scheme=(theirs := Counted()))
    for epoch in loader:
        for b in epoch.batches:
            assert np.array_equal(b.records, X[b.ids])  # every row, from the source itself
        assert epoch.report is None or (epoch.report.verified and epoch.report.mode == "counted")
    assert theirs.encoded == 2


def test_a_registered_scheme_of_ones_own_runs_by_name(monkeypatch):
    made: list[Counted] = []

    def factory(holding, *, peers, network):
        made.append(Counted(holding))
        return made[-1]

    monkeypatch.setitem(REGISTRY, "counted", Registered("counted", factory, "master", True))
    ds = synthetic_dataset(50, 8, seed=3)
    rep = run(ds, K=5, epochs=2, seed=3, mode="counted")
    assert rep.verified and {t.mode for t in rep.transitions} == {"counted"}
    assert len(made) == 1 and made[0].encoded == 2
    # the same deliveries as the uncoded scheme it wraps: the same bytes, transition by transition
    plain = run(ds, K=5, epochs=2, seed=3, mode="uncoded")
    assert [t.wire_bytes for t in rep.transitions] == [t.wire_bytes for t in plain.transitions]


def test_a_scheme_argument_that_is_neither_a_name_nor_a_scheme_is_a_type_error():
    with pytest.raises(
        TypeError, match="Argument 'mode' must be a registered scheme's name or a Scheme, not int"
    ):
        simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0, mode=5)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match="Argument 'scheme' must be a registered scheme's name or a Scheme, not object"
    ):
        InProcessLoader(np.zeros((8, 2)), K=2, epochs=2, scheme=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Argument 'scheme'"):
        check_scheme(["coded"])
    with pytest.raises(ValueError, match="Argument 'scheme' must be 'coded' or 'exchange'"):
        check_scheme("uncoded")
    with pytest.raises(ValueError, match="Argument 'storage' must be 1 or the scheme's own M = 1, not 2"):
        resolve(Counted(), K=4, storage=2)
    with pytest.raises(ValueError, match="Argument 'mode' must be a scheme of peers"):
        resolve(Counted(), K=4, peers=True)
    for master_only in ("coded", Counted()):  # refused before any link is made
        with pytest.raises(ValueError, match="Argument 'scheme' must be a scheme that runs among peers"):
            PeerLoader(np.zeros((8, 2)), epochs=2, scheme=master_only)
    with pytest.raises(
        ValueError, match="Argument 'where' must be one of master, peers, both, not 'anywhere'"
    ):
        Registered("x", lambda h, **_: UncodedScheme(h), "anywhere", True)
