"""Per-rank costs of MPI jobs of 16 to 256 ranks on one host: what grows with ``K``, what a rank holds.

Each job is ``coded-shuffle``'s MPI program (:mod:`coded_shuffle.mpi_program`) under ``mpiexec``,
oversubscribed (many ranks on two cores), with small records, every transition verified. Every
rank runs it through this file (``--rank DIR``), which measures, without changing what it does:

- ``import``: CPU seconds (user + system, the process so far) and resident memory (``VmRSS``)
  once the program is imported, before MPI starts and before any record;
- ``setup``: CPU seconds from the start of the process to the first transition (imports, MPI's
  start, records, checksums, the warm-up transition, which loads the kernels);
- ``plan``: CPU seconds of the main thread in the schemes' planning a transition (the coded plan
  and bound, the exchange's senders and rounds, the storage's plan), the rank's own;
- ``rounds`` and ``control``: the control plane's collective calls a transition (the leader's
  ``share``/``allgather``, the master's ``announce``/``gather_posts``, a worker's ``post``, barriers)
  and the bytes of the pickled objects they carry, sent and received by the rank;
- ``modules``: the heavy packages the ranks imported, each with the line of the program that first
  imported it and the number of ranks that did;
- ``peak``: the rank's peak resident memory (``VmHWM``) at the end; ``anon`` and ``shm`` its
  private (``RssAnon``) and shared-memory (``RssShmem``) resident pages then. The rest of the
  resident memory is file pages (the shared libraries: numba's LLVM alone is a file of 170 MB),
  which every rank on the host shares.

The table gives, per ``K`` and mode, the median and the largest over the ranks (the largest is the
master's or the leader's), the median seconds of a transition in the job's own table (``trans``),
and the ratio of each median to the smallest ``K``'s, against ``K``'s own ratio and ``K log K``'s.
Every job has ``--timeout``; each ``mpiexec`` a bound of its own. With ``--baseline DIR`` (a
checkout of another commit, ``git worktree add DIR COMMIT``) each job runs twice, its ranks
importing the package from ``DIR`` first (``base``), then from this checkout (``this``).

``--steps`` runs no job: a fresh process goes through a rank's steps (numpy, the program, MPI's
start, numba, a first transition, which loads the kernels, then transitions of 32 MB) and prints
its private memory and CPU after each, and a transition's seconds (``--repeat`` processes a code,
with ``--baseline`` the two codes in turn): what a rank's private memory is made of.

    python benchmarks/ranks_scale.py --workers 16,32,64,128 --modes coded,exchange,storage
    python benchmarks/ranks_scale.py --steps --baseline ../old --repeat 5

Target (the issue on clusters beyond one switch, item 4): jobs of 128 ranks verified with coded,
exchange and storage; per-rank setup and planning CPU growing no faster than ``K log K`` from 8 to
128 ranks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The jobs' options by mode: coded with a master (K + 1 ranks), exchange and storage among peers.
MODES: dict[str, list[str]] = {
    "coded": ["--mode", "coded"],
    "exchange": ["--mode", "exchange"],
    "storage": ["--mode", "exchange", "--storage", "2"],
    "coded-storage": ["--mode", "coded", "--storage", "2"],
}


#: The figures of a rank, in the table's order.
NAMES = ("import_s", "import_mb", "setup_s", "plan_s", "rounds", "control_kb", "peak_mb", "anon_mb", "shm_mb")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _size(value: Any) -> int:
    try:
        return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # pragma: no cover - an object pickle refuses: counted as nothing
        return 0


class _Meter:
    """The counters of one rank, and the wrappers that feed them."""

    def __init__(self) -> None:
        self.rounds = 0
        self.control = 0
        self.plan = 0.0
        self.marks: list[dict[str, float]] = []
        self._inside = False

    def mark(self) -> None:
        self.marks.append({"cpu": _cpu(), "plan": self.plan, "rounds": self.rounds, "control": self.control})

    def planning(self, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self._inside:  # a plan inside a plan (the exchange's report asks the coded one)
                return fn(*args, **kwargs)
            self._inside = True
            tic = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.plan += time.thread_time() - tic
                self._inside = False

        return wrapped

    def control_call(self, fn: Any, sent: Any, got: Any) -> Any:
        def wrapped(link: Any, *args: Any, **kwargs: Any) -> Any:
            out = fn(link, *args, **kwargs)
            self.rounds += 1
            self.control += sent(link, args) + got(link, out)
            return out

        return wrapped


def _instrument(meter: _Meter) -> None:
    from coded_shuffle.engine.schemes import _base, exchange, storage
    from coded_shuffle.engine.session import Session
    from coded_shuffle.transport.mpi import MPITransport

    def transition(fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            meter.mark()
            return fn(*args, **kwargs)

        return wrapped

    # a transition starts on every rank (master, worker, leader) at its session's transition
    Session.transition = transition(Session.transition)  # type: ignore[method-assign]
    planners = (
        (_base.SchemeBase, ("plan", "exchange_plan")),
        (exchange.ExchangeScheme, ("plan", "rounds")),
        (storage.StorageScheme, ("plan",)),
    )
    for cls, names in planners:
        for name in names:
            if name in vars(cls):
                setattr(cls, name, meter.planning(vars(cls)[name]))
    first = lambda link, args: _size(args[0]) if args else 0  # noqa: E731
    nothing = lambda link, x: 0  # noqa: E731
    each = lambda link, out: sum(_size(v) for v in out or [])  # noqa: E731
    MPITransport.share = meter.control_call(  # type: ignore[method-assign]
        MPITransport.share,
        lambda link, a: _size(a[0]) * (link.K if link.is_leader else 0) if a else 0,
        lambda link, out: 0 if link.is_leader else _size(out),
    )
    MPITransport.allgather = meter.control_call(MPITransport.allgather, first, each)  # type: ignore[method-assign]
    MPITransport.announce = meter.control_call(  # type: ignore[method-assign]
        MPITransport.announce, lambda link, a: _size(a[0]) * link.K, nothing
    )
    MPITransport.gather_posts = meter.control_call(MPITransport.gather_posts, lambda link, a: 0, each)  # type: ignore[method-assign]
    MPITransport.post = meter.control_call(MPITransport.post, first, lambda link, out: _size(out))  # type: ignore[method-assign]
    MPITransport.sync = meter.control_call(MPITransport.sync, lambda link, a: 0, nothing)  # type: ignore[method-assign]


#: The heavy packages whose first import on a rank is traced (the program's frame that asked).
HEAVY = ("numba", "scipy", "networkx", "galois", "llvmlite", "torch")


class _FirstImport:
    """A finder that finds nothing: it notes which line of the program first imports a heavy package."""

    def __init__(self) -> None:
        self.by: dict[str, str] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.partition(".")[0]
        if top in HEAVY and top not in self.by:
            import traceback

            frames = [f for f in traceback.extract_stack() if "coded_shuffle" in f.filename]
            self.by[top] = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        return None


def rank_main(out_dir: str, argv: list[str]) -> int:
    """One rank: the MPI program, measured; its figures to ``out_dir/<rank>.json``."""
    tracer = _FirstImport()
    sys.meta_path.insert(0, tracer)
    from coded_shuffle import mpi_program

    imported = {"cpu": _cpu(), "rss_kb": _status_kb("VmRSS")}
    meter = _Meter()
    _instrument(meter)
    code = 1
    try:
        code = mpi_program.main(argv)
    finally:
        meter.mark()
        from mpi4py import MPI

        heavy = sorted(f"{m}@{tracer.by.get(m, '?')}" for m in HEAVY if m in sys.modules)
        rank = MPI.COMM_WORLD.Get_rank()
        record = {"rank": rank, "import": imported, "marks": meter.marks, "hwm_kb": _status_kb("VmHWM"),
                  "rss_kb": _status_kb("VmRSS"), "anon_kb": _status_kb("RssAnon"),
                  "shmem_kb": _status_kb("RssShmem"), "modules": heavy, "code": code}  # fmt: skip
        Path(out_dir, f"{rank}.json").write_text(json.dumps(record))
    return code


def _job(
    K: int, mode: str, args: argparse.Namespace, out: str, code: Path
) -> tuple[float, str, dict[str, float]]:
    """One job of ``K`` workers whose ranks import the package from ``code``: its wall seconds,
    whether every transition verified, the median of the transitions' seconds (its table's), and
    the host's memory it took (the fall of the host's available memory, which other processes move
    too, and the rise of its shared memory). Killed, with every rank, past ``--job-timeout`` or
    when the host's available memory falls below ``--min-available`` GB."""
    ranks = K + (1 if mode.startswith("coded") else 0)
    N = args.records_per_worker * K
    argv = ["--points", str(N), "--record-bytes", str(args.record_bytes),
            "--transitions", str(args.transitions), "--timeout", str(args.timeout), *MODES[mode]]  # fmt: skip
    mpiexec = Path(sys.executable).with_name("mpiexec")
    cmd = [str(mpiexec), "-n", str(ranks), sys.executable, "-m", "mpi4py", __file__, "--rank", out, "--",
           *argv]  # fmt: skip
    tic = time.perf_counter()
    host = {"before": _meminfo_mb(), "least": _meminfo_mb()}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(code))
    stopped = ""
    while True:  # the host's memory watched every half second: the job stopped below --min-available
        try:
            stdout, stderr = proc.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            now = _meminfo_mb()
            host["least"] = {k: min(host["least"][k], now[k]) for k in now}
            host["most_shmem"] = max(host.get("most_shmem", 0.0), now["Shmem"])
            if now["MemAvailable"] < args.min_available * 1024:
                stopped = f"stopped: the host's available memory fell to {now['MemAvailable']:.0f} MB"
            elif time.perf_counter() - tic > args.job_timeout:
                stopped = f"mpiexec past {args.job_timeout} s"
            if stopped:
                _kill_tree(proc.pid)
                stdout, stderr = proc.communicate()
                break
    wall = time.perf_counter() - tic
    lines = [ln.split() for ln in stdout.splitlines()]
    verified = [ln for ln in lines if ln and ln[0].isdigit()]
    ok = proc.returncode == 0 and bool(verified) and all(ln[-1] == "yes" for ln in verified) and not stopped
    # a row ends "seconds MB/s repairs verified", as its header does
    seconds = [float(ln[-4]) for ln in verified if len(ln) >= 4]
    job = {
        "transition_s": statistics.median(seconds) if seconds else float("nan"),
        # what the job took of the host: the available memory's fall and the shared memory's rise
        "host_mb": host["before"]["MemAvailable"] - host["least"]["MemAvailable"],
        "host_shm_mb": host.get("most_shmem", host["before"]["Shmem"]) - host["before"]["Shmem"],
    }
    why = stopped or f"status {proc.returncode}"
    return wall, "yes" if ok else f"NO ({why}: {stderr.strip()[-300:]})", job


