"""Replay transfer plans on SimGrid: run as a script, a plan in JSON on standard input, the
simulated seconds of each mode in JSON on standard output.

This file imports nothing of the package: :mod:`coded_shuffle.engine.replay` runs it by its path
in a process of its own (SimGrid's engine can be made once a process), so the simulation starts
without loading the library. Its input (made by ``replay``)::

    {"platform": {"K": K, "master": Bps or null, "up": Bps, "down": Bps, "latency": s,
                  "racks": null or {"hosts": h, "up": Bps, "down": Bps}},
     "modes": {name: [track, ...]}}

Rates in bytes a second. A mode's tracks run at once and the mode ends when all have; a track is
a list of steps run in order, each ending when all its transfers have:

- ``{"flows": [[src, ...], [dst, ...], [bytes, ...]]}``: unicasts at once (``-1`` the master,
  ``0 .. K-1`` the workers), each a flow of the fluid model sharing its links max-min;
- ``{"multicast": bytes, "heard": [bytes of each worker]}``: the master's multicast, a parallel
  task in which the master's uplink carries ``bytes`` once, the switch (and each rack's downlink,
  where there are racks) replicates them, and worker ``j``'s downlink carries ``heard[j]``.

The platform: a star (one switch) whose every host has a split-duplex link (an uplink and a
downlink) of the given rates, or, with racks, workers in racks of ``hosts`` under a switch each,
every rack joined to the core by a split-duplex uplink, the master on the core. The network model
is ``ptask_L07`` (needed for the parallel tasks, and used for every mode alike): max-min sharing of
each link's rate, a transfer's time its bytes over its share plus its route's latency.
"""

from __future__ import annotations

import json
import sys
import time

#: Where Debian's ``python3-simgrid`` puts its module (a build for CPython 3.11).
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
#: The rate of the links of the replicating hosts of a multicast: never the bottleneck.
_FAT = 1e15


def _import_simgrid():  # type: ignore[no-untyped-def]
    try:
        import simgrid
    except ImportError:
        sys.path.append(DEBIAN_DIST_PACKAGES)
        import simgrid
    return simgrid


def _platform(sg, p):  # type: ignore[no-untyped-def]
    """The hosts: (master or None, [workers], core replicator, [rack replicators] or None)."""
    K, lat = p["K"], p["latency"]

    def host(zone, name, up, down):  # type: ignore[no-untyped-def]
        h = zone.create_host(name, 1e9).seal()
        lu = zone.create_link(name + "-up", up).set_latency(lat).seal()
        ld = zone.create_link(name + "-down", down).set_latency(lat).seal()
        zone.add_route(h.netpoint, None, None, None,
                       [sg.LinkInRoute(lu, sg.LinkInRoute.UP)], False)  # fmt: skip
        zone.add_route(None, h.netpoint, None, None,
                       [sg.LinkInRoute(ld, sg.LinkInRoute.UP)], False)  # fmt: skip
        return h

    racks = p["racks"]
    if not racks:
        core = sg.NetZone.create_star_zone("core")
        master = host(core, "master", p["master"], p["down"]) if p["master"] else None
        replicator = host(core, "replicator", _FAT, _FAT)
        workers = [host(core, f"w{j}", p["up"], p["down"]) for j in range(K)]
        core.seal()
        return master, workers, replicator, None
    # With racks, one zone routed by shortest paths over routers: a switch a rack, and the core.
    # (Racks as zones of their own under a star misroute from the core's hosts in SimGrid 3.32.)
    net = sg.NetZone.create_dijkstra_zone("fabric")
    center = net.create_router("core")

    def attach(name, router, up, down):  # type: ignore[no-untyped-def]
        h = net.create_host(name, 1e9).seal()
        link(h.netpoint, router, name, up, down)
        return h

    def link(a, b, name, up, down):  # type: ignore[no-untyped-def]
        lu = net.create_link(name + "-up", up).set_latency(lat).seal()
        ld = net.create_link(name + "-down", down).set_latency(lat).seal()
        net.add_route(a, b, None, None, [sg.LinkInRoute(lu, sg.LinkInRoute.UP)], False)
        net.add_route(b, a, None, None, [sg.LinkInRoute(ld, sg.LinkInRoute.UP)], False)

    workers, rack_replicators = [], []
    h = racks["hosts"]
    for r in range(-(-K // h)):
        switch = net.create_router(f"rack{r}")
        link(switch, center, f"rack{r}", racks["up"], racks["down"])
        for j in range(r * h, min(K, (r + 1) * h)):
            workers.append(attach(f"w{j}", switch, p["up"], p["down"]))
        rack_replicators.append(attach(f"rack{r}-replicator", switch, _FAT, _FAT))
    master = attach("master", center, p["master"], p["down"]) if p["master"] else None
    replicator = attach("replicator", center, _FAT, _FAT)
    net.seal()
    return master, workers, replicator, rack_replicators


def main() -> None:
    plan = json.load(sys.stdin)
    sg = _import_simgrid()
    engine = sg.Engine(["replay", "--cfg=host/model:ptask_L07", "--log=root.thres:critical",
                        "--cfg=contexts/factory:thread"])  # fmt: skip
    p = plan["platform"]
    master, workers, replicator, rack_replicators = _platform(sg, p)
    K = p["K"]

    def at(i: int):  # type: ignore[no-untyped-def]
        return master if i < 0 else workers[i]

    def multicast(nbytes: float, heard: list[float]) -> None:
        hosts = [master, replicator, *(rack_replicators or []), *workers]
        n = len(hosts)
        first = n - K
        amounts = [0.0] * (n * n)
        amounts[0 * n + 1] = nbytes
        if rack_replicators is None:
            for j in range(K):
                amounts[1 * n + first + j] = heard[j]
        else:
            h = p["racks"]["hosts"]
            for r in range(len(rack_replicators)):
                members = range(r * h, min(K, (r + 1) * h))
                amounts[1 * n + 2 + r] = max(heard[j] for j in members)
                for j in members:
                    amounts[(2 + r) * n + first + j] = heard[j]
        sg.this_actor.parallel_execute(hosts, [0.0] * n, amounts)

    flows = [0]

    def track(steps: list[dict]) -> None:
        for step in steps:
            if "multicast" in step:
                multicast(step["multicast"], step["heard"])
                continue
            src, dst, size = step["flows"]
            comms = [
                sg.Comm.sendto_async(at(s), at(d), int(b))
                for s, d, b in zip(src, dst, size, strict=True)
                if b > 0
            ]
            flows[0] += len(comms)
            sg.Comm.wait_all(comms)

    seconds: dict[str, float] = {}

    def driver() -> None:
        for name, tracks in plan["modes"].items():
            start = engine.clock
            actors = [sg.Actor.create(f"{name}-{i}", replicator, track, t) for i, t in enumerate(tracks)]
            for a in actors:
                a.join()
            seconds[name] = engine.clock - start

    sg.Actor.create("driver", replicator, driver)
    wall = time.perf_counter()
    engine.run()
    json.dump({"seconds": seconds, "flows": flows[0], "wall_seconds": time.perf_counter() - wall}, sys.stdout)


if __name__ == "__main__":
    main()
