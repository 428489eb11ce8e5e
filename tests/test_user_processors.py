"""--processors_file (issue 30): users' own DataProcessor classes, written for Google's
run_classifier.py, pasted unchanged from public repositories (read from the repositories'
snapshots when the tests run: tests/_third_party.py, provenance and licences in
tests/PROVENANCE.md): the multi-GPU fork's HighLevelProcessor (zhp510730568/bert-1),
a CSV processor reading through the csv module (EmloProcessor,
wangjiwu/BERT-emotion-classification) and sentence-pair processors (LCQMCProcessor and
JDCOMMENTProcessor, ChineseGLUE/ChineseGLUE)."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import _third_party
import numpy as np
import pytest
from _launch import script_env
from _oracle import REPO
from _tiny_bert import WORDS, tiny_bert_dir
from _together import changed_flags, run_command, started

from bert_mgpu import tokenization
from bert_mgpu.data import classifier_data, processors, user_processors


@pytest.fixture(scope="module")
def pasted(tmp_path_factory):
    """The users' processors files by name ("high_level.py", "emlo.py", "lcqmc.py"), assembled
    from their repositories' snapshots (skips without them)."""
    root = tmp_path_factory.mktemp("pasted")
    return lambda name: _third_party.processors_file(name, root)


# The fork's launch command (zhp510730568/bert-ad README, the companion repository of the
# fork's run_classifier_mgpu.py), joined into one line; it runs in a directory with its
# ./data and ./model. Here: --processors_file added, --n_gpus=2 (the test machine has no 6 GPUs).
FORK_COMMAND = (
    "python -u run_classifier_mgpu.py --task_name=high_level --do_train=true --do_predict=false "
    "--do_eval=false --data_dir=./data/high_level/ "
    "--vocab_file=./model/chinese_L-12_H-768_A-12/vocab.txt "
    "--bert_config_file=./model/chinese_L-12_H-768_A-12/bert_config.json "
    "--init_checkpoint=./model/chinese_L-12_H-768_A-12/bert_model.ckpt --max_seq_length=512 "
    "--train_batch_size=12 --learning_rate=2e-5 --num_train_epochs=5 "
    "--output_dir=./model/highlevel/model_mgpu_test/ --warmup_proportion=0.1 "
    "--eval_batch_size=1 --n_gpus=6")


def text(rng, n=None):
    return " ".join(rng.choice(WORDS, size=n or rng.randint(2, 8)))


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


def high_level_rows(rng, n):
    """The fork's layout (from its code): id, category, label 0/1, title; no header."""
    return "".join(f"id{i}\t{rng.choice(['game', 'news'])}\t{i % 2}\t{text(rng).title()}\n"
                   for i in range(n))


def jd_rows(rng, n):
    """JDCOMMENTProcessor's jd_*.csv: a header, then label (1..5), text_a, text_b, quoted
    where a field has a comma."""
    return "label,a,b\n" + "".join(f'{1 + i % 5},"{text(rng)}, {text(rng)}",{text(rng)}\n'
                                    for i in range(n))


def lcqmc_rows(rng, n):
    """LCQMC's train/dev/test.txt: sentence 1, sentence 2, label; no header (the processor
    skips the first line anyway)."""
    return "".join(f"{text(rng)}\t{text(rng)}\t{i % 2}\n" for i in range(n))


# ---------------------------------------------------------------------------------------------
# The classes, in process (no TensorFlow needed to load or read them)

def test_task_name_picks_the_class_by_googles_convention(pasted):
    high_level, lcqmc = pasted("high_level.py"), pasted("lcqmc.py")
    for name in ("high_level", "highlevel", "HighLevelProcessor", "HIGH_LEVEL"):
        processor = user_processors.processor_for(name, processors_file=high_level)
        assert processor.cls.__name__ == "HighLevelProcessor"
    assert user_processors.processor_for("lcqmc", processors_file=lcqmc).cls.__name__ == \
        "LCQMCProcessor"
    assert user_processors.processor_for("jdcomment", processors_file=lcqmc).cls.__name__ == \
        "JDCOMMENTProcessor"
    # Built-in tasks stay reachable with a processors file.
    assert isinstance(user_processors.processor_for("mrpc", processors_file=lcqmc),
                      processors.MrpcProcessor)
    with pytest.raises(ValueError, match=r"task not found: 'nope' \(known: cola, .*; in "
                                         r"--processors_file=.*lcqmc\.py: LCQMCProcessor "
                                         r"\(lcqmc\), JDCOMMENTProcessor \(jdcomment\)\)"):
        user_processors.processor_for("nope", processors_file=lcqmc)