def _meminfo_mb() -> dict[str, float]:
    """The host's available memory and shared memory (``/proc/meminfo``), in MB."""
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("MemAvailable", "Shmem"):
            out[name] = int(value.split()[0]) / 1024
    return out


def _kill_tree(pid: int) -> None:
    """Kill ``pid`` and every process below it (mpiexec, its proxies, the ranks), by their ids."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _env(code: Path) -> dict[str, str]:
    """The environment of a process importing the package from ``code``."""
    return dict(os.environ, PYTHONPATH=str(code) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _compiled(code: Path) -> None:
    """Compile the kernels of ``code`` not cached yet, once, before any job (not on every rank)."""
    cmd = [sys.executable, "-c", "from coded_shuffle.warmup import compile_once; compile_once()"]
    subprocess.run(cmd, env=_env(code), check=True, timeout=900)


def _summary(out: str) -> dict[str, Any]:
    recs = [json.loads(p.read_text()) for p in Path(out).glob("*.json")]
    rows: dict[str, list[float]] = {k: [] for k in NAMES}
    modules: dict[str, int] = {}  # each heavy package's first import, and on how many ranks
    for r in recs:
        m = r["marks"]
        if len(m) < 3:  # the warm-up, then a transition at least, then the end
            continue
        per = len(m) - 2  # transitions after the warm-up (the end's mark is the last)
        first, last = m[1], m[-1]
        rows["import_s"].append(r["import"]["cpu"])
        rows["import_mb"].append(r["import"]["rss_kb"] / 1024)
        rows["setup_s"].append(first["cpu"])
        rows["plan_s"].append((last["plan"] - first["plan"]) / per)
        rows["rounds"].append((last["rounds"] - first["rounds"]) / per)
        rows["control_kb"].append((last["control"] - first["control"]) / per / 1024)
        rows["peak_mb"].append(r["hwm_kb"] / 1024)
        rows["anon_mb"].append(r["anon_kb"] / 1024)
        rows["shm_mb"].append(r["shmem_kb"] / 1024)
        for name in r["modules"]:
            modules[name] = modules.get(name, 0) + 1
    nan = (float("nan"), float("nan"))
    out_rows = {k: (statistics.median(v), max(v)) if v else nan for k, v in rows.items()}
    heavy = [f"{m} x{n}" for m, n in sorted(modules.items())]
    return {"ranks": len(recs), "figures": out_rows, "modules": heavy}


#: The steps of a rank, in one process (``--steps``): what its private memory is made of.
STEPS = ("python", "import numpy", "import the program", "MPI started", "import numba",
         "first transition", "transitions of 32 MB")  # fmt: skip


def steps_main() -> int:
    """One process through a rank's steps: after each, the private memory (``RssAnon``), the CPU
    seconds and the modules loaded; then the median seconds of a transition in process (``K = 8``,
    32768 records of 1 KiB, 5 transitions after the first) and whether numba's compiler was loaded."""
    rows: list[dict[str, float]] = []

    def step() -> None:
        rows.append({"anon_mb": _status_kb("RssAnon") / 1024, "cpu_s": _cpu(), "modules": len(sys.modules)})

    step()
    import numpy  # noqa: F401

    step()
    from coded_shuffle import mpi_program  # noqa: F401

    step()
    from mpi4py import MPI  # noqa: F401  (MPI starts: a singleton, as a rank's start)

    step()
    import numba  # noqa: F401

    step()
    from coded_shuffle.engine import simulate

    simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0)  # the kernels, loaded from the cache
    step()
    rep = simulate(K=8, N=32768, record_bytes=1024, epochs=6, seed=1)
    step()
    seconds = statistics.median(t.seconds for t in rep.transitions[1:])
    compiler = "numba.np.arraymath" in sys.modules
    print(json.dumps({"rows": rows, "transition_s": seconds, "verified": rep.verified, "compiler": compiler}))
    return 0


