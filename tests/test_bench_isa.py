"""bench/_common.py's instruction set: the level read from /proc/cpuinfo, the environment a
`--max_isa` cap gives both arms, the summary machine()'s line carries, and the re-execution of a
process that loaded a capped library before the cap. No library is started and nothing is timed
(docs/benchmarks.md, "Capping the instruction set", has the evidence that each cap takes effect).
"""

import importlib.util
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
_spec = importlib.util.spec_from_file_location("bench_common", os.path.join(BENCH, "_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


def _cpuinfo(flags, processors=2):
    """/proc/cpuinfo's text for `processors` identical processors with `flags`."""
    return "".join(f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU\n"
                   f"flags\t\t: {flags}\n\n" for i in range(processors))


BASE = "fpu vme de pse tsc msr pae mce cx8 apic sse sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c"
AVX2 = BASE + " fma avx2 bmi1 bmi2"
AVX512F = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl"
AVX512_BF16 = AVX512F + " avx512_vnni avx512_bf16"
AMX = AVX512_BF16 + " avx512_fp16 amx_bf16 amx_tile amx_int8"


@pytest.mark.parametrize("flags, level", [
    ("fpu sse sse2", "x86-64"),
    (BASE, "sse4.2"),
    (AVX2, "avx2"),
    (AVX512F, "avx512f"),
    (AVX512_BF16, "avx512_bf16"),
    (AMX, "amx"),
])
def test_host_isa_is_the_highest_level_whose_flags_are_all_there(flags, level):
    assert common.host_isa(_cpuinfo(flags)) == level


def test_host_isa_without_flags_and_from_the_first_processor():
    assert common.host_isa("") == "x86-64"
    assert common.host_isa(_cpuinfo(AMX, 1) + _cpuinfo(AVX2, 1)) == "amx"


def test_avx2_cap_on_an_amx_host_caps_every_library_and_keeps_the_rest():
    environ = {"PATH": "/bin", "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    env = common.isa_environment("avx2", "amx", environ)
    assert env == {
        "PATH": "/bin",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_cpu_max_isa=AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
        "TF_ENABLE_ONEDNN_OPTS": "1",  # what our scripts set on an AVX2 host
    }
    assert environ == {"PATH": "/bin", "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}


def test_avx512_cap_leaves_tensorflow_onednn_default_alone():
    env = common.isa_environment("avx512", "amx", {})
    assert env == {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX512_BF16",
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512_E3",
        "OPENBLAS_CORETYPE": "SkylakeX",
        "NPY_DISABLE_CPU_FEATURES": "AVX512_SPR",
    }


def test_a_cap_replaces_the_caps_already_set_and_keeps_the_users_onednn_choice():
    environ = {"DNNL_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default",
               "XLA_FLAGS": "--xla_cpu_max_isa=AVX --xla_dump_to=/tmp/x",
               "TF_ENABLE_ONEDNN_OPTS": "0"}
    env = common.isa_environment("avx2", "avx512_bf16", environ)
    assert "DNNL_MAX_CPU_ISA" not in env
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_max_isa=AVX2"
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"


@pytest.mark.parametrize("max_isa, host", [
    ("native", "amx"), ("avx2", "avx2"), ("avx512", "avx512_bf16"), ("avx512", "avx512f"),
    ("avx512", "avx2"),
])
def test_native_or_a_cap_at_or_above_the_host_removes_every_cap(max_isa, host):
    environ = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
               "XLA_FLAGS": "--xla_cpu_max_isa=AVX2", "HOME": "/root"}
    assert common.isa_environment(max_isa, host, environ) == {"HOME": "/root"}


def test_summary_names_the_host_the_cap_and_tensorflow_onednn_switch():
    assert common.isa_summary("amx", {"PATH": "/bin"}) == "amx"
    capped = common.isa_environment("avx2", "amx", {})
    assert (common.isa_summary("amx", capped)
            == "avx2 (--max_isa=avx2; host amx), TF_ENABLE_ONEDNN_OPTS=1")
    capped = common.isa_environment("avx512", "amx", {})
    assert common.isa_summary("amx", capped) == "avx512_bf16 (--max_isa=avx512; host amx)"
    assert (common.isa_summary("amx", {"ONEDNN_MAX_CPU_ISA": "AVX2",
                                       "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"})
            == "amx, capped by --xla_cpu_max_isa=AVX2 ONEDNN_MAX_CPU_ISA=AVX2")
    assert (common.isa_summary("avx2", {"TF_ENABLE_ONEDNN_OPTS": "1"})
            == "avx2, TF_ENABLE_ONEDNN_OPTS=1")


def test_max_isa_flag_parses_the_choices_and_defaults_to_the_environment_as_it_is():
    import argparse
    parser = argparse.ArgumentParser()
    common.add_max_isa_flag(parser)
    assert parser.parse_args([]).max_isa is None
    assert parser.parse_args(["--max_isa", "avx2"]).max_isa == "avx2"
    with pytest.raises(SystemExit):
        parser.parse_args(["--max_isa", "sse2"])


# A process that has "loaded numpy" before the cap: cap_isa must start it again, once, with the
# capped environment (the stand-in module keeps the test free of any library's start-up).
_CHILD = """
import os, sys, types
sys.path.insert(0, sys.argv[1])
sys.modules["numpy"] = types.ModuleType("numpy")
import _common
print("start", os.environ.get("ONEDNN_MAX_CPU_ISA"), flush=True)
_common.cap_isa(sys.argv[2])
print("capped", os.environ.get("ONEDNN_MAX_CPU_ISA"), os.environ.get("TF_ENABLE_ONEDNN_OPTS"))
"""


def test_cap_isa_restarts_a_process_that_loaded_a_capped_library_once():
    with open("/proc/cpuinfo") as f:
        host = common.host_isa(f.read())
    if common._isa_rank(host) <= common._isa_rank("avx2"):
        pytest.skip(f"this host's ISA ({host}) leaves nothing to cap")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "TF_ENABLE_ONEDNN_OPTS")}
    out = subprocess.run([sys.executable, "-c", _CHILD, BENCH, "avx2"], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout.split("\n")
    assert out[:3] == ["start None", "start AVX2", "capped AVX2 1"]
    out = subprocess.run([sys.executable, "-c", _CHILD, BENCH, "native"],
                         env=dict(env, ONEDNN_MAX_CPU_ISA="AVX2"), check=True,
                         stdout=subprocess.PIPE, text=True).stdout.split("\n")
    assert out[:3] == ["start AVX2", "start None", "capped None None"]


def test_a_report_rebuilt_or_extended_keeps_the_isa_its_runs_had():
    now = common.isa_in_force()
    common.check_same_isa(None, "results written before the ISA was recorded")
    common.check_same_isa(now, "seed 1 ours")
    with pytest.raises(SystemExit, match="seed 1 peer ran with ISA sse4.2, this run has"):
        common.check_same_isa("sse4.2", "seed 1 peer")