def test_high_level_processor_reads_the_forks_files(tmp_path, pasted):
    high_level = pasted("high_level.py")
    rng = np.random.RandomState(0)
    write(tmp_path / "train_without_content_0515.txt",
          "id1\tgame\t1\tSome \"Quoted\" Title\n" + high_level_rows(rng, 3))
    write(tmp_path / "test_without_content_0515.txt", high_level_rows(rng, 2))
    p = user_processors.processor_for("high_level", processors_file=high_level)
    assert p.get_labels() == ["0", "1"]
    train = p.get_train_examples(str(tmp_path))
    assert train[0] == processors.InputExample("train-0", 'some "quoted" title', None, "1")
    assert len(train) == 4 and len(p.get_dev_examples(str(tmp_path))) == 2
    assert p.input_files(str(tmp_path), "train") == [
        str(tmp_path / "train_without_content_0515.txt")]
    # The fork's base class has no get_test_examples: --do_predict is refused at start.
    with pytest.raises(processors.DataError, match=r"high_level\.py: HighLevelProcessor has no "
                                                   r"method get_test_examples\(\), which "
                                                   r"--do_predict needs"):
        p.check_splits(["train", "test"])


def test_csv_processor_reads_pandas_files_and_its_own_bug_is_one_line(tmp_path, pasted):
    """EmloProcessor: train.csv/dev.csv as pandas wrote them (header label,x_train) through
    csv.reader; its get_test_examples reads test.csv with Google's tab-separated _read_tsv, so
    the first row has one field: the IndexError is one line naming the user's file and line."""
    emlo = pasted("emlo.py")
    write(tmp_path / "train.csv", "label,x_train\nneutral,@mattlduff Not sure what to say.\n"
                                  "positive,so happy today\nnegative,bad day\n")
    write(tmp_path / "dev.csv", "label,x_valid\npositive,great\n")
    write(tmp_path / "test.csv", "label,x_test\nneutral,whatever\n")
    p = user_processors.processor_for("emlo", processors_file=emlo)
    assert p.get_labels() == ["neutral", "positive", "negative"]  # the user's order, kept
    assert p.get_train_examples(str(tmp_path)) == [
        processors.InputExample("train-1", "@mattlduff Not sure what to say.", None, "neutral"),
        processors.InputExample("train-2", "so happy today", None, "positive"),
        processors.InputExample("train-3", "bad day", None, "negative")]
    line = next(i for i, s in enumerate(open(emlo, encoding="utf-8"), 1)
                if "text_a = tokenization.convert_to_unicode(line[1])" in s)
    with pytest.raises(processors.DataError) as e:
        p.get_test_examples(str(tmp_path))
    assert str(e.value) == (f"{emlo}:{line} in _create_examples: IndexError: list index out of "
                            f"range")


def test_sentence_pair_processors(tmp_path, pasted):
    lcqmc = pasted("lcqmc.py")
    rng = np.random.RandomState(1)
    for split in ("train", "dev", "test"):
        write(tmp_path / f"{split}.txt", lcqmc_rows(rng, 4))
    p = user_processors.processor_for("lcqmc", processors_file=lcqmc)
    rows = [line.split("\t") for line in (tmp_path / "dev.txt").read_text().splitlines()]
    assert p.get_dev_examples(str(tmp_path)) == [
        processors.InputExample(f"dev-{i}", a, b, label) for i, (a, b, label) in
        enumerate(rows) if i > 0]  # LCQMC's processor skips the first line
    # JDCOMMENTProcessor: comma-separated, quoted fields with commas and newlines.
    write(tmp_path / "jd_train.csv", 'label,a,b\n5,"good, really","fine\nplot"\n1,bad,"x"\n')
    jd = user_processors.processor_for("jdcomment", processors_file=lcqmc)
    assert jd.get_train_examples(str(tmp_path)) == [
        processors.InputExample("train-1", "good, really", "fine\nplot", "5"),
        processors.InputExample("train-2", "bad", "x", "1")]


