"""Processors files as users wrote them (issue 48, section 2; issue 51's processors items): real
files from public repositories (read from the repositories' snapshots when the tests run:
tests/_third_party.py, provenance and licences in tests/PROVENANCE.md), each run by the user's
own launch command with only --processors_file added:

- CLUE's processors (CLUEbenchmark/CLUE): `--task_name=iflytek` picks iFLYTEKDataProcessor
  through the `processors = {...}` mapping of the file's main(), read, not run;
- BlueBERT's HoCProcessor (ncbi-nlp/bluebert): its own flags (`flags.DEFINE_list(
  "aspect_value_list", ...)`) parsed from the command line with the script's, read through
  `FLAGS` in get_labels(); its examples are multi-label (labels joined by commas) and train with
  --task_type=multilabel;
- a processors file with a byte-order mark and CRLF line endings, reading data files that have
  them too."""

import json
import os
import re
import sys

import _third_party
import numpy as np
import pytest
from _launch import env_without_tensorflow
from _oracle import REPO, run_json_request
from _tiny_bert import WORDS, tiny_bert_dir
from _together import run_command, started

from bert_mgpu import tokenization
from bert_mgpu.data import classifier_data, processors, user_processors

# Beyond the tiny vocabulary's words: case, accents, punctuation, CJK (one token each).
EXTRA = ["Café", "GOOD,", "电影", "很好!", "naïve"]


@pytest.fixture(scope="module")
def pasted(tmp_path_factory):
    """The users' processors files by name ("clue_iflytek.py", "bluebert_hoc.py", and those of
    tests/test_user_processors.py), assembled from their repositories' snapshots (skips without
    them)."""
    root = tmp_path_factory.mktemp("pasted")
    return lambda name: _third_party.processors_file(name, root)


def text(rng, n=None):
    words = list(rng.choice(WORDS, size=n or rng.randint(2, 8)))
    if rng.randint(3) == 0:
        words.insert(rng.randint(len(words)), EXTRA[rng.randint(len(EXTRA))])
    return " ".join(words)


def write(path, content, encoding="utf-8", newline=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding=encoding, newline=newline) as f:
        f.write(content)


def iflytek_rows(rng, n, test=False):
    """CLUE's iflytek_public train/dev/test.json: one JSON object a line (label "0".."118",
    label_des, sentence; the test file: id, sentence)."""
    rows = []
    for i in range(n):
        row = {"id": i} if test else {"label": str(rng.randint(119)), "label_des": "app"}
        row["sentence"] = text(rng)
        rows.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(rows)


def hoc_rows(rng, n):
    """BlueBERT's HoC train/dev/test.tsv: a header, then the labels (one `aspect_value` per
    aspect 0..9, joined by commas) and the sentence."""
    rows = ["labels\tsentence\tindex\n"]
    for i in range(n):
        labels = ",".join(f"{a}_{rng.randint(2)}" for a in range(10))
        rows.append(f"{labels}\t{text(rng)}\t{i}\n")
    return "".join(rows)


# ---------------------------------------------------------------------------------------------
# In process: the mapping, the flags, multi-label examples (no TensorFlow needed)

def test_task_name_keys_come_from_the_files_processors_mapping(tmp_path, pasted):
    clue = pasted("clue_iflytek.py")
    p = user_processors.processor_for("iflytek", processors_file=clue)
    assert p.cls.__name__ == "iFLYTEKDataProcessor"  # Google's convention gives "iflytekdata"
    assert p.get_labels() == [str(i) for i in range(119)]
    assert user_processors.processor_for("IFLYTEK", processors_file=clue).cls is p.cls
    # The mapping's key wins over a built-in task of the same name, as the file's classes do.
    assert user_processors.processor_for("xnli", processors_file=clue).cls.__name__ == \
        "XnliProcessor"
    with pytest.raises(ValueError, match=r"task not found: 'ifly' \(known: cola, .*; in "
                                         r"--processors_file=.*clue_iflytek\.py: XnliProcessor "
                                         r"\(xnli\), TnewsProcessor \(tnews\), "
                                         r"iFLYTEKDataProcessor \(iflytek\), "):
        user_processors.processor_for("ifly", processors_file=clue)
    # A mapping at module level works as one in main().
    path = tmp_path / "p.py"
    path.write_text("from run_classifier import DataProcessor\n"
                    "class MyTaskProcessor(DataProcessor):\n"
                    "  def get_train_examples(self, data_dir):\n    return []\n"
                    "  def get_dev_examples(self, data_dir):\n    return []\n"
                    "  def get_labels(self):\n    return ['a']\n"
                    "processors = {'sentiment': MyTaskProcessor}\n")
    assert user_processors.processor_for("sentiment", processors_file=str(path)).cls.__name__ \
        == "MyTaskProcessor"


