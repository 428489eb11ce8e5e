"""Every script against every class of bad input (issue 12): one line, no traceback, no harm.

Table-driven: each case runs a real script in a subprocess and checks the exit code, exactly one
`SCRIPT: ERROR: ...` line (the last one on stderr, matching a pattern that names the flag, file
or line), no "Traceback", no output left under a final name and the user's files untouched.
Cases whose error comes before TensorFlow loads take a fraction of a second; the others start
TensorFlow (~5 s), so all cases run once, a few at a time, in one module fixture, and each test
checks one case's result. A few cases that are not one-line errors (a warning, a whole
multi-line message, Ctrl-C, stale temporaries) have their own tests.
"""

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time

import _third_party
import numpy as np
import pytest
from _launch import env_without_tensorflow, script_env
from _oracle import DATA, REPO
from _pretraining_data import TINY_CONFIG, write_records
from _together import started

from bert_mgpu import cli
from bert_mgpu.engine import checkpoint
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig

SCRIPTS = {name: os.path.join(REPO, f"{name}.py") for name in (
    "run_pretraining", "run_classifier_mgpu", "extract_features", "create_pretraining_data",
    "convert_hf_checkpoint")}
# --help of every top-level script, by a few flags only that script has (the scripts not in
# SCRIPTS have their bad-input tests in their own test files).
OWN_FLAGS = {
    "run_pretraining": {"input_file", "n_gpus", "num_train_steps", "output_dir"},
    "run_classifier_mgpu": {"task_name", "n_gpus", "data_dir", "label_list", "window_pooling"},
    "run_classifier": {"task_name", "n_gpus", "data_dir", "label_list"},
    "extract_features": {"input_file", "output_file", "layers", "batch_size"},
    "create_pretraining_data": {"input_file", "dupe_factor", "num_workers"},
    "convert_hf_checkpoint": {"hf_model_dir", "output_dir", "gelu"},
    "run_squad": {"predict_file", "doc_stride", "n_gpus", "null_score_diff_threshold"},
    "run_ner": {"data_dir", "n_gpus", "label_list"},
    "run_multiple_choice": {"data_dir", "n_gpus", "num_choices", "output_dir"},
    "create_vocab": {"input_file", "vocab_size", "algorithm", "reserved_tokens"},
    "export_saved_model": {"export_dir", "task", "jit_compile", "length_chunks"},
    "convert_to_hf": {"init_checkpoint", "vocab_file", "output_dir", "task_label"},
    "distill": {"teacher_dir", "student_num_layers", "temperature", "alpha",
                "tinybert_hidden_weight", "minilm_relation_heads", "tag_scheme"},
}
SCRIPTS.update({name: os.path.join(REPO, f"{name}.py") for name in OWN_FLAGS
                if name not in SCRIPTS})
KJV = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
# Two layers: the mis-shaped checkpoint's error lists each layer's variables, and --layers
# counts them.
CONFIG = dict(TINY_CONFIG, num_hidden_layers=2)
WORDS = ("the movie was good bad great terrible fine boring fun long short and but not very "
         "really quite story actors plot music ending").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS
USER_TEXT = "the user's own file: never overwritten by a failed run\n"


def _env():
    """The scripts' environment: the tests' own (TensorFlow's C++ log at warnings and up off),
    so the runs that load TensorFlow fork from the zygote (tests/_zygote.py)."""
    return script_env(CUDA_VISIBLE_DEVICES="")


def run_script(script, args, timeout=300, env=None):
    return subprocess.run([sys.executable, SCRIPTS[script], *args], capture_output=True,
                          text=True, timeout=timeout, env=env or _env())


def write_tsv(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


def dead_pid():
    """A PID no process has (probed from the top of the usual range down)."""
    for pid in range(4_000_000, 3_000_000, -7919):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    pytest.skip("no free PID found")


def readonly_dir(parent):
    """A directory this process cannot create files in: chmod 555, or, for root (which
    ignores permission bits), /sys where the kernel refuses new files."""
    path = parent / "readonly"
    path.mkdir()
    path.chmod(0o555)
    try:
        (path / "probe").write_text("x")
    except OSError:
        return str(path)
    (path / "probe").unlink()
    if os.path.isdir("/sys/kernel"):
        try:
            open("/sys/kernel/bert_mgpu_probe", "w").close()
        except OSError:
            return "/sys/kernel"
    pytest.skip("no read-only directory available to this user")


# ---------------------------------------------------------------------------------------------
# The files every case starts from

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    w = {"root": root}
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    w["vocab"] = str(root / "vocab.txt")
    w["config"] = str(root / "bert_config.json")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    w["config_wide"] = str(root / "bert_config_wide.json")
    (root / "bert_config_wide.json").write_text(json.dumps(dict(CONFIG,
                                                                intermediate_size=41)))
    w["records"] = write_records(root / "train.tfrecord", 24, seed=3)
    # A checkpoint of the tiny model (the `bert/` variables a classifier or extractor loads).
    model = modeling.BertModel(BertConfig(**CONFIG))
    w["ckpt"] = checkpoint.write_bundle(str(root / "ckpt" / "bert_model.ckpt"),
                                        model.named_variables())
    rng = np.random.RandomState(0)

    def text(n=6):
        return " ".join(rng.choice(WORDS, size=n))

    data = root / "tsv"
    data.mkdir()
    write_tsv(data / "train.tsv", [["sentence", "label"]] + [[text(), str(i % 2)]
                                                             for i in range(8)])
    write_tsv(data / "dev.tsv", [["sentence", "label"]] + [[text(), str(i % 2)]
                                                           for i in range(4)])
    write_tsv(data / "test.tsv", [["sentence"]] + [[text()] for _ in range(3)])
    w["tsv"] = str(data)
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f"{text(8)} .\n" + ("\n" if i % 5 == 4 else "")
                              for i in range(40)), encoding="utf-8")
    w["corpus"] = str(corpus)
    (root / "lines.txt").write_text("the movie was good\nbad plot ||| fun music\n")
    w["lines"] = str(root / "lines.txt")
    (root / "a_file").write_text("not a directory\n")
    w["a_file"] = str(root / "a_file")
    (root / "a_dir").mkdir()
    w["a_dir"] = str(root / "a_dir")
    w["readonly"] = readonly_dir(root)
    return w


