"""The declared interfaces: every scheme, placement model and transport provides its protocol's
members with the protocol's exact signatures: the same parameters, in the same order, of the same
kinds (positional or keyword-only) and defaults. (Annotations may narrow: a scheme's ``plan`` is
its own plan type; mypy checks them against the protocols.)

``isinstance`` against a runtime-checkable protocol only sees that a member exists; a ``take``
that lost a keyword, or a transport whose ``offer`` takes its arguments in another order, passes
it. The comparison of signatures below does not; the last tests show that it fails on such a
class.
"""

from __future__ import annotations

import inspect

import pytest

from coded_shuffle.engine.holding import Batches, Holding, PieceStorage
from coded_shuffle.engine.schemes import (
    CodedScheme,
    ExchangeScheme,
    Scheme,
    SplitScheme,
    StorageScheme,
    UncodedScheme,
    scheme_for,
)  # fmt: skip
from coded_shuffle.network import Network
from coded_shuffle.transport import ControlLink, InProcessTransport, MPITransport, MulticastLink, Transport
from coded_shuffle.transport.torch_dist import TorchTransport

BUILT = [
    (mode, M, peers)
    for mode, M, peers in [
        ("coded", 1, False), ("uncoded", 1, False), ("exchange", 1, False), ("exchange", 1, True),
        ("coded", 2, False), ("coded", 3, False), ("exchange", 2, False), ("exchange", 2, True),
        ("split", 1, False),
    ]
]  # fmt: skip


def members(protocol: type) -> dict[str, object]:
    """The members ``protocol`` declares, its own and its bases' (not ``object``'s or Protocol's)."""
    out: dict[str, object] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or klass.__module__ == "typing":
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_"):
                out[name] = value
    for name in getattr(protocol, "__annotations__", {}):
        out.setdefault(name, None)
    return out


def shape(fn: object) -> list[tuple[str, object, object]]:
    """The parameters of ``fn``: name, kind and default of each, in order."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def mismatches(cls: type, protocol: type) -> list[str]:
    """Each member of ``protocol`` that ``cls`` lacks, or has with another signature or kind."""
    bad = []
    for name, declared in members(protocol).items():
        if declared is None:  # a data attribute: set on the instances
            continue
        got = inspect.getattr_static(cls, name, None)
        fields = {f for k in cls.__mro__ for f in getattr(k, "__annotations__", {})}
        if got is None and isinstance(declared, property) and name in fields:
            continue  # a read-only member given by a field of the class
        if got is None:
            bad.append(f"{name}: missing")
        elif isinstance(declared, property):
            if callable(got) and not isinstance(got, property):
                bad.append(f"{name}: a method, declared a property")
        elif callable(declared):
            fn = got.__func__ if isinstance(got, (staticmethod, classmethod)) else got
            if not callable(fn):
                bad.append(f"{name}: not a method")
            elif shape(fn) != shape(declared):
                bad.append(f"{name}: {inspect.signature(fn)} is not {inspect.signature(declared)}")
    return bad


@pytest.mark.parametrize("cls", [CodedScheme, UncodedScheme, ExchangeScheme, SplitScheme, StorageScheme])
def test_every_scheme_has_the_declared_signatures(cls):
    assert mismatches(cls, Scheme) == []


@pytest.mark.parametrize(("mode", "M", "peers"), BUILT, ids=lambda v: str(v))
def test_every_built_scheme_is_a_scheme_with_a_placement_model(mode, M, peers):
    edge = Network.parse("master=1000,up=100,down=1000,multicast") if mode == "split" else None
    scheme = scheme_for(mode, K=4, storage=M, peers=peers, network=edge)
    assert isinstance(scheme, Scheme) and isinstance(scheme.holding, Holding)
    assert scheme.M == M == scheme.holding.M
    assert mismatches(type(scheme), Scheme) == []


@pytest.mark.parametrize("cls", [Batches, PieceStorage])
def test_every_placement_model_has_the_declared_signatures(cls):
    assert mismatches(cls, Holding) == []


@pytest.mark.parametrize("cls", [InProcessTransport, MPITransport, TorchTransport, MulticastLink])
def test_every_transport_has_the_data_plane(cls):
    assert mismatches(cls, Transport) == []


@pytest.mark.parametrize("cls", [MPITransport, TorchTransport, MulticastLink])
def test_every_link_between_processes_has_the_control_plane(cls):
    assert mismatches(cls, ControlLink) == []


def test_the_in_process_transport_is_a_transport_without_a_control_plane():
    link = InProcessTransport(2)
    assert isinstance(link, Transport) and not isinstance(link, ControlLink)
    assert link.pace is None and link.control_bytes == 0


# ---- the check itself fails where it must


class _TakeWithoutTamper(CodedScheme):
    def take(self, link, worker, cache, need, *, placements, epoch, checksums, variable, out=None):  # type: ignore[override]
        raise AssertionError  # pragma: no cover


class _OfferSwapped(InProcessTransport):
    def offer(self, frames, worker):  # type: ignore[override]
        raise AssertionError  # pragma: no cover


class _PaceAMethod(InProcessTransport):
    def pace(self):  # type: ignore[override]
        return None  # pragma: no cover


def test_the_signature_check_finds_a_dropped_keyword_and_swapped_arguments():
    (take,) = mismatches(_TakeWithoutTamper, Scheme)
    assert take.startswith("take: ") and "tamper" not in take.split(" is not ")[0]
    assert isinstance(_TakeWithoutTamper(), Scheme)  # what isinstance alone would accept
    (offer,) = mismatches(_OfferSwapped, Transport)
    assert offer.startswith("offer: ")
    assert mismatches(_PaceAMethod, Transport) == ["pace: a method, declared a property"]


def test_the_signature_check_finds_a_missing_member():
    class NoCollect:
        K = 2

    missing = mismatches(NoCollect, Transport)
    assert "collect: missing" in missing and "send: missing" in missing
