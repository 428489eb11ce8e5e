"""Which `--max_isa` cap takes effect, library by library, on this host: a check, not a benchmark.

Run by hand (about a minute on 2 cores; the numbers of --rates only mean something on an idle
machine):

    .venv/bin/python bench/isa_caps.py                   # native vs --max_isa=avx2
    .venv/bin/python bench/isa_caps.py --max_isa avx512 --rates

Each library is started twice in a small subprocess, in the environment bench/_common.py's
isa_environment gives both arms of a bench: once uncapped ("native"), once under the cap. Each
does a few matmuls and an element-wise op and reports what the library itself says it runs:

  - ours (.venv, TensorFlow): oneDNN's ISA and the implementation of each primitive
    (ONEDNN_VERBOSE=1), whether TensorFlow's oneDNN operations are on (TF_ENABLE_ONEDNN_OPTS),
    the AVX-512 (EVEX-encoded) instructions in the kernels XLA generates for a fused
    element-wise function (objdump of the object files --xla_dump_to writes), and the
    instructions TensorFlow's own (Eigen) kernels were compiled without (its start-up log).
    Not checked here, because no variable caps it: the kernel YNNPACK picks for a dot inside an
    XLA-compiled function (`perf record` names it, e.g. ynn::dot_fp32_..._avx512f);
  - the peer (.venv-oracle, PyTorch): ATen's CPU capability, MKL's code path (MKL_VERBOSE=1)
    and oneDNN's (ONEDNN_VERBOSE=1);
  - numpy (both): the dispatch targets in use and OpenBLAS's kernel (OPENBLAS_VERBOSE=2).

With --rates, each arm also times a 1024 x 1024 float32 matmul on one thread (CPU time, best of
5 runs of 10), as evidence that a cap changes the speed, not as a figure to quote. Prints a
Markdown table; docs/benchmarks.md ("Capping the instruction set") keeps one with its date.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ISA_CAPS, REPO, host_isa, isa_environment, machine  # noqa: E402

# A float32 matmul's rate in GFLOP per CPU-second on one thread, best of 5 runs of 10 (`mm` does
# one matmul of a by a): CPU time, not wall time, so that other work on a shared host changes it
# little.
_RATE = """
def rate(mm, a, n=1024):
    mm(a)
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(10):
            mm(a)
        best = min(best, time.process_time() - t)
    return 2.0 * n ** 3 * 10 / best / 1e9
"""

OURS = """
import json, sys, time
import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port
""" + _RATE + """
tf.config.threading.set_intra_op_parallelism_threads(1 if sys.argv[1] == "rates" else 0)
a = tf.random.normal([256, 256])
tf.matmul(a, a)
tf.matmul(tf.reshape(a, [4, 64, 256]), tf.reshape(a, [4, 256, 64]))
fused = tf.function(lambda x: tf.nn.gelu(x) * 2.0 + x, jit_compile=True)
fused(a)
out = {"onednn_opts": bool(_pywrap_util_port.IsMklEnabled())}
if sys.argv[1] == "rates":
    b = tf.random.normal([1024, 1024])
    out["rate"] = rate(lambda x: tf.matmul(x, x).numpy(), b)
print("RESULT " + json.dumps(out))
"""

PEER = """
import json, sys, time
import torch
""" + _RATE + """
a = torch.randn(256, 256)
torch.mm(a, a)
torch.mm(a.bfloat16(), a.bfloat16())
torch.nn.functional.gelu(a)
out = {"aten": torch.backends.cpu.get_cpu_capability()}
if sys.argv[1] == "rates":
    torch.set_num_threads(1)
    out["rate"] = rate(lambda x: torch.mm(x, x), torch.randn(1024, 1024))
print("RESULT " + json.dumps(out))
"""

NUMPY = """
import json
import numpy as np
from numpy._core import _multiarray_umath as m
np.ones((64, 64)) @ np.ones((64, 64))
used = [f for f in m.__cpu_dispatch__ if m.__cpu_features__.get(f)]
print("RESULT " + json.dumps({"numpy": " ".join(used)}))
"""

# EVEX-encoded (AVX-512) instructions in objdump's text: a zmm register, a mask register, one of
# the 16 vector registers only EVEX can name, or an embedded broadcast.
_EVEX = re.compile(r"%zmm|%k[1-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|\{1to\d+\}")


def run(python, code, env, mode):
    """(stdout + stderr, the RESULT dict) of `code` run by `python` in `env`."""
    proc = subprocess.run([python, "-c", code, mode], env=env, cwd=REPO, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    result = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return proc.stdout, json.loads(result[len("RESULT "):])


def onednn_text(log):
    """oneDNN's ISA and the implementations of the matmul/eltwise primitives it ran."""
    isa = re.search(r"onednn_verbose,[^\n]*,cpu,isa:([^\n]*)", log)
    kinds = sorted({f"{m.group(1)} {m.group(2) or '(sgemm API)'}" for m in re.finditer(
        r"onednn_verbose,v1,primitive,exec,cpu,(matmul|eltwise|gemm_api),([^,]*)", log)})
    return f"isa: {isa.group(1) if isa else 'not started'}; " + ", ".join(kinds)