def test_a_mapping_naming_a_missing_class(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("from run_classifier import DataProcessor\n"
                    "class MyTaskProcessor(DataProcessor):\n"
                    "  def get_train_examples(self, data_dir):\n    return []\n"
                    "  def get_dev_examples(self, data_dir):\n    return []\n"
                    "  def get_labels(self):\n    return ['a']\n"
                    "def main(_):\n"
                    "  processors = {'sentiment': MyTaskProcessor, 'cola': ColaProcessor,\n"
                    "                'gone': GoneProcessor}\n")
    assert user_processors.processor_for("sentiment", processors_file=str(path)).cls.__name__ \
        == "MyTaskProcessor"
    assert isinstance(user_processors.processor_for("cola", processors_file=str(path)),
                      processors.ColaProcessor)
    with pytest.raises(processors.DataError, match=r"--task_name=gone: the processors mapping "
                                                   r"of --processors_file=.*p\.py gives it "
                                                   r"GoneProcessor, which the file does not "
                                                   r"define \(its classes: MyTaskProcessor "
                                                   r"\(sentiment\)\)"):
        user_processors.processor_for("gone", processors_file=str(path))


def test_the_files_own_flags_and_multilabel_examples(tmp_path, pasted):
    hoc = pasted("bluebert_hoc.py")
    rng = np.random.RandomState(0)
    for split in ("train", "dev"):
        write(tmp_path / f"{split}.tsv", hoc_rows(rng, 3))
    flags = user_processors.declared_flags(hoc, {"data_dir", "task_name"})
    assert {name: (f.kind, f.default) for name, f in flags.items()} == {
        "num_classes": ("integer", 80), "num_aspects": ("integer", 20),
        "aspect_value_list": ("list", [-2, -1, 0, 1])}
    # The run's values (the script hands them over as cfg.flags).
    user_processors.set_run_flags({"num_aspects": 10, "aspect_value_list": ["0", "1"],
                                   "num_classes": 20, "data_dir": str(tmp_path)})
    try:
        p = user_processors.processor_for("hoc", processors_file=hoc, task_type="multilabel")
        assert p.get_labels() == [f"{a}_{v}" for a in range(10) for v in (0, 1)]
        train = p.get_train_examples(str(tmp_path))
        rows = (tmp_path / "train.tsv").read_text().splitlines()[1:]
        assert [e.label for e in train] == [r.split("\t")[0] for r in rows]
        # A label outside get_labels() (aspect value 2) is named.
        write(tmp_path / "dev.tsv", "labels\tsentence\n0_1,1_2\tthe movie\n")
        with pytest.raises(processors.DataError, match=r"example dev-1 has the label "
                                                       r"'0_1,1_2', not one of get_labels"):
            p.get_dev_examples(str(tmp_path))
    finally:
        user_processors.set_run_flags(None)
    # As a single-label task the comma-joined labels are not labels of get_labels().
    with pytest.raises(processors.DataError, match=r"has the label '0_"):
        user_processors.processor_for("hoc", processors_file=hoc).get_train_examples(
            str(tmp_path))


BOM_PROCESSOR = (
    "\ufeff# -*- coding: utf-8 -*-\r\n"
    "import os\r\n"
    "from run_classifier import DataProcessor, InputExample\r\n"
    "\r\n"
    "class ReviewsProcessor(DataProcessor):\r\n"
    "  def get_train_examples(self, data_dir):\r\n"
    "    lines = self._read_tsv(os.path.join(data_dir, 'train.tsv'))\r\n"
    "    return [InputExample('train-%d' % i, line[1], None, line[0])\r\n"
    "            for i, line in enumerate(lines)]\r\n"
    "  def get_dev_examples(self, data_dir):\r\n"
    "    with open(os.path.join(data_dir, 'dev.tsv')) as f:\r\n"
    "      return [InputExample('dev-%d' % i, l.rstrip('\\n').split('\\t')[1], None,\r\n"
    "                           l.split('\\t')[0]) for i, l in enumerate(f)]\r\n"
    "  def get_test_examples(self, data_dir):\r\n"
    "    return self._read_tsv(os.path.join(data_dir, 'test.tsv')) and [\r\n"
    "        InputExample('test-%d' % i, line[1], None, line[0])\r\n"
    "        for i, line in enumerate(self._read_tsv(os.path.join(data_dir, 'test.tsv')))]\r\n"
    "  def get_labels(self):\r\n"
    "    return ['neg', 'café']  # not sorted: the user's order is the label ids'\r\n"
    "\r\n"
    "processors = {'reviews': ReviewsProcessor}\r\n")


def test_a_processors_file_and_data_with_a_bom_and_crlf(tmp_path):
    """Saved by a Windows editor: the file and the data files it reads start with a UTF-8
    byte-order mark and end lines with CRLF. The mark is dropped (the first label is 'café',
    not '\\ufeffcafé'), CRLF read as Python reads text."""
    path = tmp_path / "p.py"
    path.write_bytes(BOM_PROCESSOR.encode("utf-8"))
    data = tmp_path / "data"
    for split in ("train", "dev"):
        write(data / f"{split}.tsv", "\ufeffcafé\tthe movie\r\nneg\tbad plot\r\n")
    p = user_processors.processor_for("reviews", processors_file=str(path))
    assert p.get_labels() == ["neg", "café"]
    for split in ("train", "dev"):
        assert getattr(p, f"get_{split}_examples")(str(data)) == [
            processors.InputExample(f"{split}-0", "the movie", None, "café"),
            processors.InputExample(f"{split}-1", "bad plot", None, "neg")]


# ---------------------------------------------------------------------------------------------
# The users' launch commands, with only --processors_file added (--task_type=multilabel for the
# multi-label one)

def clue_command(root, clue):
    """run_classifier_iflytek.sh's command (its variables expanded into `root`)."""
    rng = np.random.RandomState(1)
    data = root / "CLUEdataset" / "iflytek"
    for split, n in (("train", 24), ("dev", 6)):
        write(data / f"{split}.json", iflytek_rows(rng, n))
    model = tiny_bert_dir(root / "prev_trained_model" / "chinese_L-12_H-768_A-12")
    return [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=iflytek",
            "--do_train=true", "--do_eval=true", f"--data_dir={data}",
            f"--vocab_file={model}/vocab.txt", f"--bert_config_file={model}/bert_config.json",
            f"--init_checkpoint={model}/bert_model.ckpt", "--max_seq_length=128",
            "--train_batch_size=32", "--learning_rate=2e-5", "--num_train_epochs=3.0",
            f"--output_dir={root / 'iflytek_output'}/", f"--processors_file={clue}"]


def hoc_command(root, hoc):
    """BlueBERT's README command for HoC (--num_train_epochs and sizes kept)."""
    rng = np.random.RandomState(2)
    data = root / "hoc"
    for split, n in (("train", 12), ("dev", 4), ("test", 5)):
        write(data / f"{split}.tsv", hoc_rows(rng, n))
    model = tiny_bert_dir(root / "bluebert")
    return [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=hoc",
            "--do_train=true", "--do_eval=true", "--do_predict=true",
            f"--vocab_file={model}/vocab.txt", f"--bert_config_file={model}/bert_config.json",
            f"--init_checkpoint={model}/bert_model.ckpt", "--max_seq_length=128",
            "--train_batch_size=4", "--learning_rate=2e-5", "--num_train_epochs=3",
            "--num_classes=20", "--num_aspects=10", "--aspect_value_list=0,1",
            f"--data_dir={data}", f"--output_dir={root / 'out'}",
            f"--processors_file={hoc}", "--task_type=multilabel"]


def bom_command(root):
    """A Windows user's files (BOM, CRLF) through train and predict, labels in their order."""
    path = root / "p.py"
    write(path, BOM_PROCESSOR, newline="")
    rng = np.random.RandomState(3)
    for split, n in (("train", 16), ("test", 5)):
        rows = "".join(f"{['neg', 'café'][i % 2]}\t{text(rng)}\r\n" for i in range(n))
        write(root / "data" / f"{split}.tsv", "\ufeff" + rows, newline="")
    model = tiny_bert_dir(root / "model")
    return [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=reviews",
            "--do_train=true", "--do_predict=true", f"--data_dir={root / 'data'}",
            f"--vocab_file={model}/vocab.txt", f"--bert_config_file={model}/bert_config.json",
            f"--init_checkpoint={model}/bert_model.ckpt", "--max_seq_length=16",
            "--train_batch_size=8", "--num_train_epochs=1", f"--output_dir={root / 'out'}",
            f"--processors_file={path}"]


def launch_job(command, root, pasted, name):
    """The job that runs `command(root, the processors file `name`)` and returns (the process,
    root). Without the user's file (no snapshot of its repository) the job raises the skip, so
    that only the tests reading this run skip."""
    try:
        cmd = command(root, pasted(name))
    except pytest.skip.Exception as e:
        def job(skipped=e):
            raise skipped
        return job
    return lambda: (run_command(cmd), root)


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("processors_files")


@pytest.fixture(scope="module")
def runs(runs_root, pasted):
    root = runs_root
    bom = bom_command(root / "bom")
    jobs = {"clue": launch_job(clue_command, root / "clue", pasted, "clue_iflytek.py"),
            "hoc": launch_job(hoc_command, root / "hoc", pasted, "bluebert_hoc.py"),
            "bom": lambda: (run_command(bom), root / "bom")}
    with started(jobs) as futures:
        yield futures


def test_clues_launch_command_runs_with_its_task_name_key(runs):
    proc, root = runs["clue"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "iflytek_output"
    config = json.loads((out / "run_config.json").read_text())
    assert config["labels"] == [str(i) for i in range(119)]
    result = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().split("\n")
                  if line)
    assert result["eval_examples"] == "6"
    assert (out / "model.ckpt-2.index").exists()  # int(24 / 32 * 3)


def test_bluebert_multilabel_command_with_its_own_flags(runs):
    """--num_aspects=10 --aspect_value_list=0,1 reach get_labels() through FLAGS: 20 labels
    (the file's defaults would give 80); the run trains one sigmoid per label and predict.txt
    names the labels above the threshold."""
    proc, root = runs["hoc"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "out"
    labels = [f"{a}_{v}" for a in range(10) for v in (0, 1)]
    config = json.loads((out / "run_config.json").read_text())
    assert config["labels"] == labels and config["task_type"] == "multilabel"
    assert config["aspect_value_list"] == ["0", "1"]
    assert config["num_aspects"] == 10
    assert (out / "label_list.txt").read_text().splitlines() == labels
    probabilities = np.loadtxt(out / "test_results.tsv")
    assert probabilities.shape == (5, 20)  # the header skipped, as the processor does
    predicted = (out / "predict.txt").read_text().splitlines()
    assert predicted == [",".join(name for name, p in zip(labels, row) if p > 0.5)
                         for row in probabilities]


def test_get_labels_order_is_kept_end_to_end(runs):
    """get_labels() = ['neg', 'café'] (not sorted): label id 0 is 'neg' in the training records,
    run_config.json and label_list.txt; test_results.tsv's columns and predict.txt's indices
    follow it. The files have a BOM and CRLF: 'café' of the first line is a label."""
    proc, root = runs["bom"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "out"
    assert json.loads((out / "run_config.json").read_text())["labels"] == ["neg", "café"]
    assert (out / "label_list.txt").read_text(encoding="utf-8").splitlines() == ["neg", "café"]
    (train,) = out.glob("train.*.tf_record")
    assert [r["label_ids"] for r in records(train)] == [[i % 2] for i in range(16)]
    probabilities = np.loadtxt(out / "test_results.tsv")
    assert probabilities.shape == (5, 2)
    assert [int(i) for i in (out / "predict.txt").read_text().split()] == \
        [int(i) for i in np.argmax(probabilities, axis=1)]


BAD_FLAGS = [
    ("flags = tf.flags\nflags.DEFINE_string('aspect', 'a', 'x')\n"
     "flags.DEFINE_integer('aspect', 1, 'y')\n",
     r"^run_classifier\.py: ERROR: .*p\.py:5 in <module>: DuplicateFlagError: flag --aspect is "
     r"defined twice \(first at .*p\.py:4\)$"),
    ("flags = tf.flags\nflags.DEFINE_string('data_dir', None, 'The input data dir.')\n",
     r"^run_classifier\.py: ERROR: .*p\.py:4: flags\.DEFINE_string\('data_dir', \.\.\.\) defines "
     r"--data_dir, which the script already has: delete that line \(FLAGS\.data_dir reads the "
     r"run's --data_dir\)$"),
    ("FLAGS = tf.flags.FLAGS\n", r"^run_classifier\.py: ERROR: .*p\.py:10 in get_labels: "
                                 r"AttributeError: FLAGS\.num_labels is not a flag"),
    ("flags = tf.flags\nflags.DEFINE_integer('num_labels', 3, 'x')\nFLAGS = flags.FLAGS\n"
     "N = FLAGS.num_labels\n",
     r"^run_classifier\.py: ERROR: .*p\.py:6 in <module>: AttributeError: FLAGS\.num_labels is "
     r"read while the file loads, before the flags are parsed: read it in the processor's "
     r"methods$"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS)
def test_a_processors_files_bad_flags_are_one_line_before_tensorflow(tmp_path, flags, message):
    """Run where importing TensorFlow fails: the flags and get_labels() are checked before."""
    path = tmp_path / "p.py"
    path.write_text("import tensorflow as tf\nfrom run_classifier import DataProcessor\n"
                    + flags + "class FooProcessor(DataProcessor):\n"
                    "  def get_train_examples(self, data_dir):\n    return []\n"
                    "  def get_dev_examples(self, data_dir):\n    return []\n"
                    "  def get_labels(self):\n    return [str(FLAGS.num_labels)]\n")
    model = tiny_bert_dir(tmp_path / "model")
    proc = run_command([sys.executable, os.path.join(REPO, "run_classifier.py"),
                        "--task_name=foo", "--do_train=true", f"--data_dir={tmp_path}",
                        f"--vocab_file={model}/vocab.txt",
                        f"--bert_config_file={model}/bert_config.json",
                        f"--output_dir={tmp_path / 'out'}", f"--processors_file={path}"],
                       env=env_without_tensorflow(tmp_path))
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert re.search(message, proc.stderr.strip()), proc.stderr


# ---------------------------------------------------------------------------------------------
# The same files under Google's own run_classifier.py (the eedf571 oracle): the same examples,
# labels and features (Google's convert_single_example)

def fork_files(data, rng):
    from test_user_processors import high_level_rows
    write(data / "train_without_content_0515.txt", high_level_rows(rng, 6))
    write(data / "test_without_content_0515.txt", high_level_rows(rng, 3))


def emlo_files(data, rng):
    write(data / "train.csv", "label,x_train\n" + "".join(
        f"{rng.choice(['neutral', 'positive', 'negative'])},{text(rng)}\n" for _ in range(6)))
    write(data / "dev.csv", "label,x_valid\npositive,great\nnegative,Café bad\n")


def lcqmc_files(data, rng):
    from test_user_processors import jd_rows, lcqmc_rows
    for split in ("train", "dev", "test"):
        write(data / f"{split}.txt", lcqmc_rows(rng, 4))
    write(data / "jd_train.csv", jd_rows(rng, 5))


def clue_files(data, rng):
    write(data / "train.json", iflytek_rows(rng, 6))
    write(data / "dev.json", iflytek_rows(rng, 3))
    write(data / "test.json", iflytek_rows(rng, 3, test=True))


def hoc_files(data, rng):
    for split, n in (("train", 5), ("dev", 3), ("test", 3)):
        write(data / f"{split}.tsv", hoc_rows(rng, n))


# (file, --task_name, Google's class, splits, data files, the file's flags, multilabel)
PASTED = [
    ("high_level.py", "high_level", "HighLevelProcessor", ["train", "dev"], fork_files, [],
     False),
    ("emlo.py", "emlo", "EmloProcessor", ["train", "dev"], emlo_files, [], False),
    ("lcqmc.py", "lcqmc", "LCQMCProcessor", ["train", "dev", "test"], lcqmc_files, [], False),
    ("lcqmc.py", "jdcomment", "JDCOMMENTProcessor", ["train"], lcqmc_files, [], False),
    ("clue_iflytek.py", "iflytek", "iFLYTEKDataProcessor", ["train", "dev", "test"], clue_files,
     [], False),
    ("bluebert_hoc.py", "hoc", "HoCProcessor", ["train", "dev", "test"], hoc_files,
     ["--num_aspects=10", "--aspect_value_list=0,1"], True),
]


def google_request(path, cls, splits, argv, multilabel, data, vocab, max_seq_length=24):
    """One case of tests/oracles/google_user_processors.py's request."""
    return {"processors_file": path, "class": cls, "data_dir": str(data), "vocab_file": vocab,
            "do_lower_case": True, "max_seq_length": max_seq_length, "splits": splits,
            "argv": argv, "multilabel": multilabel}


def googles(tmp_path, requests):
    """Google's results of `requests` (a list of cases), all from one oracle process."""
    stdout = run_json_request("google_user_processors.py", requests, tmp_path)
    results = json.loads(stdout.splitlines()[-1])  # the last line: above it, what files print
    assert len(results) == len(requests)
    return results


@pytest.fixture(scope="module")
def pasted_cases(tmp_path_factory, pasted):
    """{task: (the processors file, its data folder, vocab.txt, Google's result)} for the cases
    of PASTED, Google's side from one oracle run (its start-up, TensorFlow's import, once); a
    case whose file is unavailable (no snapshot of its repository) maps to its skip."""
    root = tmp_path_factory.mktemp("pasted_cases")
    vocab = os.path.join(tiny_bert_dir(root / "model"), "vocab.txt")
    cases, requests = {}, []
    for name, task, cls, splits, files, argv, multilabel in PASTED:
        try:
            path = pasted(name)
        except pytest.skip.Exception as e:
            cases[task] = e
            continue
        data = root / task / "data"
        files(data, np.random.RandomState(5))
        cases[task] = (path, data, vocab)
        requests.append(google_request(path, cls, splits, argv, multilabel, data, vocab))
    results = iter(googles(root, requests) if requests else [])
    return {task: case if isinstance(case, pytest.skip.Exception) else case + (next(results),)
            for task, case in cases.items()}


@pytest.mark.parametrize("name,task,cls,splits,files,argv,multilabel", PASTED,
                         ids=[case[1] for case in PASTED])
def test_the_pasted_processors_give_googles_examples_and_features(
        pasted_cases, name, task, cls, splits, files, argv, multilabel):
    if isinstance(pasted_cases[task], pytest.skip.Exception):
        raise pasted_cases[task]
    path, data, vocab, google = pasted_cases[task]
    task_type = "multilabel" if multilabel else "classification"
    user_processors.set_run_flags({"num_aspects": 10, "aspect_value_list": ["0", "1"]})
    try:
        p = user_processors.processor_for(task, processors_file=path, task_type=task_type)
        labels = p.get_labels()
        tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
        ours = {split: getattr(p, f"get_{split}_examples")(str(data)) for split in splits}
    finally:
        user_processors.set_run_flags(None)
    assert p.cls.__name__ == cls
    assert labels == google["labels"]  # get_labels()'s order: the label ids
    label_map = {label: i for i, label in enumerate(labels)}
    for split in splits:
        assert len(ours[split]) == len(google[split]) > 0, split
        for example, row in zip(ours[split], google[split]):
            guid, text_a, text_b, label, input_ids, input_mask, segment_ids, label_id = row
            assert (example.guid, example.text_a, example.text_b) == (guid, text_a, text_b)
            feature = classifier_data.convert_single_example(example, label_map, 24, tokenizer,
                                                             task_type=task_type)
            assert (feature["input_ids"], feature["input_mask"], feature["segment_ids"]) == (
                input_ids, input_mask, segment_ids), (split, guid)
            if example.label is None:  # a test file's placeholder label outside get_labels()
                assert split == "test" and label not in labels
            elif multilabel:
                assert (example.label, feature["label_values"]) == (label, label_id)
            else:
                assert (example.label, feature["label_ids"]) == (label, [label_id])


def records(path):
    import tensorflow as tf

    return [{k: list(v.int64_list.value or v.float_list.value)
             for k, v in tf.train.Example.FromString(r.numpy()).features.feature.items()}
            for r in tf.data.TFRecordDataset(str(path))]


# The runs' files: (processors file, Google's class, its flags, data folder, model folder).
RUN_FILES = {
    "clue": ("clue_iflytek.py", "iFLYTEKDataProcessor", [], "clue/CLUEdataset/iflytek",
             "clue/prev_trained_model/chinese_L-12_H-768_A-12"),
    "hoc": ("bluebert_hoc.py", "HoCProcessor", ["--num_aspects=10", "--aspect_value_list=0,1"],
            "hoc/hoc", "hoc/bluebert"),
}


@pytest.fixture(scope="module")
def googles_records(runs, runs_root, pasted, tmp_path_factory):
    """{run: Google's examples and features of the run's training file} for the clue and hoc
    runs (their files are written before the runs start), from one oracle process; a run whose
    processors file is unavailable maps to its skip."""
    cases, requests = {}, []
    for run, (name, cls, argv, data, model) in RUN_FILES.items():
        try:
            path = pasted(name)
        except pytest.skip.Exception as e:
            cases[run] = e
            continue
        cases[run] = None
        requests.append(google_request(path, cls, ["train"], argv, run == "hoc",
                                       runs_root / data, str(runs_root / model / "vocab.txt"),
                                       max_seq_length=128))
    results = iter(googles(tmp_path_factory.mktemp("googles_records"), requests)
                   if requests else [])
    return {run: case or next(results) for run, case in cases.items()}


@pytest.mark.parametrize("run", ["clue", "hoc"])
def test_the_runs_records_are_googles_features(runs, googles_records, run):
    """The training records the scripts wrote (the feature cache in --output_dir) equal Google's
    convert_single_example of the same files, label ids in get_labels()'s order."""
    if isinstance(googles_records[run], pytest.skip.Exception):
        raise googles_records[run]
    proc, root = runs[run].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / ("iflytek_output" if run == "clue" else "out")
    google = googles_records[run]
    (train,) = out.glob("train.*.tf_record")
    written = records(train)
    assert len(written) == len(google["train"]) > 0
    for record, row in zip(written, google["train"]):
        assert record["input_ids"] == row[4] and record["segment_ids"] == row[6]
        if run == "hoc":
            assert record["label_values"] == row[7]
        else:
            assert record["label_ids"] == [row[7]]


def test_a_task_name_key_not_in_the_mapping_is_one_line_before_tensorflow(tmp_path, pasted):
    model = tiny_bert_dir(tmp_path / "model")
    proc = run_command([sys.executable, os.path.join(REPO, "run_classifier.py"),
                        "--task_name=iflytk", "--do_train=true", f"--data_dir={tmp_path}",
                        f"--vocab_file={model}/vocab.txt",
                        f"--bert_config_file={model}/bert_config.json",
                        f"--output_dir={tmp_path / 'out'}",
                        f"--processors_file={pasted('clue_iflytek.py')}"],
                       env=env_without_tensorflow(tmp_path))
    assert proc.returncode == 1
    assert re.fullmatch(r"run_classifier\.py: ERROR: --task_name: task not found: 'iflytk' "
                        r"\(known: cola, .*; in --processors_file=.*clue_iflytek\.py: "
                        r"XnliProcessor \(xnli\), TnewsProcessor \(tnews\), "
                        r"iFLYTEKDataProcessor \(iflytek\), .*\)", proc.stderr.strip()), \
        proc.stderr


def test_help_lists_the_files_own_flags(tmp_path, pasted):
    proc = run_command([sys.executable, os.path.join(REPO, "run_classifier.py"),
                        f"--processors_file={pasted('bluebert_hoc.py')}", "--help"],
                       env=env_without_tensorflow(tmp_path))
    assert proc.returncode == 0, proc.stderr
    help_text = proc.stdout + proc.stderr
    assert "--aspect_value_list: Values that a aspect can have" in help_text
    assert "--num_aspects: Total number of aspect" in help_text
    assert "--data_dir:" in help_text
