"""Start-up cost: ``import coded_shuffle`` and ``coded-shuffle --help`` against ``import numpy``.

Each command runs in a fresh interpreter, the three alternated ``--repeat`` times (default 15), and
its CPU seconds (user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``) are taken; CPU
seconds move less than wall time on a shared machine. Reported: the median of each and the ratio
of the medians to ``import numpy``'s. A fourth row, a bare ``python -c pass``, is the floor every
command pays.

Target (the issue on what a newcomer trips on, item 7): ``--help`` and ``import coded_shuffle``
each at most 1.5 x the CPU of ``import numpy``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import numpy": [sys.executable, "-c", "import numpy"],
    "import coded_shuffle": [sys.executable, "-c", "import coded_shuffle"],
    "coded-shuffle --help": [sys.executable, "-m", "coded_shuffle", "--help"],
}


def cpu_seconds(cmd: list[str]) -> float:
    """CPU seconds (user + system) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command (default 15)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for cmd in COMMANDS.values():  # one untimed run each: the file cache warm for all
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=120)
    for _ in range(args.repeat):
        for name, cmd in COMMANDS.items():
            times[name].append(cpu_seconds(cmd))
    base = statistics.median(times["import numpy"])
    print(f"{'command':<24}{'median CPU s':>14}{'/ import numpy':>16}")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:<24}{median:>14.3f}{median / base:>16.2f}")
    worst = max(statistics.median(times[n]) for n in ("import coded_shuffle", "coded-shuffle --help"))
    verdict = "met" if worst <= 1.5 * base else "not met"
    print(f"target <= 1.5 x import numpy: {verdict} ({worst / base:.2f} x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