def evex_count(dump_dir):
    """AVX-512 instructions in the object files XLA dumped to `dump_dir` (None: no objdump)."""
    if not shutil.which("objdump"):
        return None
    count = 0
    for path in glob.glob(os.path.join(dump_dir, "*.o")):
        text = subprocess.run(["objdump", "-d", path], check=True, stdout=subprocess.PIPE,
                              text=True).stdout
        count += sum(1 for line in text.splitlines() if _EVEX.search(line))
    return count


def check_ours(python, env, mode):
    """The TensorFlow arm's facts under `env`."""
    with tempfile.TemporaryDirectory(prefix="isa_caps_xla_") as dump:
        env = dict(env, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="0",
                   XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip())
        log, out = run(python, OURS, env, mode)
        out["evex"] = evex_count(dump)
    out["onednn"] = onednn_text(log)
    guard = re.search(r"To enable the following instructions: ([A-Z0-9_ ]+)", log)
    out["eigen_without"] = guard.group(1).strip() if guard else "(no start-up note)"
    return out


def check_peer(python, env, mode):
    """The PyTorch arm's facts under `env`."""
    log, out = run(python, PEER, dict(env, ONEDNN_VERBOSE="1", MKL_VERBOSE="1"), mode)
    mkl = re.search(r"MKL_VERBOSE oneMKL[^\n]*? architecture (.*?), Lnx", log)
    out["mkl"] = mkl.group(1) if mkl else "(no MKL call seen)"
    out["onednn"] = onednn_text(log)
    return out


def check_numpy(python, env):
    log, out = run(python, NUMPY, dict(env, OPENBLAS_VERBOSE="2"), "facts")
    core = re.search(r"Core: (\w+)", log)
    out["openblas"] = core.group(1) if core else "(not reported)"
    return out


def rows(facts, cap):
    """The Markdown table's rows: (what, cap, native, capped) from both arms' facts."""
    n, c = facts["native"], facts[cap]
    _, caps, onednn_opts = ISA_CAPS[cap]
    xla = "objdump not found" if n["ours"]["evex"] is None else None
    table = [
        ("oneDNN in TensorFlow (ours)", f"ONEDNN_MAX_CPU_ISA={caps['ONEDNN_MAX_CPU_ISA']}",
         n["ours"]["onednn"], c["ours"]["onednn"]),
        ("TensorFlow's oneDNN operations (ours)",
         f"TF_ENABLE_ONEDNN_OPTS={onednn_opts or '(unset)'}",
         "on" if n["ours"]["onednn_opts"] else "off", "on" if c["ours"]["onednn_opts"] else "off"),
        ("XLA's generated kernels (ours): AVX-512 instructions",
         f"--xla_cpu_max_isa={caps['--xla_cpu_max_isa']}",
         xla or n["ours"]["evex"], xla or c["ours"]["evex"]),
        ("TensorFlow's Eigen kernels (ours): compiled without", "none",
         n["ours"]["eigen_without"], c["ours"]["eigen_without"]),
        ("ATen's kernels (peer)", f"ATEN_CPU_CAPABILITY={caps['ATEN_CPU_CAPABILITY']}",
         n["peer"]["aten"], c["peer"]["aten"]),
        ("MKL, torch's BLAS (peer)", f"MKL_ENABLE_INSTRUCTIONS={caps['MKL_ENABLE_INSTRUCTIONS']}",
         n["peer"]["mkl"], c["peer"]["mkl"]),
        ("oneDNN in torch (peer)", f"ONEDNN_MAX_CPU_ISA={caps['ONEDNN_MAX_CPU_ISA']}",
         n["peer"]["onednn"], c["peer"]["onednn"]),
        ("numpy's dispatch targets (both)",
         f"NPY_DISABLE_CPU_FEATURES={caps['NPY_DISABLE_CPU_FEATURES']}",
         n["numpy"]["numpy"], c["numpy"]["numpy"]),
        ("OpenBLAS, numpy's BLAS (both)", f"OPENBLAS_CORETYPE={caps['OPENBLAS_CORETYPE']}",
         n["numpy"]["openblas"], c["numpy"]["openblas"]),
    ]
    if "rate" in n["ours"]:
        for arm, name in (("ours", "TensorFlow"), ("peer", "torch")):
            table.append((f"{name}: 1024 x 1024 float32 matmul, GFLOP per CPU-second, "
                          "1 thread", "all of the above",
                          f"{n[arm]['rate']:.0f}", f"{c[arm]['rate']:.0f}"))
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max_isa", choices=sorted(ISA_CAPS), default="avx2",
                        help="the cap compared with the uncapped host")
    parser.add_argument("--rates", action="store_true", help="also time one matmul per arm")
    parser.add_argument("--peer_python", default=os.environ.get(
        "BERT_MGPU_ORACLE_PYTHON", os.path.join(REPO, ".venv-oracle", "bin", "python")))
    args = parser.parse_args()
    with open("/proc/cpuinfo") as f:
        host = host_isa(f.read())
    mode = "rates" if args.rates else "facts"
    facts = {}
    for cap in ("native", args.max_isa):
        env = isa_environment(cap, host, os.environ)
        facts[cap] = {"ours": check_ours(sys.executable, env, mode),
                      "peer": check_peer(args.peer_python, env, mode),
                      "numpy": check_numpy(sys.executable, env)}
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f}.\n")
    print(f"| library (arm) | cap | native | --max_isa={args.max_isa} |")
    print("|---|---|---|---|")
    for row in rows(facts, args.max_isa):
        print("| " + " | ".join(str(x) for x in row) + " |")


if __name__ == "__main__":
    main()
