"""run_squad.py: the span head, the SQuAD task on towers, the script end to end.

The script runs on the first article of the official SQuAD v2.0 dev set and its v1.1 view
(../shared/material/squad, test-only; those tests skip without it) with a tiny model: train a few
steps with two towers, predict, evaluate. Feature and post-processing parity with Google's code
is tests/test_squad_data.py's; the logits of a real model against Hugging Face's are
test_logits_and_predictions_equal_hugging_face below (oracle venv).
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, env_without_tensorflow, signal_at_checkpoint
from _oracle import DATA, MATERIAL, REPO, require_material, run_json_request
from _pretraining_data import TINY_CONFIG
from _together import started, with_the_module
from test_length_batching import randomize

from bert_mgpu.configs.base import ModelFiles, TrainConfig, TrainOptions
from bert_mgpu.configs.squad import SquadAnswerOptions, SquadConfig
from bert_mgpu.data import input_pipeline, squad_data, tfrecord
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.model import heads
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import squad as squad_task
from bert_mgpu.tasks.base import JobTask
from bert_mgpu.tasks.squad import SquadTask, run_squad

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SCRIPT = os.path.join(REPO, "run_squad.py")
SQUAD = os.path.join(MATERIAL, "squad")
V2_FILE = "squad_v2_dev_normans.json"
V11_FILE = "squad_v11_dev_normans_answerable.json"
SEQ = 16
DROPOUT_CONFIG = dict(TINY_CONFIG, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_span_head_names_logits_and_googles_loss():
    config = BertConfig.from_dict(TINY_CONFIG)
    tf.random.set_seed(1)
    head = heads.SpanHead(config)
    variables = head.named_variables()
    assert {k: v.shape.as_list() for k, v in variables.items()} == {
        "cls/squad/output_weights": [2, 32], "cls/squad/output_bias": [2]}
    # Google's initializer: truncated normal, stddev 0.02 (not the config's), within 2 stddev.
    w = variables["cls/squad/output_weights"].numpy()
    assert np.abs(w).max() <= 0.04 and 0.01 < w.std() < 0.03
    variables["cls/squad/output_bias"].assign([0.5, -0.25])
    rng = np.random.RandomState(0)
    hidden = rng.normal(size=[3, 7, 32]).astype(np.float32)
    start, end = np.array([0, 3, 6]), np.array([[0], [5], [6]])
    out = head(tf.constant(hidden), tf.constant(start, tf.int32), tf.constant(end, tf.int32))
    # Google: logits = reshape(hidden, [B*S, H]) @ W^T + b, start = [..., 0], end = [..., 1].
    logits = hidden.reshape(-1, 32) @ w.T + np.array([0.5, -0.25])
    logits = logits.reshape(3, 7, 2)
    np.testing.assert_allclose(out["start_logits"], logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], logits[..., 1], atol=1e-5)
    # Google: (mean start cross-entropy + mean end cross-entropy) / 2.
    rows = np.arange(3)
    start_loss = -_log_softmax(logits[..., 0])[rows, start].mean()
    end_loss = -_log_softmax(logits[..., 1])[rows, end[:, 0]].mean()
    np.testing.assert_allclose(float(out["loss"]), (start_loss + end_loss) / 2, rtol=1e-5)
    assert set(head(tf.constant(hidden))) == {"start_logits", "end_logits"}


def test_squad_task_variables_and_predict_keys():
    task = SquadTask(BertConfig.from_dict(TINY_CONFIG))
    assert isinstance(task, JobTask)
    names = list(task.named_variables())
    assert names[-2:] == ["cls/squad/output_weights", "cls/squad/output_bias"]
    assert all(n.startswith("bert/") for n in names[:-2])
    features = {"unique_ids": tf.constant([[1000000000], [1000000001]]),
                "input_ids": tf.ones([2, SEQ], tf.int32), "input_mask": tf.ones([2, SEQ], tf.int32),
                "segment_ids": tf.zeros([2, SEQ], tf.int32)}
    out = task.predict(features)
    assert out["unique_ids"].numpy().tolist() == [1000000000, 1000000001]
    assert out["start_logits"].shape == [2, SEQ] and out["end_logits"].shape == [2, SEQ]


def test_squad_task_shares_add_up_to_googles_loss():
    """Each slice's loss is its share of the global batch's (start CE + end CE) / 2 mean."""
    task = SquadTask(BertConfig.from_dict(TINY_CONFIG))
    rng = np.random.RandomState(2)
    features = {"input_ids": tf.constant(rng.randint(1, 100, size=[6, SEQ]), tf.int32),
                "input_mask": tf.ones([6, SEQ], tf.int32),
                "segment_ids": tf.zeros([6, SEQ], tf.int32),
                "start_positions": tf.constant(rng.randint(0, SEQ, size=[6, 1]), tf.int32),
                "end_positions": tf.constant(rng.randint(0, SEQ, size=[6, 1]), tf.int32)}
    context = task.context(features)
    whole = float(task._forward(features, training=False)["loss"])  # the head's batch mean
    for n in (1, 2, 3):
        size = 6 // n
        shares = [task.tower_loss({k: v[i * size:(i + 1) * size] for k, v in features.items()},
                                  context, training=False) for i in range(n)]
        assert sum(float(x["loss"]) for x in shares) == pytest.approx(whole, rel=1e-5)
    sums = task.eval_sums(features)
    assert task.eval_metrics({k: v.numpy() for k, v in sums.items()})["loss"] == \
        pytest.approx(whole, rel=1e-5)


def test_span_head_without_padding_equals_it_on_a_trimmed_batch():
    """With `input_mask` the padding is out of the span softmax and ranks last: the logits of
    the real tokens, and the loss, are those of the batch cut after its longest window."""
    head = heads.SpanHead(BertConfig.from_dict(TINY_CONFIG))
    rng = np.random.RandomState(1)
    hidden = tf.constant(rng.normal(size=[2, 8, 32]).astype(np.float32))
    mask = tf.constant([[1] * 5 + [0] * 3, [1] * 3 + [0] * 5])
    start, end = tf.constant([[4], [0]]), tf.constant([[4], [2]])
    padded = head(hidden, start, end, input_mask=mask)
    cut = head(hidden[:, :6], start, end, input_mask=mask[:, :6])
    assert float(cut["loss"]) == pytest.approx(float(padded["loss"]), abs=1e-6)
    np.testing.assert_allclose(cut["start_logits"], padded["start_logits"][:, :6], atol=1e-6)
    assert (padded["end_logits"].numpy()[mask.numpy() == 0] == heads.PADDING_SPAN_LOGIT).all()
    # Google's (no mask) softmax runs over the padding too: another loss.
    assert abs(float(head(hidden, start, end)["loss"]) - float(padded["loss"])) > 1e-3


WORDS = ("the river city king army church castle north south war year people land sea "
         "island bishop duke son french english norman viking roman old new great").split()


def squad_json(seed=0):
    """A v2.0 file of paragraphs of 6..60 words, three questions each (one without answer):
    windows of very different lengths, the longest split by --doc_stride."""
    rng = np.random.RandomState(seed)
    paragraphs = []
    for p in range(8):
        words = [str(w) for w in rng.choice(WORDS, size=6 + 8 * p if p < 7 else 60)]
        context = " ".join(words)
        qas = []
        for q in range(3):
            first = int(rng.randint(0, len(words) - 2))
            answer = " ".join(words[first:first + 2])
            start = len(" ".join(words[:first])) + (1 if first else 0)
            impossible = q == 2
            question = " ".join(str(w) for w in rng.choice(WORDS, size=3)) + " ?"
            qas.append({"id": f"p{p}q{q}", "question": question, "is_impossible": impossible,
                        "answers": [] if impossible else [{"text": answer,
                                                           "answer_start": start}]})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}


@pytest.fixture(scope="module")
def length_runs(tmp_path_factory):
    """run_squad (in process; v2.0, 2 towers, dropout on, from visible random weights) with
    --pad_to_longest: batches cut to multiples of 8, and the same run with every batch kept at
    --max_seq_length=64 (`trimmed_length` patched to the records' length; training computes
    every position, not only the real tokens' rows as the trimmed run); then, trimmed, a
    prediction alone from the padded run's weights (in a copy of its output_dir). Returns
    {"trimmed" | "padded" | "predicted": (output_dir, final weights)}."""
    d = tmp_path_factory.mktemp("squad_lengths")
    data = d / "squad.json"
    data.write_text(json.dumps(squad_json()))
    config = d / "bert_config.json"
    config.write_text(json.dumps(dict(DROPOUT_CONFIG, vocab_size=30522)))
    tf.random.set_seed(8)
    init_model = SquadTask(BertConfig.from_json_file(str(config)))
    randomize(init_model.named_variables(), seed=4)
    init = checkpoint.write_bundle(str(d / "init" / "bert_model.ckpt"),
                                   init_model.named_variables())
    runs = {}
    for name in ("trimmed", "padded", "predicted"):
        out = d / name
        if name == "predicted":
            shutil.copytree(d / "padded", out)
        cfg = SquadConfig(
            model=ModelFiles(bert_config_file=str(config), vocab_file=VOCAB,
                             init_checkpoint=init, max_seq_length=64),
            train=TrainOptions(n_gpus=2, train_batch_size=2, learning_rate=1e-3,
                               random_seed=6, shuffle_buffer_size=0,
                               save_checkpoints_steps=1000, log_every_n_steps=100),
            output_dir=str(out), train_file=str(data), predict_file=str(data),
            do_train=name != "predicted", do_predict=True, do_eval=True, predict_batch_size=5,
            num_train_epochs=1.0, pad_to_longest=True, pad_to_multiple_of=8,
            answers=SquadAnswerOptions(doc_stride=24, max_query_length=12, n_best_size=5,
                                       version_2_with_negative=True))
        lengths, trimmed_length = [], input_pipeline.trimmed_length
        options, training_options = [], squad_task.training_options
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(squad_task, "training_options", lambda: options.append(
                {"drop_padding": False} if name == "padded" else training_options())
                or options[-1])
            if name == "padded":
                patch.setattr(input_pipeline, "trimmed_length",
                              lambda input_mask, multiple: int(input_mask.shape[-1]))
            else:
                patch.setattr(input_pipeline, "trimmed_length", lambda *args: lengths.append(
                    trimmed_length(*args)) or lengths[-1])
            run_squad(cfg)
        assert name == "predicted" or (options and all(
            o["drop_padding"] == (name == "trimmed") for o in options)), options
        # Training and prediction batches were cut to several lengths, most shorter than 64.
        assert name == "padded" or (len(set(lengths)) >= 3 and min(lengths) < 64
                                    and {n % 8 for n in lengths} == {0}), sorted(set(lengths))
        reader = tf.train.load_checkpoint(str(out))
        runs[name] = (out, {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()})
    return runs


def test_trimmed_run_equals_the_padded_run(length_runs):
    """--pad_to_longest: the trained weights (dropout on) and answers are those of the run
    whose batches keep the padding; predicted from the same weights, predictions.json,
    nbest_predictions.json, null_odds.json and eval_results.txt are the padded run's: the texts
    exactly, the numbers to 1e-5."""
    (padded_out, padded), (trimmed_out, trimmed) = length_runs["padded"], length_runs["trimmed"]
    assert int(padded["global_step"]) == 6 == int(trimmed["global_step"])  # 24 / (2 x 2)
    assert sorted(padded) == sorted(trimmed)
    for name in padded:
        np.testing.assert_allclose(trimmed[name], padded[name], atol=1e-5, err_msg=name)
    assert (trimmed_out / "predictions.json").read_text() == \
        (padded_out / "predictions.json").read_text()
    trimmed_out = length_runs["predicted"][0]  # predicted trimmed from the padded run's weights

    def same(a, b, where):
        if isinstance(a, dict):
            assert sorted(a) == sorted(b), where
            for key in a:
                same(a[key], b[key], f"{where}/{key}")
        elif isinstance(a, list):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        elif isinstance(a, float):
            assert a == pytest.approx(b, abs=1e-5), where
        else:
            assert a == b, where

    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
        same(json.loads((trimmed_out / name).read_text()),
             json.loads((padded_out / name).read_text()), name)
    predictions = json.loads((padded_out / "predictions.json").read_text())
    assert len(predictions) == 24 and len(set(predictions.values())) > 5  # spread answers
    results = [dict(line.split(" = ") for line in
                    (out / "eval_results.txt").read_text().splitlines())
               for out in (trimmed_out, padded_out)]
    assert {k: float(v) for k, v in results[0].items()} == pytest.approx(
        {k: float(v) for k, v in results[1].items()}, abs=1e-5)


def test_flags_defaults_and_steps_are_googles(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522,
                                      max_position_embeddings=512)))
    train_file = tmp_path / "train.json"
    train_file.write_text('{"version": "1.1", "data": []}')
    argv = ["run_squad.py", f"--vocab_file={VOCAB}", f"--bert_config_file={config}",
            f"--output_dir={tmp_path / 'out'}", "--do_train", f"--train_file={train_file}",
            "--n_gpus=2", "--use_tpu=false", "--tpu_name=x", "--num_tpu_cores=8"]
    code = f"""
import dataclasses, json
from absl import flags
from bert_mgpu import cli
from bert_mgpu.configs.squad import SquadConfig
from bert_mgpu.data.squad_data import check_squad_inputs
cli.define_config_flags(SquadConfig)
flags.FLAGS({argv!r})
cfg = cli.build_config(SquadConfig, check_squad_inputs)
out = dataclasses.asdict(cfg)
out.update(out.pop("answers"))  # the windows' and answers' flags are the `answers` subtree
out["defined"] = sorted(cli.flag_values_dict())
out["steps"] = [cfg.train_config(n).num_train_steps for n in (87599, 130319)]
out["warmup"] = cfg.train_config(87599).num_warmup_steps
print(json.dumps(out, default=str))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # Google's run_squad.py defaults.
    assert out["model"]["max_seq_length"] == 384 and out["model"]["do_lower_case"] is True
    assert (out["doc_stride"], out["max_query_length"], out["predict_batch_size"],
            out["n_best_size"], out["max_answer_length"]) == (128, 64, 8, 20, 30)
    assert (out["num_train_epochs"], out["warmup_proportion"]) == (3.0, 0.1)
    assert out["version_2_with_negative"] is False and out["null_score_diff_threshold"] == 0.0
    assert out["verbose_logging"] is False and out["do_predict"] is False
    assert (out["train"]["train_batch_size"], out["train"]["learning_rate"],
            out["train"]["save_checkpoints_steps"]) == (32, 5e-5, 1000)
    assert out["train"]["n_gpus"] == 2 and out["train"]["shuffle_buffer_size"] == 0
    # Google's formula over the global batch (32 x 2): SQuAD v1.1's and v2.0's training sets.
    assert out["steps"] == [int(87599 / 64 * 3.0), int(130319 / 64 * 3.0)]
    assert out["warmup"] == int(out["steps"][0] * 0.1)
    for name in ("use_tpu", "tpu_name", "num_tpu_cores", "iterations_per_loop", "do_eval",
                 "num_accumulation_steps", "precision", "use_xla", "worker_hosts"):
        assert name in out["defined"], name
    assert "eval_batch_size" not in out["defined"] and "data_dir" not in out["defined"]


# -- towers == one device on a SQuAD batch ---------------------------------------------------

@pytest.fixture(scope="module")
def squad_records(tmp_path_factory):
    """64 SQuAD training records (Google's features) of random windows, and an init checkpoint."""
    d = tmp_path_factory.mktemp("squad_towers")
    rng = np.random.RandomState(4)
    path = str(d / "train.tf_record")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(64):
            query = rng.randint(2, 5)
            n = rng.randint(query + 4, SEQ + 1)
            ids = np.zeros(SEQ, int)
            ids[:n] = rng.randint(1, TINY_CONFIG["vocab_size"], size=n)
            segments = ((np.arange(SEQ) > query) & (np.arange(SEQ) < n)).astype(int)
            impossible = rng.rand() < 0.3
            start = 0 if impossible else rng.randint(query + 2, n - 1)
            end = 0 if impossible else rng.randint(start, n - 1)
            writer.write(tfrecord.encode_example({
                "unique_ids": [1000000000 + i], "input_ids": ids.tolist(),
                "input_mask": (np.arange(SEQ) < n).astype(int).tolist(),
                "segment_ids": segments.tolist(), "start_positions": [start],
                "end_positions": [end], "is_impossible": [int(impossible)]}))
    tf.random.set_seed(9)
    init = checkpoint.write_bundle(str(d / "init" / "bert_model.ckpt"),
                                   SquadTask(BertConfig.from_dict(TINY_CONFIG))
                                   .named_variables())
    return {"path": path, "init": init, "dir": d}


def train_squad(records, name, n_gpus, batch, accum=1, config=TINY_CONFIG):
    cfg = TrainConfig(output_dir=str(records["dir"] / name), train_batch_size=batch,
                      n_gpus=n_gpus, num_accumulation_steps=accum, num_train_steps=3,
                      num_warmup_steps=1, learning_rate=1e-3, init_checkpoint=records["init"])
    task = SquadTask(BertConfig.from_dict(config))
    trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
    trainer.train(input_pipeline.record_dataset(
        [records["path"]], squad_data.squad_train_shapes(SEQ), cfg.global_batch_size, True,
        seed=2, shuffle_buffer=0))
    return {k: v.numpy() for k, v in trainer.checkpoint_tensors().items()}


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


@pytest.fixture(scope="module")
def one_device(squad_records):
    """Global batch 8 on one device, dropout off and on."""
    return {False: train_squad(squad_records, "ref_off", 1, 8),
            True: train_squad(squad_records, "ref_on", 1, 8, config=DROPOUT_CONFIG)}


@pytest.mark.parametrize("dropout,n_gpus,batch,accum", [(False, 2, 4, 1), (True, 2, 2, 2)],
                         ids=["dropout_off_2x4", "dropout_on_2x2x2"])
def test_towers_and_accumulation_equal_one_device(squad_records, one_device, dropout, n_gpus,
                                                  batch, accum):
    """The global batch of 8 as 2 towers x 4, or 2 towers x 2 x 2 accumulation steps: 3
    updates give the weights and slots of one device (dropout masks are keyed by the global
    example position, so with dropout on as well)."""
    reference = one_device[dropout]
    assert "cls/squad/output_weights/adam_m" in reference
    got = train_squad(squad_records, f"t{n_gpus}x{batch}x{accum}_{dropout}", n_gpus, batch,
                      accum, config=DROPOUT_CONFIG if dropout else TINY_CONFIG)
    assert max_diff(got, reference) <= 1e-5
    if dropout:  # dropout did act
        assert max_diff(one_device[False], reference) > 1e-4


# -- the script ------------------------------------------------------------------------------

def training_file(src, dst):
    """The dev article in training form (Google reads exactly one answer per question)."""
    with open(src, encoding="utf-8") as f:
        data = json.load(f)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return str(dst)


def question_ids(path):
    with open(path, encoding="utf-8") as f:
        return [qa["id"] for article in json.load(f)["data"]
                for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def run_script(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout,
                          env=env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


# Flags of a run that fails (test_bad_flags_are_one_line) and its error; {tmp}: the directory
# of bad_flag_runs.
BAD_FLAGS = [
    (["--do_predict=true", "--predict_file=dev.json", "--max_query_length=200"],
     "The max_seq_length (128) must be greater than "
                                 "max_query_length (200) + 3"),
    (["--do_train=true"], "If `do_train` is True, then `train_file` must be specified."),
    (["--do_predict=true", "--predict_file={tmp}/absent.json", "--allow_random_weights"],
     "--predict_file: {tmp}/absent.json not found"),
    # (Read after TensorFlow loads: the file's content, as the classifier's dev/test files.)
    (["--do_eval=true", "--predict_file={tmp}/test.json", "--allow_random_weights"],
     "--do_eval: {tmp}/test.json: question q1 has no \"answers\" list", "tf"),
]


@pytest.fixture(scope="module")
def bad_flag_runs(tmp_path_factory):
    """The runs of BAD_FLAGS, started together, on a tiny config and a test set of questions
    without answers (fine to predict, not to evaluate).

    Yields: (their directory {tmp}, [Future of the CompletedProcess of each, in order]).
    """
    d = tmp_path_factory.mktemp("bad_flags")
    config = d / "bert_config.json"
    config.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522,
                                      max_position_embeddings=128)))
    (d / "test.json").write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": [
        {"context": "Rollo was a Viking.", "qas": [{"id": "q1", "question": "Who?"}]}]}]}))
    # Flag and file checks, before TensorFlow loads: run where importing it fails.
    env = env_without_tensorflow(d)
    jobs = {i: lambda i=i, change=change, tf=tf: run_script(
        f"--vocab_file={VOCAB}", f"--bert_config_file={config}", f"--output_dir={d / f'out{i}'}",
        "--max_seq_length=128", *[c.replace("{tmp}", str(d)) for c in change],
        env=None if tf else env)
        for i, (change, _, *tf) in enumerate(BAD_FLAGS)}
    with started(jobs) as runs:
        yield d, [runs[i] for i in range(len(BAD_FLAGS))]