def tsv_variant(w, name, **files):
    """A copy of the tsv data dir with some files replaced (rows, or bytes)."""
    d = w["root"] / f"tsv_{name}"
    d.mkdir()
    for split in ("train", "dev", "test"):
        content = files.get(split)
        src = os.path.join(w["tsv"], f"{split}.tsv")
        if content is None:
            (d / f"{split}.tsv").write_bytes(open(src, "rb").read())
        elif isinstance(content, bytes):
            (d / f"{split}.tsv").write_bytes(content)
        else:
            write_tsv(d / f"{split}.tsv", content)
    return str(d)


# ---------------------------------------------------------------------------------------------
# The table. Each case: script, flags (a function of the world, after the script's good
# flags; a flag given again replaces the good one), the pattern of the one ERROR line, and
# what must not exist / must be unchanged afterwards. `tf`: the error comes after TensorFlow
# starts (slow), for the record.

def pretraining_flags(w, out):
    return {"--bert_config_file": w["config"], "--input_file": w["records"],
            "--output_dir": out, "--do_train": "true", "--max_seq_length": "16",
            "--max_predictions_per_seq": "4", "--train_batch_size": "2",
            "--num_train_steps": "1", "--num_warmup_steps": "0"}


def classifier_flags(w, out):
    return {"--task_name": "tsv", "--data_dir": w["tsv"], "--vocab_file": w["vocab"],
            "--bert_config_file": w["config"], "--init_checkpoint": w["ckpt"],
            "--output_dir": out, "--do_train": "true", "--do_eval": "true",
            "--max_seq_length": "16", "--train_batch_size": "4", "--num_train_epochs": "1"}


def extract_flags(w, out):
    return {"--input_file": w["lines"], "--output_file": out, "--vocab_file": w["vocab"],
            "--bert_config_file": w["config"], "--init_checkpoint": w["ckpt"],
            "--max_seq_length": "16", "--layers": "-1"}


def cpd_flags(w, out):
    return {"--input_file": w["corpus"], "--output_file": out, "--vocab_file": w["vocab"],
            "--max_seq_length": "16", "--max_predictions_per_seq": "3", "--dupe_factor": "1"}


def convert_flags(w, out):
    return {"--hf_model_dir": str(w["root"]), "--output_dir": out}


BASE = {"run_pretraining": pretraining_flags, "run_classifier_mgpu": classifier_flags,
        "run_classifier": classifier_flags,
        "extract_features": extract_flags, "create_pretraining_data": cpd_flags,
        "convert_hf_checkpoint": convert_flags}
# The output each script's good flags name (under the case's directory).
OUTPUT = {"run_pretraining": "out", "run_classifier_mgpu": "out", "run_classifier": "out",
          "extract_features": "o.jsonl",
          "create_pretraining_data": "out.tfrecord", "convert_hf_checkpoint": "out"}

