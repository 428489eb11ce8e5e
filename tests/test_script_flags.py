"""Every script's flags are what users' launch scripts were written against: the name, type,
default, help text and enum values of each flag of each top-level script equal the record in
tests/golden/script_flags.json, taken at 8b6a78f (before the flags moved onto the configs).
A deliberate change edits that record in the same commit, and the commit says why."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "golden", "script_flags.json")

# Imports the script (which defines its flags and nothing else at import time) and prints every
# flag it added to absl's own, with what `--help` shows of it.
_DUMP = r"""
import json, runpy, sys
from absl import flags
import absl.app, absl.logging
base = set(flags.FLAGS)
runpy.run_path(sys.argv[1], run_name="flag_dump")
out = {}
for name in sorted(set(flags.FLAGS) - base):
    f = flags.FLAGS[name]
    if f.name == name:
        enum = getattr(f.parser, "enum_values", None)
        out[name] = {"type": f.flag_type(), "default": f.default, "help": f.help,
                     "enum": list(enum) if enum else None}
json.dump(out, sys.stdout, sort_keys=True)
"""


def script_flags(script: str) -> dict:
    """name -> {type, default, help, enum} of every flag `script` defines."""
    out = subprocess.run([sys.executable, "-c", _DUMP, os.path.join(REPO, script)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


with open(GOLDEN, encoding="utf-8") as f:
    RECORDED = json.load(f)


@pytest.mark.parametrize("script", sorted(RECORDED))
def test_flags_defaults_and_help_are_unchanged(script):
    now = script_flags(script)
    before = RECORDED[script]
    assert sorted(now) == sorted(before), (
        f"{script}: flags added {sorted(set(now) - set(before))}, "
        f"removed {sorted(set(before) - set(now))}")
    changed = {name: (before[name], now[name]) for name in before if now[name] != before[name]}
    assert not changed, f"{script}: {changed}"


def test_every_script_is_recorded():
    """A new script records its flags here too (what its users will write scripts against)."""
    scripts = {name for name in os.listdir(REPO) if name.endswith(".py")}
    assert scripts == set(RECORDED), sorted(scripts ^ set(RECORDED))