_scripts_with_the_module = with_the_module("bad_flag_runs", "squad_started")


@pytest.fixture(scope="module")
def squad_started(tmp_path_factory):
    """Train (v2.0, 2 towers, dropout on) a few steps, predict and evaluate with batches of 6
    (413 windows: a last batch of 5): started in the background (squad_run waits for it)."""
    v2 = require_material("squad", V2_FILE)
    root = tmp_path_factory.mktemp("squad_run")
    config = root / "bert_config.json"
    config.write_text(json.dumps(dict(DROPOUT_CONFIG, vocab_size=30522,
                                      max_position_embeddings=128)))
    common = [f"--vocab_file={VOCAB}", f"--bert_config_file={config}", "--max_seq_length=128",
              "--doc_stride=64", "--max_query_length=32", "--predict_batch_size=6"]
    out = root / "v2"
    cmd = common + [f"--output_dir={out}", "--do_train=true",
                    f"--train_file={training_file(v2, root / 'train_v2.json')}",
                    "--do_predict=true", "--do_eval=true", f"--predict_file={v2}",
                    "--version_2_with_negative=true", "--train_batch_size=4", "--n_gpus=2",
                    "--num_train_epochs=0.1", "--learning_rate=1e-3", "--use_tpu=false"]
    with started({"proc": lambda: run_script(*cmd)}) as run:
        yield dict(run, out=out, root=root, common=common, config=config, v2=v2)