def _steps(codes: dict[str, Path], repeat: int) -> None:
    """``--steps``: a fresh process through a rank's steps, ``repeat`` times for each code, in turn."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
    for _ in range(repeat):
        for name, code in codes.items():
            cmd = [sys.executable, __file__, "--steps-child"]
            proc = subprocess.run(
                cmd, env=_env(code), capture_output=True, text=True, timeout=600, check=True
            )
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(
        f"{'step':<22}" + "".join(f"{n + ' anon MB':>16}{'+MB':>7}{'cpu s':>7}{'modules':>8}" for n in codes)
    )
    for i, label in enumerate(STEPS):
        cells = ""
        for name in codes:
            med = {
                k: statistics.median(r["rows"][i][k] for r in runs[name])
                for k in ("anon_mb", "cpu_s", "modules")
            }
            prev = statistics.median(r["rows"][i - 1]["anon_mb"] for r in runs[name]) if i else med["anon_mb"]
            grew = med["anon_mb"] - prev
            cells += f"{med['anon_mb']:>16.1f}{grew:>+7.1f}{med['cpu_s']:>7.2f}{med['modules']:>8.0f}"
        print(f"{label:<22}{cells}")
    for name in codes:
        secs = [r["transition_s"] for r in runs[name]]
        ok = all(r["verified"] for r in runs[name])
        print(f"{name}: a transition (K = 8, 32 MB) {statistics.median(secs):.4f} s, median of {repeat} "
              f"processes "
              f"({', '.join(f'{x:.4f}' for x in secs)}); verified: {ok}; numba's compiler loaded: "
              f"{any(r['compiler'] for r in runs[name])}")  # fmt: skip


def _jobs(
    args: argparse.Namespace, codes: dict[str, Path], Ks: list[int], modes: list[str]
) -> list[dict[str, Any]]:
    """The jobs: for each mode and ``K``, one job a code (the baseline first), a row each."""
    names = NAMES
    head = (
        f"{'mode':<14}{'code':>5}{'K':>5}{'ranks':>6}{'wall s':>8}{'trans s':>8}{'host MB':>8}{'shm MB':>8}"
    )
    print(head + "  "
          + "".join(f"{n + ' med/max':>22}" for n in names) + "  verified")  # fmt: skip
    rows = []
    for mode in modes:
        base: dict[str, dict[str, float]] = {}
        K0 = Ks[0]
        for K in Ks:
            for name, code in codes.items():
                with tempfile.TemporaryDirectory() as out:
                    wall, ok, job = _job(K, mode, args, out, code)
                    s = _summary(out)
                fig = s["figures"]
                cells = "".join(f"{fig[n][0]:>11.3g}/{fig[n][1]:<10.3g}" for n in names)
                host = f"{job['host_mb']:>8.0f}{job['host_shm_mb']:>8.0f}"
                row = f"{mode:<14}{name:>5}{K:>5}{s['ranks']:>6}{wall:>8.1f}{job['transition_s']:>8.4f}{host}"
                print(f"{row}  {cells}  {ok}", flush=True)
                b = base.setdefault(name, {n: fig[n][0] for n in names})
                growth = {
                    n: fig[n][0] / b[n] if b[n] else float("nan") for n in ("setup_s", "plan_s", "control_kb")
                }
                klogk = K * math.log(K) / (K0 * math.log(K0))
                grew = ", ".join(f"{n} x{g:.2f}" for n, g in growth.items())
                print(f"{'':<24}growth from K = {K0}: K x{K / K0:.1f}, K log K x{klogk:.1f}; {grew}; "
                      f"modules: {','.join(s['modules'])}", flush=True)  # fmt: skip
                rows.append({"mode": mode, "code": name, "K": K, "wall_s": wall, "verified": ok, **job, **s})
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--rank":
        return rank_main(argv[1], argv[3:] if len(argv) > 2 and argv[2] == "--" else argv[2:])
    if argv and argv[0] == "--steps-child":
        return steps_main()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="16,32,64,128", help="K of the jobs (default 16,32,64,128)")
    parser.add_argument("--modes", default="coded,exchange,storage", help=f"of {','.join(MODES)}")
    parser.add_argument("--records-per-worker", type=int, default=20, help="N / K (default 20)")
    parser.add_argument("--record-bytes", type=int, default=64, help="bytes a record (default 64)")
    parser.add_argument("--transitions", type=int, default=2, help="transitions a job (default 2)")
    parser.add_argument("--timeout", type=float, default=300, help="each job's --timeout (default 300 s)")
    parser.add_argument("--job-timeout", type=float, default=900, help="each mpiexec's bound (900 s)")
    parser.add_argument("--min-available", type=float, default=3.0, metavar="GB", help="a job is killed "
                        "when the host's available memory falls below this (default 3 GB)")  # fmt: skip
    parser.add_argument("--baseline", metavar="DIR", help="a checkout of another commit: each job run with "
                        "its package too, before this one's (the rows' code: base, then this)")  # fmt: skip
    parser.add_argument("--steps", action="store_true", help="no jobs: a rank's steps in one process, "
                        "private memory and CPU after each, and a transition's seconds")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="processes a code with --steps (default 3)")
    parser.add_argument("--json", help="write the rows to this file too")
    args = parser.parse_args(argv)
    Ks = [int(k) for k in args.workers.split(",")]
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            parser.error(f"--modes: {m!r} is not one of {', '.join(MODES)}")
    codes = {"this": ROOT}
    if args.baseline:
        if not Path(args.baseline, "coded_shuffle", "__init__.py").is_file():
            parser.error(f"--baseline: {args.baseline!r} holds no coded_shuffle package")
        codes = {"base": Path(args.baseline).resolve(), "this": ROOT}
    for code in codes.values():
        _compiled(code)
    if args.steps:
        _steps(codes, args.repeat)
        return 0
    rows = _jobs(args, codes, Ks, modes)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