def test_feature_cache_key_covers_the_file_and_what_it_read(tmp_path, pasted):
    lcqmc = pasted("lcqmc.py")
    rng = np.random.RandomState(2)
    write(tmp_path / "data" / "train.txt", lcqmc_rows(rng, 4))
    data = str(tmp_path / "data")
    edited = tmp_path / "lcqmc_edited.py"
    edited.write_text(open(lcqmc, encoding="utf-8").read() + "\n# edited\n", encoding="utf-8")

    def key(path):
        p = user_processors.processor_for("lcqmc", processors_file=path)
        return classifier_data.cache_key("lcqmc", "train", p.input_files(data, "train"), None,
                                         None, True, 16, p.get_labels(), "head", 128,
                                         processor=p.cache_parts())

    assert key(lcqmc) != key(str(edited))  # the file's content
    before = key(lcqmc)
    os.utime(tmp_path / "data" / "train.txt", ns=(1, 1))  # the data file it read
    assert key(lcqmc) != before


@pytest.mark.parametrize("source,message", [
    ("class FooProcessor(object):\n  def get_train_examples(self, data_dir):\n    return []\n"
     "  def get_dev_examples(self, data_dir):\n    return []\n",
     r"p\.py: FooProcessor has no method get_labels\(\) \(Google's DataProcessor API: "),
    ("from run_classifier import DataProcessor\nclass FooProcessor(DataProcessor):\n"
     "  def get_train_examples(self, data_dir):\n    return []\n"
     "  def get_dev_examples(self, data_dir):\n    return []\n",
     r"FooProcessor\.get_labels\(\) is not implemented \(only the base class DataProcessor's"),
    ("class FooProcessor(object):\n  def get_train_examples(self):\n    return []\n"
     "  def get_dev_examples(self, data_dir):\n    return []\n  def get_labels(self):\n"
     "    return ['a']\n",
     r"FooProcessor\.get_train_examples\(self\) does not take Google's arguments "
     r"\(get_train_examples\(self, data_dir\)\)"),
    ("import os\nimport pandas_that_is_not_installed\n",
     r"p\.py:2 in <module>: ModuleNotFoundError: No module named 'pandas_that_is_not_installed'"),
    ("class FooProcessor(object):\n  def get_train_examples(self, data_dir)\n",
     r"p\.py:2: SyntaxError: expected ':'"),
])
def test_a_class_off_googles_api_is_one_line(tmp_path, source, message):
    path = tmp_path / "p.py"
    path.write_text(source)
    with pytest.raises(processors.DataError, match=message):
        user_processors.processor_for("foo", processors_file=str(path))


# A processor written against TF's newer names (tensorflow.compat.v1, tf.io.gfile,
# tf.compat.as_text), as users' processors ported to TF 1.14+ are.
COMPAT_PROCESSOR = """\
import tensorflow.compat.v1 as tf
from run_classifier import DataProcessor, InputExample


class PortedProcessor(DataProcessor):

  def get_train_examples(self, data_dir):
    path = data_dir + "/train.tsv"
    assert tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)
    with tf.io.gfile.GFile(path, "rb") as f:
      lines = [tf.compat.as_text(line).rstrip("\\n").split("\\t") for line in f]
    assert tf.compat.as_bytes(lines[0][1]) == "caf\\u00e9".encode("utf-8")
    return [InputExample("train-%d" % i, text, None, label) for i, (label, text) in
            enumerate(lines)]

  def get_dev_examples(self, data_dir):
    return []

  def get_labels(self):
    return ["a", "b"]
"""


def test_tensorflows_newer_names_work_in_a_processors_file(tmp_path):
    path = tmp_path / "ported.py"
    path.write_text(COMPAT_PROCESSOR, encoding="utf-8")
    write(tmp_path / "data" / "train.tsv", "a\tcaf\u00e9\nb\tbar\n")
    p = user_processors.processor_for("ported", processors_file=str(path))
    assert p.get_train_examples(str(tmp_path / "data")) == [
        processors.InputExample("train-0", "caf\u00e9", None, "a"),
        processors.InputExample("train-1", "bar", None, "b")]
    assert p.input_files(str(tmp_path / "data"), "train") == [str(tmp_path / "data" / "train.tsv")]


LABELS_FROM = ("import tensorflow as tf\nimport modeling\n"
               "from run_classifier import DataProcessor\n"
               "class FooProcessor(DataProcessor):\n"
               "  def get_train_examples(self, data_dir):\n    return []\n"
               "  def get_dev_examples(self, data_dir):\n    return []\n"
               "  def get_labels(self):\n    return {}\n")