@pytest.fixture(scope="module")
def squad_run(squad_started):
    """squad_started's run, finished: {"proc": its CompletedProcess, "out": --output_dir,
    "root", "common": the flags of every run, "config", "v2": the v2.0 file}."""
    return dict(squad_started, proc=squad_started["proc"].result())


def test_script_trains_predicts_and_evaluates_v2(squad_run):
    proc, out = squad_run["proc"], squad_run["out"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Google's log lines; steps from the 208 training *questions*: int(208 / (4 x 2) x 0.1).
    for line in ("Num orig examples = 208", "Num split examples = 413", "Num steps = 2",
                 "***** Running predictions *****"):
        assert line in proc.stderr, line
    ids = question_ids(squad_run["v2"])
    assert len(ids) == 208
    predictions = json.loads((out / "predictions.json").read_text())
    assert list(predictions) == ids
    assert list(json.loads((out / "null_odds.json").read_text())) == ids
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert list(nbest) == ids
    assert set(nbest[ids[0]][0]) == {"text", "probability", "start_logit", "end_logit"}
    result = read_results(out / "eval_results.txt")
    assert set(result) == {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                           "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                           "best_exact_thresh", "best_f1", "best_f1_thresh", "global_step"}
    assert (result["total"], result["HasAns_total"], result["NoAns_total"]) == \
        ("208", "96", "112")
    # The official v2.0 scores (null_odds.json as --na-prob-file, threshold 1.0): HasAns_ as
    # v1.1 on the answerable questions, NoAns_ the exact match of the unanswerable ones with the
    # empty answer, the totals weighted by count.
    has = squad_reference(out, squad_run["v2"], "answerable", null_odds=True)
    no = squad_reference(out, squad_run["v2"], "unanswerable", null_odds=True)
    assert (has["count"], no["count"]) == (96, 112)
    assert float(result["HasAns_exact"]) == pytest.approx(has["exact_match"], abs=1e-4)
    assert float(result["HasAns_f1"]) == pytest.approx(has["f1"], abs=1e-4)
    assert float(result["NoAns_exact"]) == pytest.approx(no["exact_match"], abs=1e-4)
    assert float(result["NoAns_f1"]) == pytest.approx(no["exact_match"], abs=1e-4)
    for key, name in (("exact", "exact_match"), ("f1", "f1")):
        total = (96 * has[name] + 112 * no["exact_match"]) / 208
        assert float(result[key]) == pytest.approx(total, abs=1e-4), key
    # After two updates no answerable question gets a right word here (HasAns_ scores 0,
    # measured); the v1.1 run from the same checkpoint (always an answer) compares non-zero F1.
    assert result["global_step"] == "2"
    # The checkpoint holds Google's names for the head (and its Adam slots).
    shapes = dict(tf.train.list_variables(str(out / "model.ckpt-2")))
    assert shapes["cls/squad/output_weights"] == [2, 32]
    assert shapes["cls/squad/output_bias"] == [2]
    assert "cls/squad/output_weights/adam_m" in shapes and "output_weights" not in shapes


def test_script_predicts_v11_from_a_squad_checkpoint(squad_run):
    """Prediction only, the head loaded from --init_checkpoint by its Google names; v1.1
    keys; every question, batches of 6."""
    assert squad_run["proc"].returncode == 0
    v11 = require_material("squad", V11_FILE)
    out = squad_run["root"] / "v11"
    proc = run_script(*squad_run["common"], f"--output_dir={out}", "--do_predict=true",
                      "--do_eval=true", f"--predict_file={v11}", "--verbose",
                      f"--init_checkpoint={squad_run['out'] / 'model.ckpt-2'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "name = cls/squad/output_weights:0, shape = (2, 32), *INIT_FROM_CKPT*" in proc.stderr
    predictions = json.loads((out / "predictions.json").read_text())
    assert list(predictions) == question_ids(v11) and len(predictions) == 96
    assert not (out / "null_odds.json").exists()
    result = read_results(out / "eval_results.txt")
    assert set(result) == {"exact_match", "f1", "global_step"}
    want = squad_reference(out, v11)
    assert want["count"] == 96
    assert float(result["exact_match"]) == pytest.approx(want["exact_match"], abs=1e-4)
    assert float(result["f1"]) == pytest.approx(want["f1"], abs=1e-4)
    assert want["f1"] > 1.0  # some predicted words are right: not a comparison of zeros


def squad_reference(out, dataset, subset="all", null_odds=False):
    """EM and F1 (in %) of `out`/predictions.json on `dataset` (`subset`: all, answerable or
    unanswerable questions; `null_odds`: with out/null_odds.json as v2.0's --na-prob-file) by
    torchmetrics' port of the official evaluate-v1.1.py (tests/oracles/squad_scores.py)."""
    request = {"dataset": str(dataset), "predictions": str(out / "predictions.json"),
               "subset": subset, "na_probs": str(out / "null_odds.json") if null_odds else None}
    return json.loads(run_json_request("squad_scores.py", request, out, timeout=120))


def test_sigterm_checkpoints_and_exits_cleanly(squad_run, tmp_path):
    """README: SIGTERM (as SIGHUP and SIGINT) finishes the current step, writes a checkpoint and
    exits 0; run_squad.py as run_pretraining.py (whose test covers the three signals)."""
    out = tmp_path / "out"
    train = training_file(squad_run["v2"], tmp_path / "train_v2.json")
    run = Launched([sys.executable, SCRIPT, *squad_run["common"], f"--output_dir={out}",
                    "--do_train=true", f"--train_file={train}", "--version_2_with_negative=true",
                    "--train_batch_size=4", "--num_train_epochs=20", "--learning_rate=1e-3",
                    "--save_checkpoints_steps=2"])
    signalled_at = signal_at_checkpoint([(run, str(out), 2, signal.SIGTERM, 0)])[0]
    proc = run.finish(300)
    assert signalled_at is not None, "the run ended before the signal"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Received SIGTERM" in proc.stderr
    stopped_at = int(proc.stderr.split("Stopped by SIGTERM at global_step ")[1].split(";")[0])
    steps = int(proc.stderr.split("Num steps = ")[1].split()[0])
    assert 2 <= stopped_at < steps  # stopped before its last step
    assert tf.train.latest_checkpoint(str(out)).endswith(f"model.ckpt-{stopped_at}")


def squad_windows(squad_run, tmp_path, n_examples):
    """The run's config, and our eval features of the first `n_examples` questions of the
    v2.0 file (real windows) with their model inputs, also saved for the oracle."""
    from bert_mgpu import tokenization

    config = json.loads(squad_run["config"].read_text())
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    examples = squad_data.read_squad_examples(squad_run["v2"], is_training=False)[:n_examples]
    features = list(squad_data.convert_examples_to_features(examples, tokenizer, 128, 64, 32,
                                                            is_training=False))
    arrays = {k: np.array([getattr(f, k) for f in features], np.int32)
              for k in ("input_ids", "input_mask", "segment_ids")}
    np.savez(tmp_path / "inputs.npz", **arrays)
    return config, features, arrays


def googles_squad_model(tmp_path, config, **request):
    """Google's create_model on the saved inputs (google_squad_model.py; `request`:
    init_checkpoint, save_checkpoint): its logits and [[variable, initialised]]."""
    from _oracle import run_json_request

    run_json_request("google_squad_model.py", dict(
        request, config=config, inputs=str(tmp_path / "inputs.npz"),
        output=str(tmp_path / "google.npz"), names=str(tmp_path / "names.json")), tmp_path)
    return np.load(tmp_path / "google.npz"), json.loads((tmp_path / "names.json").read_text())


def assert_our_logits_are_googles(config, prefix, features, arrays, google):
    """Our SquadTask initialised from `prefix` by name gives Google's logits (<= 1e-5); returns
    the initialisation report."""
    task = SquadTask(BertConfig.from_dict(config))
    report = checkpoint.init_from_checkpoint(prefix, task.named_variables())
    features_tf = {k: tf.constant(v) for k, v in arrays.items()}
    features_tf["unique_ids"] = tf.constant([[f.unique_id] for f in features])
    ours = task.predict(features_tf)
    assert google["start_logits"].std() > 0.01
    assert np.abs(ours["start_logits"].numpy() - google["start_logits"]).max() <= 1e-5
    assert np.abs(ours["end_logits"].numpy() - google["end_logits"]).max() <= 1e-5
    return report


@pytest.mark.oracle
def test_googles_create_model_loads_our_squad_checkpoint(squad_run, tmp_path):
    """Google's run_squad.create_model, initialised from the script's checkpoint the way
    Google's model_fn does it (get_assignment_map_from_checkpoint, by name), takes every
    variable from it, the head included, and computes our logits on real windows (<= 1e-5)."""
    assert squad_run["proc"].returncode == 0
    prefix = str(squad_run["out"] / "model.ckpt-2")
    config, features, arrays = squad_windows(squad_run, tmp_path, 6)
    google, names = googles_squad_model(tmp_path, config, init_checkpoint=prefix)
    assert ["cls/squad/output_weights", True] in names and ["cls/squad/output_bias", True] in names
    assert all(initialised for _, initialised in names), names
    assert_our_logits_are_googles(config, prefix, features, arrays, google)


@pytest.mark.oracle
def test_a_squad_checkpoint_of_googles_code_loads_by_name(squad_run, tmp_path):
    """README: a SQuAD checkpoint written by Google's code (its create_model, saved by TF1's
    Saver) initialises every variable of ours by name, the head included, and our logits on
    real windows are Google's (<= 1e-5)."""
    config, features, arrays = squad_windows(squad_run, tmp_path, 4)
    google_ckpt = str(tmp_path / "google" / "model.ckpt")
    google, _ = googles_squad_model(tmp_path, config, init_checkpoint=None,
                                    save_checkpoint=google_ckpt)
    report = assert_our_logits_are_googles(config, google_ckpt, features, arrays, google)
    assert not report.not_in_checkpoint
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(report.initialized)


@pytest.mark.parametrize("case", range(len(BAD_FLAGS)))
def test_bad_flags_are_one_line(bad_flag_runs, case):
    d, runs = bad_flag_runs
    proc = runs[case].result()
    message = BAD_FLAGS[case][1].replace("{tmp}", str(d))
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_squad.py: ERROR: ") and message in last, last


# -- the same weights in Hugging Face's BertForQuestionAnswering (oracle venv) ---------------

@pytest.mark.oracle
def test_logits_and_predictions_equal_hugging_face(tmp_path):
    """The first 12 paragraphs of the real article (70 questions, 42 unanswerable) with
    128-token windows (stride 64, questions up to 32 tokens: most questions in several
    windows): the start/end logits of our model and of Hugging Face's on the same weights agree
    to 1e-5, and Google's write_predictions (oracle) on Hugging Face's logits and ours on our
    logits give the same predictions.json and n-best texts, in v1.1 mode and in v2.0 mode
    (null_odds to 1e-4; a threshold that makes some answers null). bench/squad_hf.py runs the
    whole article at 384 and 128."""
    import _squad_hf

    article = _squad_hf.first_paragraphs(require_material("squad", V2_FILE),
                                         tmp_path / "article.json", 12)
    run = _squad_hf.compare(article, tmp_path, max_seq_length=128, doc_stride=64,
                            max_query_length=32)
    assert len(run["examples"]) == 70 and len(run["features"]) > 70
    assert run["max_abs_diff"] <= 1e-5, run["max_abs_diff"]
    for mode in ("v1.1", "v2.0"):
        got = run[mode]
        assert got["predictions"] == got["google_predictions"]
        assert got["nbest_texts"] == got["google_nbest_texts"]
    v2 = run["v2.0"]
    assert v2["null_odds_max_diff"] <= 1e-4
    nulls = sum(p == "" for p in v2["predictions"].values())
    assert 0 < nulls < len(v2["predictions"])
