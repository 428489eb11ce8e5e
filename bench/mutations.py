"""The mutation check: does each claim's guarding test fail when the code behind it is broken?

Run by hand, not by `make test` (`make mutations`, or `python bench/mutations.py`). Each row of
bench/mutations.toml is a one-line defect: a file, an exact snippet of it (found exactly once),
its replacement, the test node ids that guard it and why. For each row this script copies the
checkout (tracked and untracked files, as they are now: uncommitted work included) to a
temporary folder, applies that one replacement, runs only the row's tests there and reports:

  killed     a guarding test failed: the claim is held by a test
  survived   every guarding test passed (or skipped) with the defect in: a hole
  pending    survived, and the row says why it is expected to for now (`pending = "..."`)
  unpending  a pending row was killed: drop its `pending`
  error      the snippet is not in the file exactly once, or pytest could not run the tests
             (exit code other than 0/1, e.g. a node id that does not exist)

Before the mutations the union of all rows' tests runs once on the unmutated copy (skip with
--no_baseline): a test that fails there would make every row it guards look killed.

Exit code 0 only when no row survived unmarked, none errored and the baseline passed.

Standard library only (tomllib: Python >= 3.11); the tests run with the project's .venv.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(REPO, "bench", "mutations.toml")
# Linked into each copy, not copied: the virtualenvs (shared, large).
LINKED = (".venv", ".venv-oracle")


def read_rows(path):
    """The rows of the list, each a dict with id, file, original, replacement, tests, why and
    optionally pending; raises ValueError naming the row and the missing key."""
    with open(path, "rb") as f:
        rows = tomllib.load(f).get("mutation", [])
    ids = set()
    for i, row in enumerate(rows):
        for key in ("id", "file", "original", "replacement", "tests", "why"):
            if key not in row:
                raise ValueError(f"{path}: mutation #{i + 1} has no {key!r}")
        if row["id"] in ids:
            raise ValueError(f"{path}: mutation id {row['id']!r} given twice")
        if row["original"] == row["replacement"]:
            raise ValueError(f"{path}: mutation {row['id']!r} replaces its snippet by itself")
        ids.add(row["id"])
    return rows


def checkout_files(repo):
    """The checkout's files as git sees them now: tracked and untracked, not ignored."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=repo, check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(repo, p))]


def copy_checkout(repo, files, dest):
    for rel in files:
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(repo, rel), target)
    for name in LINKED:
        if os.path.exists(os.path.join(repo, name)):
            os.symlink(os.path.realpath(os.path.join(repo, name)), os.path.join(dest, name))


def apply(row, root):
    """Replaces the row's snippet in its file under `root`; returns None, or why it could not
    (the snippet absent or found more than once: the list is stale)."""
    path = os.path.join(root, row["file"])
    if not os.path.isfile(path):
        return f"no file {row['file']}"
    with open(path, encoding="utf-8") as f:
        text = f.read()
    count = text.count(row["original"])
    if count != 1:
        return f"snippet found {count} times in {row['file']} (must be exactly once)"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(row["original"], row["replacement"]))
    return None


def run_tests(root, tests, timeout, verbose):
    """(pytest's exit code, its output's tail) for `tests` run in the copy at `root`."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2",
               BERT_MGPU_MATERIAL=os.environ.get("BERT_MGPU_MATERIAL", _material()))
    env.setdefault("BERT_MGPU_ORACLE_PYTHON", os.path.join(root, ".venv-oracle", "bin", "python"))
    env.pop("PYTHONPATH", None)  # the copy's bert_mgpu, not the checkout's
    cmd = [os.path.join(root, ".venv", "bin", "python"), "-m", "pytest", "-q", "-x",
           "-p", "no:cacheprovider", *tests]
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout} s"
    if verbose:
        sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-2000:])
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))][:1]
    return proc.returncode, " | ".join(failed + lines[-1:])


def _material():
    """The material folder the checkout's tests would find (tests/_oracle.py's order)."""
    for path in (os.path.join(os.path.dirname(REPO), "shared", "material"),
                 "/work/shared/material"):
        if os.path.isdir(path):
            return path
    return ""


def outcome(row, code):
    if code == 1:
        return "unpending" if row.get("pending") else "killed"
    if code == 0:
        return "pending" if row.get("pending") else "survived"
    return "error"


def check_row(row, files, timeout, verbose):
    """(outcome, seconds, detail) of one mutation, in a copy of its own."""
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="mutation-") as root:
        copy_checkout(REPO, files, root)
        problem = apply(row, root)
        if problem:
            return "error", time.time() - start, problem
        code, tail = run_tests(root, row["tests"], timeout, verbose)
    return outcome(row, code), time.time() - start, f"pytest exit {code}: {tail}"


def baseline(rows, files, timeout, verbose):
    """(passed, seconds, detail): every row's tests on the unmutated copy."""
    tests = sorted({t for row in rows for t in row["tests"]})
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="mutation-baseline-") as root:
        copy_checkout(REPO, files, root)
        code, tail = run_tests(root, tests, timeout * len(rows), verbose)
    return code == 0, time.time() - start, f"pytest exit {code}: {tail}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", default=LIST, help="the mutation list (TOML)")
    parser.add_argument("--only", default="", help="comma-separated ids to run (default all)")
    parser.add_argument("--no_baseline", action="store_true",
                        help="skip the run of all guarding tests on the unmutated copy")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per mutation")
    parser.add_argument("--verbose", action="store_true", help="print pytest's output")
    args = parser.parse_args(argv)
    rows = read_rows(args.list)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {r["id"] for r in rows}
        if unknown:
            parser.error(f"--only: no mutation {', '.join(sorted(unknown))} in {args.list}")
        rows = [r for r in rows if r["id"] in wanted]
    files = checkout_files(REPO)
    start = time.time()
    ok = True
    if not args.no_baseline:
        passed, seconds, detail = baseline(rows, files, args.timeout, args.verbose)
        print(f"{'baseline':<32} {'passed' if passed else 'FAILED':<10} {seconds:7.1f} s  "
              f"{detail}", flush=True)
        ok = passed
    counts = {}
    for row in rows:
        result, seconds, detail = check_row(row, files, args.timeout, args.verbose)
        counts[result] = counts.get(result, 0) + 1
        ok = ok and result in ("killed", "pending")
        print(f"{row['id']:<32} {result:<10} {seconds:7.1f} s  {detail}", flush=True)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"{len(rows)} mutations: {summary}; {time.time() - start:.0f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