@pytest.mark.parametrize("labels,message", [
    ("[str(tf.constant(1))]",
     r"/p\.py:10 in get_labels: AttributeError: tensorflow\.constant is not available "
     r"\(a --processors_file's tensorflow has gfile, io\.gfile, logging and compat"),
    ("tf.gfile.Remove('x')",
     r"/p\.py:10 in get_labels: AttributeError: tensorflow\.gfile\.Remove is not available"),
    ("modeling.BertConfig.from_json_file('c.json')",
     r"/p\.py:10 in get_labels: AttributeError: modeling\.BertConfig is not available \(a "
     r"--processors_file runs processors only: Google's models and optimizer are not in it\)$"),
])
def test_what_the_processors_files_tensorflow_lacks_is_one_line(tmp_path, labels, message):
    """TensorFlow beyond the shim's names, and Google's modeling, are not there: the error is
    one line naming the user's line and the name, not a silent TensorFlow import."""
    path = tmp_path / "p.py"
    path.write_text(LABELS_FROM.format(labels))
    with pytest.raises(processors.DataError, match=message):
        user_processors.processor_for("foo", processors_file=str(path)).get_labels()


def test_labels_the_class_does_not_know_are_named(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("from run_classifier import DataProcessor, InputExample\n"
                    "import tensorflow as tf\n"
                    "class FooProcessor(DataProcessor):\n"
                    "  def get_train_examples(self, data_dir):\n"
                    "    tf.logging.info('reading %s', data_dir)\n"
                    "    return [InputExample('t-1', 'good', None, 'maybe')]\n"
                    "  def get_dev_examples(self, data_dir):\n    return []\n"
                    "  def get_labels(self):\n    return ['yes', 'no']\n")
    p = user_processors.processor_for("foo", processors_file=str(path))
    with pytest.raises(processors.DataError, match=r"FooProcessor\.get_train_examples\(\): "
                                                   r"example t-1 has the label 'maybe', not one "
                                                   r"of get_labels\(\) \['yes', 'no'\]"):
        p.get_train_examples(str(tmp_path))
    assert user_processors.task_names("HighLevelProcessor") == [
        "highlevel", "high_level", "highlevelprocessor"]


# A processors file modelled on Google's API (google-research/bert's run_classifier.py and
# tokenization.py, as users' processors call them): files through tf.gfile.GFile, an optional
# dev file probed with tf.gfile.Exists, text through tokenization.FullTokenizer and logged with
# tokenization.printable_text, as Google's convert_single_example logs its tokens.
TF1_PROCESSOR = """\
import os

import tensorflow as tf

import tokenization
from run_classifier import DataProcessor, InputExample


class ReviewsProcessor(DataProcessor):

  def __init__(self):
    self.tokenizer = None

  def _tokenize(self, data_dir, text):
    if self.tokenizer is None:
      self.tokenizer = tokenization.FullTokenizer(
          vocab_file=os.path.join(data_dir, "vocab.txt"), do_lower_case=True)
    tokens = self.tokenizer.tokenize(tokenization.convert_to_unicode(text))
    tf.logging.info("tokens: %s" % " ".join([tokenization.printable_text(x) for x in tokens]))
    tf.logging.info("ids: %s" % " ".join(
        [str(x) for x in self.tokenizer.convert_tokens_to_ids(tokens)]))
    return " ".join(tokens)

  def _create_examples(self, data_dir, path, set_type):
    examples = []
    with tf.gfile.GFile(path, "r") as reader:
      for (i, line) in enumerate(reader):
        label, text = line.rstrip("\\n").split("\\t")
        examples.append(InputExample(guid="%s-%d" % (set_type, i),
                                     text_a=self._tokenize(data_dir, text), label=label))
    return examples

  def get_train_examples(self, data_dir):
    return self._create_examples(data_dir, os.path.join(data_dir, "train.tsv"), "train")

  def get_dev_examples(self, data_dir):
    path = os.path.join(data_dir, "dev.tsv")
    if not tf.gfile.Exists(path):
      tf.logging.warning("no dev file %s" % path)
      return []
    return self._create_examples(data_dir, path, "dev")

  def get_labels(self):
    return ["neg", "pos"]
"""
TF1_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "movie", "##s", "good", "bad", "cafe",
             ".", ","]