CASES = [
    # --- bad flags (absl's parsing, then the configs' validate()): before TensorFlow
    ("run_pretraining", "flag-type", lambda w: {"--n_gpus": "two"}, r"flag --n_gpus=two"),
    ("run_classifier_mgpu", "flag-unknown", lambda w: {"--n_gpu": "2"},
     r"Unknown command line flag 'n_gpu'"),
    ("create_pretraining_data", "flag-enum-like", lambda w: {"--dupe_factor": "x"},
     r"flag --dupe_factor=x"),
    ("run_classifier_mgpu", "flag-enum", lambda w: {"--truncation": "middle"},
     r"flag --truncation=middle"),
    ("run_pretraining", "n-gpus-0", lambda w: {"--n_gpus": "0"}, r"--n_gpus must be >= 1"),
    ("run_pretraining", "xla-layers-and-use-xla",
     lambda w: {"--xla_layers": "true", "--use_xla": "true"},
     r"--xla_layers cannot be combined with --use_xla \(which compiles the whole tower\)"),
    # head_tail's default --head_tokens=128 (Sun et al.'s, at length 512) at length 16: no tail
    ("run_classifier_mgpu", "head-tail-no-tail", lambda w: {"--truncation": "head_tail"},
     r"--truncation=head_tail keeps --head_tokens=128 pieces from the start and the rest of "
     r"--max_seq_length - 2 = 14 from the end: that leaves no tail .* --head_tokens=4 "),
    # --- long documents (--doc_stride, issue 31)
    ("run_classifier_mgpu", "doc-stride-negative", lambda w: {"--doc_stride": "-1"},
     r"--doc_stride must be >= 0, got -1"),
    ("run_classifier_mgpu", "doc-stride-head-tail",
     lambda w: {"--doc_stride": "4", "--truncation": "head_tail"},
     r"--doc_stride=4 keeps every piece .* --truncation=head_tail cuts it: choose one"),
    ("run_classifier_mgpu", "doc-stride-budget", lambda w: {"--doc_stride": "15"},
     r"--doc_stride=15 must be <= --max_seq_length - 2 = 14"),
    ("run_classifier_mgpu", "window-pooling", lambda w: {"--window_pooling": "median"},
     r"flag --window_pooling=median"),
    ("run_classifier", "doc-stride-multitask",
     lambda w: {"--doc_stride": "4", "--task_name": "tsv,tsv",
                "--data_dir": f"{w['tsv']},{w['tsv']}"},
     r"--doc_stride cannot be used with several --task_name"),
    ("run_pretraining", "no-job", lambda w: {"--do_train": "false"},
     r"At least one of `do_train` or `do_eval`"),
    ("run_pretraining", "required", lambda w: {"--input_file": ""}, r"--input_file is required"),
    ("run_classifier_mgpu", "epochs", lambda w: {"--num_train_epochs": "0"},
     r"--num_train_epochs must be > 0"),
    ("run_classifier_mgpu", "task-name", lambda w: {"--task_name": "nope"},
     r"--task_name: task not found: 'nope'"),
    ("run_classifier_mgpu", "label-list-not-tsv",
     lambda w: {"--task_name": "mrpc", "--label_list": "a,b"},
     r"--label_list only applies to --task_name=tsv"),
    ("run_classifier_mgpu", "cased-checkpoint",
     lambda w: {"--init_checkpoint": "/x/cased_L-12_H-768_A-12/bert_model.ckpt"},
     r"`cased_L-12_H-768_A-12` seems to be a cased model"),
    ("run_pretraining", "task-index", lambda w: {"--task_index": "1"},
     r"--task_index needs --worker_hosts"),
    ("extract_features", "layers-syntax", lambda w: {"--layers": "-1,x"},
     r"--layers: expected comma-separated integers"),
    ("extract_features", "max-seq-2", lambda w: {"--max_seq_length": "2"},
     r"--max_seq_length must be >= 3 \(room for \[CLS\], \[SEP\] and one token\), got 2"),
    ("create_pretraining_data", "max-seq-4", lambda w: {"--max_seq_length": "4"},
     r"--max_seq_length must be >= 5"),
    ("create_pretraining_data", "max-predictions", lambda w: {"--max_predictions_per_seq": "14"},
     r"--max_predictions_per_seq must be in \[1, 13\]"),
    ("create_pretraining_data", "exclusive", lambda w: {"--sentence_order_prediction": "true",
                                                        "--no_next_sentence": "true"},
     r"exclude each other"),
    # --- evaluating random weights: no --do_train, no checkpoint, no --init_checkpoint
    ("run_pretraining", "eval-random-weights",
     lambda w: {"--do_train": "false", "--do_eval": "true"},
     r"--do_eval without --do_train: no checkpoint in --output_dir=.*out and no "
     r"--init_checkpoint, so the model would have random weights"),
    ("run_classifier_mgpu", "predict-random-weights",
     lambda w: {"--do_train": "false", "--do_eval": "false", "--do_predict": "true",
                "--init_checkpoint": ""},
     r"--do_predict without --do_train: no checkpoint in --output_dir="),
    # --- missing or unreadable input files: before TensorFlow
    ("run_pretraining", "input-glob", lambda w: {"--input_file": "/nonexistent/*.tfrecord"},
     r"--input_file: no file matches '/nonexistent/\*\.tfrecord'"),
    ("run_pretraining", "config-missing", lambda w: {"--bert_config_file": "/x/cfg.json"},
     r"/x/cfg\.json: bert_config file not found"),
    ("run_pretraining", "config-json", lambda w: {"--bert_config_file": w["lines"]},
     r"lines\.txt:1: invalid JSON"),
    ("run_pretraining", "seq-longer-than-model", lambda w: {"--max_seq_length": "128"},
     r"--max_seq_length=128 is longer than max_position_embeddings \(64\) in .*bert_config"),
    ("run_classifier_mgpu", "vocab-missing", lambda w: {"--vocab_file": "/x/vocab.txt"},
     r"--vocab_file: /x/vocab\.txt not found"),
    ("run_classifier_mgpu", "vocab-larger-than-model",
     lambda w: {"--vocab_file": os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")},
     r"--vocab_file: .*bert_uncased_vocab\.txt has 30522 tokens, more than vocab_size 100 in "
     r".*bert_config\.json"),
    ("extract_features", "vocab-larger-than-model",
     lambda w: {"--vocab_file": os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")},
     r"--vocab_file: .* has 30522 tokens, more than vocab_size 100"),
    ("extract_features", "input-missing", lambda w: {"--input_file": "/x/missing.txt"},
     r"--input_file: /x/missing\.txt not found"),
    ("extract_features", "input-empty", lambda w: {"--input_file": w["empty"]},
     r"--input_file: .*empty\.txt is empty"),
    ("create_pretraining_data", "input-glob", lambda w: {"--input_file": "/x/missing-*.txt"},
     r"--input_file: no file matches"),
    ("create_pretraining_data", "vocab-missing", lambda w: {"--vocab_file": "/x/vocab.txt"},
     r"vocab file not found: /x/vocab\.txt"),
    ("create_pretraining_data", "vocab-no-mask", lambda w: {"--vocab_file": w["vocab_no_mask"]},
     r"has no \[MASK\] token"),
    ("create_pretraining_data", "corpus-empty", lambda w: {"--input_file": w["empty"]},
     r"--input_file=.*empty\.txt: no instance made from 0 document"),
    ("create_pretraining_data", "corpus-blank", lambda w: {"--input_file": w["blank"]},
     r"--input_file=.*blank\.txt: no instance made"),
    ("create_pretraining_data", "corpus-empty-sharded",
     lambda w: {"--input_file": w["empty"], "--num_workers": "1"},
     r"--input_file=.*empty\.txt: no instance made"),
    ("convert_hf_checkpoint", "no-config", lambda w: {},
     r"config\.json"),
    # --- output paths (every script): before any work
    ("run_pretraining", "output-dir-file", lambda w: {"--output_dir": w["a_file"]},
     r"--output_dir=.*a_file is a file, not a directory"),
    ("run_pretraining", "output-dir-readonly", lambda w: {"--output_dir": w["readonly"] + "/o"},
     r"--output_dir=.*: cannot create the directory, .* is not writable"),
    ("run_classifier_mgpu", "output-dir-file", lambda w: {"--output_dir": w["a_file"]},
     r"--output_dir=.*a_file is a file, not a directory"),
    ("run_classifier_mgpu", "output-dir-under-file",
     lambda w: {"--output_dir": w["a_file"] + "/sub"},
     r"--output_dir=.*a_file/sub: cannot create the directory, .*a_file is a file"),
    ("run_classifier_mgpu", "output-dir-readonly", lambda w: {"--output_dir": w["readonly"]},
     r"--output_dir=.* is not writable"),
    ("convert_hf_checkpoint", "output-dir-file", lambda w: {"--output_dir": w["a_file"]},
     r"--output_dir=.*a_file is a file, not a directory"),
    ("extract_features", "output-is-dir", lambda w: {"--output_file": w["a_dir"]},
     r"--output_file=.*a_dir is a directory, not a file"),
    ("extract_features", "output-readonly",
     lambda w: {"--output_file": w["readonly"] + "/o.jsonl"},
     r"--output_file=.*o\.jsonl: cannot create the file, .* is not writable"),
    ("create_pretraining_data", "output-is-dir", lambda w: {"--output_file": w["a_dir"]},
     r"--output_file=.*a_dir is a directory, not a file"),
    ("create_pretraining_data", "output-second-readonly",
     lambda w: {"--output_file": f"{w['case_dir']}/out.tfrecord,{w['readonly']}/b.tfrecord"},
     r"--output_file=.*b\.tfrecord: cannot create the file, .* is not writable"),
    # --- users' processors (--processors_file): loaded and checked before TensorFlow, their
    # `import tensorflow as tf` included
    ("run_classifier", "processors-file-missing",
     lambda w: {"--processors_file": "/x/p.py", "--task_name": "foo"},
     r"--processors_file: /x/p\.py not found"),
    ("run_classifier_mgpu", "processors-task-not-found",
     lambda w: {"--processors_file": w["high_level_py"], "--task_name": "nope"},
     r"task not found: 'nope' \(known: .*; in --processors_file=.*high_level\.py: "
     r"HighLevelProcessor \(highlevel\)\)"),
    ("run_classifier_mgpu", "processors-no-test-method",
     lambda w: {"--processors_file": w["high_level_py"], "--task_name": "high_level",
                "--do_predict": "true"},
     r"high_level\.py: HighLevelProcessor has no method get_test_examples\(\), which "
     r"--do_predict needs"),
    ("run_classifier", "processors-import-error",
     lambda w: {"--processors_file": w["import_error_py"], "--task_name": "foo"},
     r"import_error\.py:3 in <module>: ModuleNotFoundError: No module named 'pandaz'"),
    # --- tsv columns (issue 30, item 3)
    ("run_classifier", "text-columns-not-tsv",
     lambda w: {"--task_name": "mrpc", "--text_columns": "text"},
     r"--text_columns only apply to --task_name=tsv, not 'mrpc'"),
    # --- files as users have them (issue 30, item 5)
    ("run_classifier_mgpu", "init-checkpoint-missing",
     lambda w: {"--init_checkpoint": "/x/model.ckpt-7"},
     r"--init_checkpoint: /x/model\.ckpt-7: no checkpoint there \(expected "
     r"/x/model\.ckpt-7\.index"),
    # --- errors found after TensorFlow starts (slow: one process each)
    # A remote path that cannot be reached: one line naming the flag, before any work
    # (TensorFlow loads to try it).
    ("run_classifier", "remote-unreachable", lambda w: {"--data_dir": "s3://bucket/glue/MRPC"},
     r"--data_dir=s3://bucket/glue/MRPC: cannot be reached: File system scheme 's3' not "
     r"implemented", "tf"),
    ("run_pretraining", "remote-pattern-unreachable",
     lambda w: {"--input_file": "hdfs://namenode/data/part-*.tfrecord"},
     r"--input_file=hdfs://namenode/data/part-\*\.tfrecord: cannot be reached", "tf"),
    # gs:// (a file system TensorFlow has) through a proxy that cannot be reached (CASE_ENV):
    # the same line with a network or without.
    ("run_classifier_mgpu", "remote-gs-unreachable",
     lambda w: {"--output_dir": "gs://some_bucket/mrpc_output/"},
     r"--output_dir=gs://some_bucket/mrpc_output/: cannot be reached: Error executing an HTTP "
     r"request: .*Could not resolve proxy: proxy\.invalid", "tf"),
    # A --label_list of integer labels (issue 30, item 4) that misses one of the data's (dev.tsv
    # is read first, before training).
    ("run_classifier", "label-list-misses-a-label", lambda w: {"--label_list": "1,2"},
     r"dev\.tsv:2: unknown label '0' \(labels: 1, 2\)", "tf"),
    # Files as users have them (issue 30, items 3 and 5): a headerless file whose rows have
    # more columns than --column_names names; a CSV quote that does not close where its field
    # ends (csv's lenient reading merged the next rows into it).
    ("run_classifier", "column-names-count",
     lambda w: {"--data_dir": w["tsv_headerless"], "--column_names": "text,label"},
     r"train\.tsv:1: 3 columns, --column_names names 2", "tf"),
    ("run_classifier_mgpu", "csv-broken-quote",
     lambda w: {"--data_dir": w["csv_broken_quote"], "--data_format": "csv"},
     r"train\.csv:3: ',' expected after '\"' \(a quoted field ends with '\"' before the next "
     r"','", "tf"),
    # --data_dir, its split files and their columns: checked before TensorFlow loads.
    ("run_classifier", "tsv-id-column", lambda w: {"--data_dir": w["tsv_id_column"]},
     r"train\.tsv:1: the column\(s\) 'id' are not named as a text or label column \(columns: "
     r"'id', 'text', 'label'.*--text_columns=NAME"),
    ("run_classifier_mgpu", "data-dir-missing", lambda w: {"--data_dir": "/x/no_such_dir"},
     r"--data_dir=/x/no_such_dir: no such directory$"),
    ("run_classifier", "data-dir-file", lambda w: {"--data_dir": w["a_file"]},
     r"--data_dir=.*: not a directory$"),
    ("run_classifier_mgpu", "dev-file-missing", lambda w: {"--data_dir": w["tsv_no_dev"]},
     r"--data_dir=.*tsv_no_dev: no dev\.tsv \(the dev split, which --do_eval needs\)$"),
    ("run_classifier", "google-task-file-missing",
     lambda w: {"--data_dir": w["tsv_no_dev"], "--task_name": "cola"},
     r"--data_dir=.*tsv_no_dev: no dev\.tsv \(the dev split, which --do_eval needs\)$"),
    ("run_classifier_mgpu", "dev-label-column-missing",
     lambda w: {"--data_dir": w["tsv_dev_no_label"]},
     r"dev\.tsv:1: no column named 'label' among the columns 'sentence', 'score'$"),
    ("run_classifier_mgpu", "csv-text-column-missing",
     lambda w: {"--data_dir": w["csv_broken_quote"], "--data_format": "csv",
                "--text_columns": "review"},
     r"train\.csv:1: --text_columns=review: no column 'review' among the columns 'label', "
     r"'text'$"),
    ("run_classifier_mgpu", "processors-user-exception",
     lambda w: {"--processors_file": w["high_level_py"], "--task_name": "high_level"},
     r"high_level\.py:\d+ in _read_tsv: FileNotFoundError: \[Errno 2\] No such file or "
     r"directory: '.*test_without_content_0515\.txt'", "tf"),
    ("run_pretraining", "record-length", lambda w: {"--max_seq_length": "32"},
     r"'input_ids' has length 16 but --max_seq_length=32", "tf"),
    ("run_classifier_mgpu", "tsv-columns",
     lambda w: {"--data_dir": w["tsv_columns"]}, r"train\.tsv:3: 1 columns, the header has 2",
     "tf"),
    ("run_classifier_mgpu", "tsv-not-utf8", lambda w: {"--data_dir": w["tsv_latin1"]},
     r"train\.tsv:3: not UTF-8 \(byte 0xe9 at column 8\)", "tf"),
    ("run_classifier_mgpu", "dev-unknown-label", lambda w: {"--data_dir": w["tsv_dev_label"]},
     r"dev\.tsv:3: unknown label '7'", "tf"),
    ("run_classifier_mgpu", "dev-header-only",
     lambda w: {"--data_dir": w["tsv_dev_empty"], "--do_train": "false"},
     r"dev\.tsv: no dev examples", "tf"),
    ("run_classifier_mgpu", "test-header-only",
     lambda w: {"--data_dir": w["tsv_test_empty"], "--do_train": "false", "--do_eval": "false",
                "--do_predict": "true"},
     r"test\.tsv: no test examples", "tf"),
    ("extract_features", "layers-range", lambda w: {"--layers": "-7"},
     r"--layers: index -7 is out of range for a model with 2 layers", "tf"),
]
# The environment a case runs with beyond _env()'s.
CASE_ENV = {
    # libcurl's proxy (TensorFlow's GCS client honours it): a host that never resolves (RFC
    # 6761), so gs:// cannot be reached at once, network or not, and without retries.
    "run_classifier_mgpu:remote-gs-unreachable": {"https_proxy": "http://proxy.invalid:3128"},
}
# Cases checked further by their own tests (not one line, or not an error).
IDS = [f"{script}:{name}" for script, name, *_ in CASES]
MORE_FLAGS = {
    # A training run the warning case and run_config.json check share: 1 step, warmup 5.
    "warmup": ("run_pretraining", lambda w: {"--num_warmup_steps": "5"}),
    # A multi-line error: the checkpoint's FFN is 37 wide, the config says 41.
    "misshaped": ("run_classifier_mgpu", lambda w: {"--bert_config_file": w["config_wide"]}),
    # A line longer than --max_seq_length=6, an output in a directory that does not exist.
    "truncated": ("extract_features", lambda w: {"--max_seq_length": "6",
                                                 "--output_file": w["case_dir"] + "/new/o.jsonl"}),
}


def _prepare_variants(w):
    root = w["root"]
    (root / "empty.txt").write_text("")
    w["empty"] = str(root / "empty.txt")
    (root / "blank.txt").write_text("\n\n\n")
    w["blank"] = str(root / "blank.txt")
    (root / "vocab_no_mask.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    w["vocab_no_mask"] = str(root / "vocab_no_mask.txt")
    header = [["sentence", "label"]]
    w["tsv_columns"] = tsv_variant(w, "columns", train=header + [["good", "1"], ["bad"]])
    w["tsv_latin1"] = tsv_variant(w, "latin1", train=(
        "sentence\tlabel\ngood fun\t1\nthe caf\xe9 was bad\t0\n".encode("latin-1")))
    w["tsv_dev_label"] = tsv_variant(w, "dev_label", dev=header + [["good", "1"], ["x", "7"]])
    w["tsv_dev_empty"] = tsv_variant(w, "dev_empty", dev=header)
    w["tsv_dev_no_label"] = tsv_variant(w, "dev_no_label", dev=[["sentence", "score"],
                                                                ["good", "1"]])
    w["tsv_no_dev"] = tsv_variant(w, "no_dev")
    os.remove(os.path.join(w["tsv_no_dev"], "dev.tsv"))
    w["tsv_test_empty"] = tsv_variant(w, "test_empty", test=[["sentence"]])
    # A tutorial's layout: id, text, label with a header.
    w["tsv_id_column"] = tsv_variant(w, "id_column", train=[["id", "text", "label"]] + [
        [str(i), "the movie was good", str(i % 2)] for i in range(4)])
    # LCQMC's layout (sentence 1, sentence 2, label), no header; dev.tsv as --column_names says.
    w["tsv_headerless"] = tsv_variant(w, "headerless", train=[["good", "fun", "1"]],
                                      dev=[["good", "1"]])
    broken = root / "csv_broken_quote"
    broken.mkdir()
    (broken / "train.csv").write_text('label,text\n1,good\n0,"bad, really\n1,fine\n'
                                      '0,"dull"\n', encoding="utf-8")
    (broken / "dev.csv").write_text("label,text\n1,good\n0,bad\n", encoding="utf-8")
    w["csv_broken_quote"] = str(broken)
    try:  # the multi-GPU fork's processors, from its repository's snapshot (tests/_third_party)
        w["high_level_py"] = _third_party.processors_file("high_level.py", root)
    except pytest.skip.Exception as e:
        w["high_level_py"] = Unavailable(e.msg)
    (root / "import_error.py").write_text("import tensorflow as tf\nimport tokenization\n"
                                          "import pandaz\n")
    w["import_error_py"] = str(root / "import_error.py")


def _command(w, script, changes, case_dir):
    out = os.path.join(case_dir, OUTPUT[script])
    flags = BASE[script](w, out)
    flags.update(changes)
    return [f"{k}={v}" for k, v in flags.items() if v != ""], out


class Unavailable(str):
    """A file of the world that is not there (a user's file without its repository's snapshot):
    the cases naming it skip with this reason."""


def _run_case(w, key, script, changes_fn, before_tensorflow=False):
    case_dir = w["root"] / "cases" / key.replace(":", "_")
    case_dir.mkdir(parents=True)
    w_case = dict(w, case_dir=str(case_dir))
    changes = changes_fn(w_case)
    missing = [v for v in changes.values() if isinstance(v, Unavailable)]
    if missing:
        return {"skip": missing[0]}
    # The user's own file where the output goes (and in the output directory): untouched.
    user_file = case_dir / "notes.txt"
    user_file.write_text(USER_TEXT)
    args, out = _command(w_case, script, changes, str(case_dir))
    if OUTPUT[script].endswith((".jsonl", ".tfrecord")):
        # An existing output file of a previous good run: a failed run must leave it alone.
        with open(out, "w") as f:
            f.write(USER_TEXT)
    env = env_without_tensorflow(w["root"], _env()) if before_tensorflow else _env()
    env.update(CASE_ENV.get(key, {}))
    start = time.monotonic()
    proc = run_script(script, args, env=env)
    return {"proc": proc, "case_dir": case_dir, "out": out, "user_file": user_file,
            "seconds": time.monotonic() - start}


@pytest.fixture(scope="module")
def results(world):
    """Every case run once, and every script's --help, a few processes at a time."""
    _prepare_variants(world)
    jobs = {f"{script}:{name}": (script, fn) for script, name, fn, *_ in CASES}
    jobs.update({key: value for key, value in MORE_FLAGS.items()})
    # The slow (TensorFlow) ones first, so the quick ones fill the gaps.
    slow = {f"{s}:{n}" for s, n, _, _, *tf in CASES if tf} | set(MORE_FLAGS)
    order = sorted(jobs, key=lambda k: k not in slow)
    # README: flags, the config, the vocabulary, input patterns and output paths are checked
    # before TensorFlow loads: those cases run where importing TensorFlow fails.
    runs = {key: functools.partial(_run_case, world, key, *jobs[key],
                                   before_tensorflow=key not in slow) for key in order}
    runs.update({f"help:{script}": functools.partial(run_script, script, ["--help"])
                 for script in SCRIPTS})
    with started(runs) as futures:
        return {key: f.result() for key, f in futures.items()}


def assert_one_line_error(proc, script, pattern, code=1):
    """Exit code, one `SCRIPT: ERROR:` line (the last), matching `pattern`, no traceback."""
    err = proc.stderr
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == code, (proc.returncode, err[-3000:])
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if ": ERROR: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0], err[-3000:]
    assert errors[0].startswith(f"{script}.py: ERROR: "), errors[0]
    assert re.search(pattern, errors[0]), (pattern, errors[0])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bad_input_is_one_line_and_harmless(case, results):
    script, name, _, pattern, *_ = case
    r = results[f"{script}:{name}"]
    if "skip" in r:
        pytest.skip(r["skip"])
    assert_one_line_error(r["proc"], script, pattern)
    # No output under a final name; the user's files as they were.
    assert r["user_file"].read_text() == USER_TEXT
    if OUTPUT[script].endswith((".jsonl", ".tfrecord")):
        assert open(r["out"]).read() == USER_TEXT
    else:
        assert not os.path.exists(os.path.join(r["out"], "eval_results.txt"))
        assert not os.path.exists(os.path.join(r["out"], "checkpoint"))
    leftovers = [f for _, dirs, files in os.walk(r["case_dir"]) for f in dirs + files
                 if "tmp" in f or "incomplete" in f]
    assert not leftovers


def test_dev_errors_come_before_training(results):
    """The dev set's unknown label is reported at start: no checkpoint was written."""
    r = results["run_classifier_mgpu:dev-unknown-label"]
    assert not os.path.exists(os.path.join(r["out"], "checkpoint"))
    assert "Running training" not in r["proc"].stderr


def test_warmup_longer_than_training_is_a_warning_and_flags_are_saved(results):
    r = results["warmup"]
    assert r["proc"].returncode == 0, r["proc"].stderr[-3000:]
    assert re.search(r"--num_warmup_steps=5 > --num_train_steps=1: the learning rate rises for "
                     r"the whole run and never reaches its peak", r["proc"].stderr)
    saved = json.load(open(os.path.join(r["out"], "run_config.json")))
    assert saved["num_warmup_steps"] == 5 and saved["n_gpus"] == 1
    assert saved["train_batch_size"] == 2 and saved["output_dir"] == r["out"]


def test_multi_line_error_is_printed_whole(results):
    """The checkpoint/model mismatch lists every variable under the one ERROR line."""
    r = results["misshaped"]
    err = r["proc"].stderr
    assert r["proc"].returncode == 1 and "Traceback" not in err, err[-3000:]
    lines = err[err.index("run_classifier_mgpu.py: ERROR: "):].strip().splitlines()
    assert re.search(r"ERROR: 6 variable\(s\) required from the checkpoint are missing or "
                     r"mis-shaped in .*bert_model\.ckpt:$", lines[0]), lines[0]
    # Per layer: the intermediate kernel and bias, the output kernel (37 wide in the
    # checkpoint, 41 in the config).
    assert len(lines) == 7, lines
    assert sum("intermediate/dense" in line for line in lines[1:]) == 4, lines
    assert sum("output/dense/kernel" in line for line in lines[1:]) == 2, lines
    assert any(line.endswith("layer_0/intermediate/dense/kernel: shape [32, 37] in the "
                             "checkpoint, [32, 41] in the model") for line in lines), lines


def test_long_lines_warned_and_missing_output_directory_created(results):
    r = results["truncated"]
    proc = r["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"1 of 2 input line\(s\) of .*lines\.txt are longer than "
                     r"--max_seq_length=6 tokens and were truncated \(the first: line 2\)",
                     proc.stderr), proc.stderr[-3000:]
    out = os.path.join(r["case_dir"], "new", "o.jsonl")
    lines = [json.loads(line) for line in open(out)]
    assert [len(line["features"]) for line in lines] == [6, 6]  # 4 words + 2; cut to 6


def _commands(shell_text):
    """(script, [flag names]) of each `SCRIPT.py ...` command of ours in shell text (line
    continuations joined; a command ends at a pipe, `;` or `&`)."""
    for line in shell_text.replace("\\\n", " ").splitlines():
        for match in re.finditer(r"\b(\w+)\.py\b([^|;&]*)", line):
            if match.group(1) in OWN_FLAGS:
                yield match.group(1), re.findall(r"(?<![\w-])--(\w+)", match.group(2))


def test_launch_scripts_and_readme_commands_use_flags_that_exist(results):
    """examples/*.sh (users copy them) and the code blocks of README.md and docs/: every flag
    given to one of our scripts is one its --help lists; the shell scripts parse (bash -n)."""
    listed = {script: set(re.findall(r"^  --(?:\[no\])?(\w+)", results[f"help:{script}"].stdout,
                                     re.M)) for script in OWN_FLAGS}
    sources = {}
    for name in sorted(os.listdir(os.path.join(REPO, "examples"))):
        if name.endswith(".sh"):
            path = os.path.join(REPO, "examples", name)
            syntax = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
            assert syntax.returncode == 0, (name, syntax.stderr)
            sources[name] = open(path, encoding="utf-8").read()
    docs = ["README.md"] + [os.path.join("docs", name)
                            for name in sorted(os.listdir(os.path.join(REPO, "docs")))
                            if name.endswith(".md")]
    for name in docs:
        with open(os.path.join(REPO, name), encoding="utf-8") as f:
            text = f.read()
        sources[name] = "\n".join(re.findall(r"^\s*```[a-z]*\n(.*?)^\s*```", text, re.M | re.S))
    checked = 0
    for source, text in sources.items():
        for script, flags in _commands(text):
            unknown = set(flags) - listed[script] - {"help", "helpfull"}  # absl's own
            assert not unknown, f"{source}: {script}.py has no flag(s) {sorted(unknown)}"
            checked += len(flags)
    assert len(sources) >= 8 and checked > 200


def test_bert_mgpu_traceback_shows_the_traceback_above_the_one_line(tmp_path):
    """README: BERT_MGPU_TRACEBACK=1 shows the traceback too; the error line stays the last."""
    args = [sys.executable, SCRIPTS["create_pretraining_data"], f"--input_file={KJV}",
            f"--output_file={tmp_path / 'o.tfrecord'}", f"--vocab_file={tmp_path / 'none.txt'}"]
    for flag in ("", "1"):
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120,
                              env=dict(_env(), BERT_MGPU_TRACEBACK=flag))
        assert proc.returncode == 1, proc.stderr[-2000:]
        lines = proc.stderr.strip().splitlines()
        assert lines[-1] == f"create_pretraining_data.py: ERROR: vocab file not found: " \
                            f"{tmp_path / 'none.txt'}"
        assert ("Traceback (most recent call last):" in proc.stderr) == bool(flag)
    assert not (tmp_path / "o.tfrecord").exists()


def test_every_top_level_script_has_its_help_tested():
    top_level = {name[:-3] for name in os.listdir(REPO) if name.endswith(".py")}
    assert top_level == set(OWN_FLAGS)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_lists_the_scripts_own_flags(script, results):
    proc = results[f"help:{script}"]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    in_order = re.findall(r"^  --(?:\[no\])?(\w+)", proc.stdout, re.M)
    listed = set(in_order)
    # Each flag once; Google's flags (those it has) first, then the project's in groups.
    assert len(in_order) == len(listed), proc.stdout[-2000:]
    google = [name in cli.GOOGLE_FLAGS for name in in_order]
    assert google == sorted(google, reverse=True), in_order
    first_title = proc.stdout[:proc.stdout.index("\n  --")].splitlines()[-1]
    assert first_title.startswith("Google's flags") == any(google), first_title
    own = OWN_FLAGS[script]
    assert own <= listed, (own - listed, proc.stdout[-2000:])
    # distill.py trains a classifier on the classifier's data path (its task defaults to the
    # teacher run's).
    assert "task_name" not in listed or script in ("run_classifier_mgpu", "run_classifier",
                                                   "distill")
    assert "gelu" not in listed or script == "convert_hf_checkpoint"


# ---------------------------------------------------------------------------------------------
# create_pretraining_data: killed and interrupted runs

def _long_cpd_run(tmp_path, stderr, *extra):
    """A ~10 s run whose log goes to the file `stderr`, a progress line every 0.1 s."""
    return subprocess.Popen(
        [sys.executable, SCRIPTS["create_pretraining_data"], f"--input_file={KJV}",
         f"--output_file={tmp_path}/out/a.tfrecord,{tmp_path}/out/b.tfrecord",
         f"--vocab_file={os.path.join(DATA, 'vocab', 'bert_uncased_vocab.txt')}",
         "--dupe_factor=40", "--shard_size_mb=0.5", "--progress_interval=0.1", *extra],
        stderr=stderr, stdout=subprocess.DEVNULL, text=True, env=_env(),
        # A shell runs background commands (`make test &`, `nohup ... &`) with SIGINT ignored,
        # and children inherit that: give the script the default Ctrl-C, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_while_running(proc, event, what, timeout=60):
    """Waits until `event()` (something the run writes) is true, while the run runs."""
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        if event():
            return
        time.sleep(0.02)
    pytest.fail(f"{what}: not seen while the run ran (return code {proc.poll()})")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_ctrl_c_is_one_line_exit_130_and_removes_temporaries(tmp_path, workers):
    """Ctrl-C while instances are being made, after an event the run writes: in one process, a
    progress line with instances counted; with workers (one shard: a gzip file is not split),
    the shard's file in the scratch directory, which a worker creates when it starts making
    the shard's instances (the directory itself appears before the workers start). The
    temporaries then exist, and are removed."""
    log = tmp_path / "stderr.txt"
    with open(log, "w") as stderr:
        proc = _long_cpd_run(tmp_path, stderr, f"--num_workers={workers}")
    tmp = tmp_path / "out" / f"a.tfrecord.tmp-{proc.pid}"
    shard = tmp_path / "out" / f"a.tfrecord.shards.tmp-{proc.pid}" / "shard-000000.tfrecord"
    try:
        if workers == "0":
            _wait_while_running(
                proc, lambda: re.search(r"; [1-9][\d,]* instances$", log.read_text(), re.M),
                "a progress line with instances")
        else:
            _wait_while_running(proc, shard.exists, f"{shard} (a worker making it)")
        assert tmp.exists() and shard.exists() == (workers != "0")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = log.read_text()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "create_pretraining_data.py: interrupted (SIGINT)"
    assert not (tmp_path / "out").exists()  # made by the run, empty: removed with the files


def test_stale_temporaries_of_dead_runs_are_removed(world, tmp_path):
    out = tmp_path / "out.tfrecord"
    dead = dead_pid()
    stale = [tmp_path / f"out.tfrecord.tmp-{dead}", tmp_path / f"out.tfrecord.shards.tmp-{dead}"]
    stale[0].write_bytes(b"x" * 1000)
    stale[1].mkdir()
    (stale[1] / "shard-000000.tfrecord").write_bytes(b"x" * 500)
    alive = tmp_path / f"out.tfrecord.tmp-{os.getpid()}"  # a running process's: kept
    alive.write_bytes(b"y")
    other = tmp_path / f"other.tfrecord.tmp-{dead}"  # not this run's output: kept
    other.write_bytes(b"z")
    flags = cpd_flags(world, str(out))
    proc = run_script("create_pretraining_data", [f"{k}={v}" for k, v in flags.items()])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"Removed 2 stale temporary file\(s\) of killed runs \(0\.0 MB\): ",
                     proc.stderr)
    assert not any(p.exists() for p in stale)
    assert alive.exists() and other.exists() and out.stat().st_size > 0


# -- python -m bert_mgpu.compat USER_FILE.py (users' own TF1-era files) ------------------------

def run_compat(user_file, args, cwd):
    return subprocess.run([sys.executable, "-m", "bert_mgpu.compat", str(user_file), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=script_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))


def assert_one_compat_error(proc, pattern):
    """Exit code 1, one `bert_mgpu.compat: ERROR: FILE:LINE: ...` line, the last, no traceback."""
    err = proc.stderr
    assert proc.returncode == 1 and "Traceback" not in err, (proc.returncode, err[-3000:])
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if ": ERROR: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0], err[-3000:]
    assert re.match(r"bert_mgpu\.compat: ERROR: \S+\.py:\d+: ", errors[0]), errors[0]
    assert re.search(pattern, errors[0]), (pattern, errors[0])


def test_compat_estimator_use_is_one_line_naming_the_projects_script(world, tmp_path):
    """Google's own run_classifier.py (eedf571) through the runner: everything before its
    TPUEstimator runs (flags, modeling, tokenization), then one line at the first Estimator
    name, pointing at the project's run_classifier.py, which takes the same flags."""
    google = os.path.join(REPO, "..", "shared", "material", "oracles", "google_bert_eedf571",
                          "run_classifier.py")
    if not os.path.exists(google):
        google = "/work/shared/material/oracles/google_bert_eedf571/run_classifier.py"
    if not os.path.exists(google):
        pytest.skip("Google's scripts (material/oracles) not available")
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    for split in ("train", "dev"):
        write_tsv(mrpc / f"{split}.tsv", [["Quality", "#1 ID", "#2 ID", "#1 String",
                                           "#2 String"], ["1", "1", "2", "good", "fine"]])
    proc = run_compat(google, ["--task_name=MRPC", "--do_train=true", f"--data_dir={mrpc}",
                               f"--vocab_file={world['vocab']}",
                               f"--bert_config_file={world['config']}",
                               f"--init_checkpoint={world['ckpt']}", "--max_seq_length=32",
                               f"--output_dir={tmp_path / 'out'}"], tmp_path)
    assert_one_compat_error(proc, r"run_classifier\.py:\d+: tf\.contrib\.tpu\.\w+ is not "
                                  r"available in TensorFlow 2\.21; use the project's "
                                  r"run_classifier\.py")
    assert not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("source, pattern", [
    ("import tensorflow as tf\nfrom bert import modeling, run_pretraining\n",
     r"user\.py:2: bert\.run_pretraining is not provided by bert_mgpu\.compat \(it provides "
     r"modeling, tokenization, optimization, run_classifier, also as bert\.\*\); use the "
     r"project's run_pretraining\.py"),
    ("import modeling\nimport tokenization\nimport pandaz\n",
     r"user\.py:3: No module named 'pandaz' \(neither installed nor next to the script\)"),
], ids=["google-module-not-provided", "module-not-installed"])
def test_compat_missing_module_is_one_line(tmp_path, source, pattern):
    (tmp_path / "user.py").write_text(source)
    assert_one_compat_error(run_compat(tmp_path / "user.py", [], tmp_path), pattern)
