"""Where the suite's CPU time goes, per test and per file (opt-in; off unless asked for).

    BERT_MGPU_TEST_CPU_REPORT=/tmp/cpu make test      # or any pytest run of tests/
    python tests/_cpu_report.py /tmp/cpu              # per file, then the slowest tests

Wall times (pytest's --durations) mean little on a shared machine or under `-n 2`, where a
test waits for a core; CPU seconds add up the same whatever else runs. Each test is charged
the CPU time, from its setup's start to its teardown's end, of the pytest process, of the
processes it started and reaped (scripts, oracles), and of its live children (the zygote of
tests/_zygote.py, which reaps the scripts it forks). A module fixture's background runs
(tests/_together.py) are charged to the tests during which they run or end, so compare files
rather than single tests of such a file. Each pytest process (each xdist worker) writes
`REPORT.<worker>` (`REPORT.main` without xdist): `cpu_s<TAB>wall_s<TAB>nodeid` lines.
"""

import collections
import glob
import os
import sys
import time

_TICKS = os.sysconf("SC_CLK_TCK")


def _times(pid):
    """(parent pid, utime + stime + cutime + cstime in ticks) of process `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        # The fields after the command name (which may hold spaces and parentheses).
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def cpu_seconds():
    """CPU seconds of this process, its reaped children and its live children (with theirs)."""
    me = os.getpid()
    total = _times(me)[1]
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                parent, ticks = _times(name)
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile, or not readable
            if parent == me:
                total += ticks
    return total / _TICKS


class CpuReport:
    """The pytest plugin: one line per test into `path`.<worker>."""

    def __init__(self, path):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.path = f"{path}.{worker}"
        self.rows = []

    # pytest passes a hook only the arguments it names.
    def pytest_runtest_protocol(self):
        self._start = (cpu_seconds(), time.time())

    def pytest_runtest_logfinish(self, nodeid):
        start = getattr(self, "_start", None)
        if start is None:  # xdist's controller: it relays the workers' reports, runs no test
            return
        cpu, wall = start
        self.rows.append((cpu_seconds() - cpu, time.time() - wall, nodeid))

    def pytest_sessionfinish(self):
        if not self.rows:  # xdist's controller runs no test
            return
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(f"{cpu:.2f}\t{wall:.2f}\t{nodeid}\n" for cpu, wall, nodeid in self.rows)


def register(config):
    """Registers the plugin when BERT_MGPU_TEST_CPU_REPORT names a report (from conftest)."""
    path = os.environ.get("BERT_MGPU_TEST_CPU_REPORT")
    if path:
        config.pluginmanager.register(CpuReport(path), "bert_mgpu_cpu_report")


def summary(prefix, top=30):
    """Per file (CPU seconds, wall seconds, tests), heaviest first, then the `top` tests."""
    rows = []
    for path in sorted(glob.glob(glob.escape(prefix) + ".*")):
        with open(path, encoding="utf-8") as f:
            rows += [(float(cpu), float(wall), nodeid)
                     for cpu, wall, nodeid in (line.rstrip("\n").split("\t", 2) for line in f)]
    files = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for cpu, wall, nodeid in rows:
        entry = files[nodeid.split("::")[0]]
        entry[0] += cpu
        entry[1] += wall
        entry[2] += 1
    lines = [f"{'CPU s':>8} {'wall s':>8} {'tests':>5}  file"]
    lines += [f"{cpu:8.1f} {wall:8.1f} {n:5d}  {name}" for name, (cpu, wall, n) in
              sorted(files.items(), key=lambda kv: -kv[1][0])]
    lines += [f"{sum(e[0] for e in files.values()):8.1f} {'':8} {len(rows):5d}  all", "",
              f"{'CPU s':>8} {'wall s':>8}  the {top} heaviest tests"]
    lines += [f"{cpu:8.1f} {wall:8.1f}  {nodeid}"
              for cpu, wall, nodeid in sorted(rows, key=lambda r: -r[0])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/_cpu_report.py REPORT  (BERT_MGPU_TEST_CPU_REPORT's value)")
    print(summary(sys.argv[1]))