def test_googles_tf1_names_and_tokenization_work_in_a_processors_file(tmp_path, caplog):
    """tf.gfile.GFile/Exists, tokenization.FullTokenizer/printable_text/convert_to_unicode and
    tf.logging in a user's file: the examples read, the tokens Google's WordPiece gives (our
    FullTokenizer's), the files read recorded for the feature cache."""
    path = tmp_path / "tf1_processors.py"
    path.write_text(TF1_PROCESSOR, encoding="utf-8")
    data = tmp_path / "data"
    write(data / "vocab.txt", "\n".join(TF1_VOCAB) + "\n")
    write(data / "train.tsv", "pos\tThe movies were GOOD, Café.\nneg\tbad movie\n")
    caplog.set_level("INFO", logger="absl")  # absl's logger, whatever level a test left it at
    p = user_processors.processor_for("reviews", processors_file=str(path))
    assert p.get_labels() == ["neg", "pos"]
    train = p.get_train_examples(str(data))
    expected = ["the", "movie", "##s", "[UNK]", "good", ",", "cafe", "."]
    assert tokenization.FullTokenizer(str(data / "vocab.txt")).tokenize(
        "The movies were GOOD, Café.") == expected
    assert train == [
        processors.InputExample("train-0", " ".join(expected), None, "pos"),
        processors.InputExample("train-1", "bad movie", None, "neg")]
    assert isinstance(p.user.tokenizer, tokenization.FullTokenizer)
    assert "tokens: the movie ##s [UNK] good , cafe ." in caplog.text
    assert "ids: 4 5 6 1 7 11 9 10" in caplog.text
    # tf.gfile.GFile's read is what the feature cache key covers (the vocabulary is
    # --vocab_file's).
    assert p.input_files(str(data), "train") == [str(data / "train.tsv")]
    # tf.gfile.Exists: no dev file, no dev examples; with one, read.
    assert p.get_dev_examples(str(data)) == []
    assert f"no dev file {data / 'dev.tsv'}" in caplog.text
    other = tmp_path / "other"
    write(other / "vocab.txt", "\n".join(TF1_VOCAB) + "\n")
    write(other / "dev.tsv", "neg\tthe bad cafe\n")
    assert p.get_dev_examples(str(other)) == [
        processors.InputExample("dev-0", "the bad cafe", None, "neg")]


# ---------------------------------------------------------------------------------------------
# The scripts: the fork's command, and a sentence-pair task through train, eval and predict

def fork_world(root, high_level):
    rng = np.random.RandomState(3)
    write(root / "data" / "high_level" / "train_without_content_0515.txt",
          high_level_rows(rng, 24))
    write(root / "data" / "high_level" / "test_without_content_0515.txt",
          high_level_rows(rng, 5))
    tiny_bert_dir(root / "model" / "chinese_L-12_H-768_A-12", max_position_embeddings=512)
    processors_file = root / "my_processors.py"
    shutil.copy(high_level, processors_file)
    return processors_file


def fork_command(script, processors_file):
    argv = shlex.split(FORK_COMMAND.replace("--n_gpus=6", "--n_gpus=2"))
    assert argv[:3] == ["python", "-u", "run_classifier_mgpu.py"]
    return [sys.executable, "-u", os.path.join(REPO, script)] + argv[3:] + [
        f"--processors_file={processors_file}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pasted):
    root = tmp_path_factory.mktemp("user_processors")
    jobs = {}
    directory = root / "run_classifier_mgpu"
    directory.mkdir()
    processors_file = fork_world(directory, pasted("high_level.py"))
    # Run in that directory: the command's relative paths are the fork's.
    jobs["fork"] = lambda: (subprocess.run(
        fork_command("run_classifier_mgpu.py", processors_file), capture_output=True, text=True,
        timeout=300, cwd=directory, env=script_env(PYTHONPATH=REPO)), directory)
    lcqmc = root / "lcqmc"
    rng = np.random.RandomState(4)
    for split, n in (("train", 41), ("dev", 8), ("test", 6)):
        write(lcqmc / "data" / f"{split}.txt", lcqmc_rows(rng, n))
    model = tiny_bert_dir(lcqmc / "chinese_L-12_H-768_A-12")
    # ChineseGLUE's run_classifier_lcqmc.sh, with --do_predict and the processors file.
    cmd = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=lcqmc",
           "--do_train=true", "--do_eval=true", "--do_predict=true",
           f"--data_dir={lcqmc / 'data'}", f"--vocab_file={model}/vocab.txt",
           f"--bert_config_file={model}/bert_config.json",
           f"--init_checkpoint={model}/bert_model.ckpt", "--max_seq_length=128",
           "--train_batch_size=32", "--learning_rate=2e-5", "--num_train_epochs=3.0",
           f"--output_dir={lcqmc / 'out'}", f"--processors_file={pasted('lcqmc.py')}"]
    jobs["lcqmc"] = lambda: (run_command(cmd), lcqmc, cmd)
    # JDCOMMENTProcessor: labels "1".."5", none its own index (0..4), for the export's labels.
    jd = root / "jdcomment"
    for split, n in (("train", 16), ("test", 6)):
        write(jd / "data" / f"jd_{split}.csv", jd_rows(rng, n))
    jd_cmd = changed_flags(cmd, {"--task_name": "jdcomment", "--do_eval": "false",
                                 "--data_dir": jd / "data", "--max_seq_length": "32",
                                 "--train_batch_size": "8", "--num_train_epochs": "1"}, jd / "out")
    jobs["jdcomment"] = lambda: (run_command(jd_cmd), jd)
    with started(jobs) as futures:
        yield futures


def script_code(name):
    """A top-level script's code: its source after the module docstring."""
    source = open(os.path.join(REPO, name), encoding="utf-8").read()
    return source[source.index('"""', source.index('"""') + 3) + 3:]


def test_the_forks_command_runs_with_its_processor_pasted(runs):
    """The fork's command, through run_classifier_mgpu.py. Google's name, run_classifier.py,
    is the same program under another docstring (asserted here), so the command runs the same
    through it; a run of its own would repeat this one (run_classifier.py with a processors
    file runs in test_sentence_pairs_train_evaluate_predict_and_reuse_features)."""
    assert script_code("run_classifier.py") == script_code("run_classifier_mgpu.py")
    assert "run_job(cfg)" in script_code("run_classifier.py")
    proc, directory = runs["fork"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Towers (--n_gpus) = 2" in proc.stderr
    out = directory / "model" / "highlevel" / "model_mgpu_test"
    # int(24 / (12 * 2) * 5) steps.
    assert (out / "model.ckpt-5.index").exists()
    assert json.loads((out / "run_config.json").read_text())["labels"] == ["0", "1"]


def test_sentence_pairs_train_evaluate_predict_and_reuse_features(runs):
    proc, lcqmc, cmd = runs["lcqmc"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = lcqmc / "out"
    result = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().split("\n")
                  if line)
    assert result["eval_examples"] == "7"  # the processor skips each file's first line
    assert len((out / "predict.txt").read_text().splitlines()) == 5
    again = run_command([c for c in cmd if not c.startswith(("--do_train", "--do_predict"))])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Reusing eval features (7 examples)" in again.stderr


def test_the_savedmodel_export_serves_the_runs_labels(runs, tmp_path, pasted):
    """The export of the JDCOMMENT run (export_saved_model.py --output_dir --export_dir, in
    process: the script is that config and this one call, run as a script in test_export): the
    pair signature's labels are get_labels()'s ("1".."5", from run_config.json) at the
    predicted index (predict.txt's, which no label equals), and its probabilities the run's
    test_results.tsv."""
    proc, jd = runs["jdcomment"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = jd / "out"
    from bert_mgpu.configs.base import ModelFiles
    from bert_mgpu.configs.serving import ExportConfig
    from bert_mgpu.serving import export

    assert export.export_saved_model(ExportConfig(
        model=ModelFiles(), output_dir=str(out), export_dir=str(tmp_path / "export"))) == \
        str(tmp_path / "export" / "1")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)

    lcqmc = pasted("lcqmc.py")
    labels = user_processors.processor_for("jdcomment", processors_file=lcqmc).get_labels()
    assert labels == ["1", "2", "3", "4", "5"]
    assert json.loads((out / "run_config.json").read_text())["labels"] == labels
    test = user_processors.processor_for("jdcomment", processors_file=lcqmc).get_test_examples(
        str(jd / "data"))
    assert len(test) == 6
    model = tf.saved_model.load(str(tmp_path / "export" / "1"))
    served = model.signatures["serving_pair"](text_a=tf.constant([e.text_a for e in test]),
                                              text_b=tf.constant([e.text_b for e in test]))
    indices = [int(line) for line in (out / "predict.txt").read_text().splitlines()]
    assert [x.decode() for x in served["label"].numpy()] == [labels[i] for i in indices]
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               np.loadtxt(out / "test_results.tsv"), atol=1e-5)
