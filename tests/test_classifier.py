"""run_classifier_mgpu.py: processors and features vs Google's code, tsv errors, eval/predict
counts, the feature cache, head+tail truncation, layer-wise LR, towers."""

import gzip
import json
import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, error_line, final_tensors, finish_killed, signal_at_checkpoint
from _oracle import DATA, REPO, run_json_request
from _pretraining_data import TINY_CONFIG
from _together import bad_input_jobs, run_command, started, with_the_module

from bert_mgpu import tokenization
from bert_mgpu.configs.base import TrainConfig
from bert_mgpu.data import classifier_data, features, input_pipeline, processors, tfrecord
from bert_mgpu.engine import evaluation, optimization, towers, training
from bert_mgpu.model import modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.classifier import BertClassifier

VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
SCRIPT = os.path.join(REPO, "run_classifier_mgpu.py")
WORDS = ("the movie was good bad great terrible fine boring fun long short and but not very "
         "really quite story actors plot music ending").split()


def sentence(rng, n=None):
    return " ".join(rng.choice(WORDS, size=n or rng.randint(2, 12)))


def write_lines(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def glue_dirs(tmp_path_factory):
    """Small files in the layouts of Google's four tasks."""
    rng = np.random.RandomState(0)
    root = tmp_path_factory.mktemp("glue")
    d = {}
    d["mrpc"] = root / "mrpc"
    d["mrpc"].mkdir()
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    for split in ("train", "dev"):
        write_lines(d["mrpc"] / f"{split}.tsv", [header] + [
            [str(rng.randint(2)), str(i), str(i + 1), sentence(rng), sentence(rng)]
            for i in range(7)])
    write_lines(d["mrpc"] / "test.tsv", [["index", "#1 ID", "#2 ID", "#1 String",
                                          "#2 String"]] + [
        [str(i), str(i), str(i + 1), sentence(rng), sentence(rng)] for i in range(5)])
    d["cola"] = root / "cola"
    d["cola"].mkdir()
    for split in ("train", "dev"):
        write_lines(d["cola"] / f"{split}.tsv", [
            ["gj04", str(rng.randint(2)), "", sentence(rng)] for _ in range(6)])
    write_lines(d["cola"] / "test.tsv", [["index", "sentence"]] + [
        [str(i), sentence(rng)] for i in range(4)])
    d["mnli"] = root / "mnli"
    d["mnli"].mkdir()
    labels = ["contradiction", "entailment", "neutral"]
    for split, name in (("train", "train.tsv"), ("dev", "dev_matched.tsv"),
                        ("test", "test_matched.tsv")):
        rows = [["index"] + [f"c{i}" for i in range(10)] + ["gold_label"]]
        for i in range(6):
            row = [str(i)] + ["x"] * 7 + [sentence(rng), sentence(rng)]
            rows.append(row + ([labels[rng.randint(3)]] if split != "test" else []))
        write_lines(d["mnli"] / name, rows)
    d["xnli"] = root / "xnli"
    (d["xnli"] / "multinli").mkdir(parents=True)
    write_lines(d["xnli"] / "multinli" / "multinli.train.zh.tsv", [["premise", "hypo", "label"]] +
                [[sentence(rng), sentence(rng), ["contradictory", "entailment", "neutral"][i % 3]]
                 for i in range(6)])
    write_lines(d["xnli"] / "xnli.dev.tsv", [[f"h{i}" for i in range(8)]] + [
        [lang, labels[i % 3], "", "", "", "", sentence(rng), sentence(rng)]
        for i, lang in enumerate(["zh", "en", "zh", "zh", "fr", "zh"])])
    return d


@pytest.mark.parametrize("task", ["cola", "mnli", "mrpc", "xnli"])
def test_processors_and_features_equal_googles(task, glue_dirs, tmp_path):
    splits = ["train", "dev"] + ([] if task == "xnli" else ["test"])
    out = tmp_path / "google"
    out.mkdir()
    run_json_request("google_classifier.py", {
        "task": task, "data_dir": str(glue_dirs[task]), "vocab_file": VOCAB,
        "do_lower_case": True, "max_seq_length": 16, "splits": splits,
        "output_dir": str(out)}, tmp_path)
    processor = processors.get_processor(task)
    tokenizer = tokenization.FullTokenizer(VOCAB, True)
    labels = processor.get_labels()
    shapes = features.classifier_shapes(16)
    for split in splits:
        ours = getattr(processor, f"get_{split}_examples")(str(glue_dirs[task]))
        google = json.loads((out / f"{split}.examples.json").read_text())
        assert [list(e) for e in ours] == google
        path = str(tmp_path / f"{split}.ours.tf_record")
        classifier_data.write_features(ours, labels, 16, tokenizer, path)
        for a, b in zip(tf.data.TFRecordDataset(path),
                        tf.data.TFRecordDataset(str(out / f"{split}.tf_record"))):
            fa = features.parse_example(a, shapes)
            fb = features.parse_example(b, shapes)
            for name in shapes:
                np.testing.assert_array_equal(fa[name], fb[name], err_msg=f"{split} {name}")
        assert sum(1 for _ in tf.data.TFRecordDataset(path)) == len(google)


def test_tsv_task_columns_and_labels(tmp_path):
    write_lines(tmp_path / "train.tsv", [["label", "premise", "hypothesis"], ["b", "x y", "z"],
                                         ["a", "p", "q"], ["b", "r", "s"]])
    write_lines(tmp_path / "dev.tsv", [["label", "premise", "hypothesis"], ["a", "1", "2"]])
    write_lines(tmp_path / "test.tsv", [["premise", "hypothesis"], ["t", "u"]])
    p = processors.get_processor("tsv")
    assert p.get_labels(str(tmp_path)) == ["a", "b"]
    assert p.get_train_examples(str(tmp_path))[0] == processors.InputExample(
        "train-1", "x y", "z", "b")
    assert p.get_test_examples(str(tmp_path)) == [processors.InputExample("test-1", "t", "u")]
    fixed = processors.get_processor("tsv", ["b", "a", "c"])
    assert fixed.get_labels(str(tmp_path)) == ["b", "a", "c"]


@pytest.mark.parametrize("rows,split,message", [
    ([["sentence", "label"], ["good", "1"], ["bad"]], "train", "train.tsv:3: 1 columns, the "
                                                                "header has 2"),
    ([["sentence"], ["good"]], "train", "train.tsv:1: no column named 'label'"),
    ([["a", "b", "c", "label"], ["1", "2", "3", "0"]], "train", "train.tsv:1: the column\\(s\\) "
                                                                "'a', 'b', 'c' are not named"),
    ([["sentence", "label"], ["x", "7"]], "dev", "dev.tsv:2: unknown label '7'"),
])
def test_tsv_errors_name_file_and_line(tmp_path, rows, split, message):
    if split == "dev":
        write_lines(tmp_path / "train.tsv", [["sentence", "label"], ["a", "0"], ["b", "1"]])
    write_lines(tmp_path / f"{split}.tsv", rows)
    p = processors.get_processor("tsv")
    with pytest.raises(processors.DataError, match=message):
        getattr(p, f"get_{split}_examples")(str(tmp_path))


def test_head_tail_truncation():
    tokens = [str(i) for i in range(20)]
    assert classifier_data.truncate_head_tail(tokens, 8, 3) == ["0", "1", "2", "15", "16", "17",
                                                                 "18", "19"]
    assert classifier_data.truncate_head_tail(tokens[:5], 8, 3) == tokens[:5]
    assert classifier_data.truncate_head_tail(tokens, 8, 8) == tokens[:8]
    tokenizer = tokenization.FullTokenizer(VOCAB, True)
    example = processors.InputExample("x", " ".join(WORDS), None, "0")
    f = classifier_data.convert_single_example(example, {"0": 0}, 10, tokenizer, "head_tail", 3)
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + WORDS[:3] + WORDS[-5:] + ["[SEP]"])
    assert f["input_ids"] == ids


def test_feature_cache_is_keyed_on_what_made_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_lines(data / "train.tsv", [["sentence", "label"], ["good fun", "1"], ["bad", "0"]])
    tokenizer = tokenization.FullTokenizer(VOCAB, True)

    def key(**changes):
        args = dict(task_name="tsv", split="train", input_files=[str(data / "train.tsv")],
                    vocab_file=VOCAB, spm_model_file=None, do_lower_case=True,
                    max_seq_length=16, label_list=["0", "1"], truncation="head", head_tokens=128)
        args.update(changes)
        return classifier_data.cache_key(**args)

    base = key()
    assert key() == base
    assert key(head_tokens=5) == base  # ignored unless head_tail
    for change in ({"max_seq_length": 32}, {"do_lower_case": False},
                   {"label_list": ["1", "0"]}, {"truncation": "head_tail"}):
        assert key(**change) != base, change
    calls = []

    def read():
        calls.append(1)
        return processors.get_processor("tsv").get_train_examples(str(data))

    first = classifier_data.cached_features(read, "train", str(tmp_path), base, ["0", "1"], 16,
                                            tokenizer, "head", 128)
    again = classifier_data.cached_features(read, "train", str(tmp_path), base, ["0", "1"], 16,
                                            tokenizer, "head", 128)
    assert first == again and len(calls) == 1 and first[1] == 2
    os.utime(data / "train.tsv", ns=(1, 1))  # the data file changed: a new key
    touched = key()
    assert touched != base
    # The same modification time, another size: a new key.
    write_lines(data / "train.tsv", [["sentence", "label"], ["good fun", "1"], ["bad", "00"]])
    os.utime(data / "train.tsv", ns=(1, 1))
    resized = key()
    assert resized not in (base, touched)
    # A file rewritten within the same second (same size): the nanoseconds count.
    os.utime(data / "train.tsv", ns=(1, 2))
    assert key() != resized
    # Another vocabulary (one token replaced), same casing and flags: a new key.
    other_vocab = tmp_path / "vocab.txt"
    tokens = open(VOCAB, encoding="utf-8").read().split("\n")
    other_vocab.write_text("\n".join(tokens[:1000] + ["[replaced]"] + tokens[1001:]),
                           encoding="utf-8")
    assert key(vocab_file=str(other_vocab)) != key()


def test_layerwise_lr_multipliers_and_update():
    names = ["bert/embeddings/word_embeddings", "bert/encoder/layer_0/output/dense/kernel",
             "bert/encoder/layer_1/output/dense/kernel", "bert/pooler/dense/kernel",
             "output_weights"]
    m = modeling.layerwise_lr_multipliers(names, num_layers=2, rate=0.5)
    assert m == {names[0]: 0.25, names[1]: 0.5, names[2]: 1.0, names[3]: 1.0, names[4]: 1.0}
    rng = np.random.RandomState(0)
    values = {n: rng.normal(size=[3]).astype(np.float32) for n in names}
    grads = {n: tf.constant(rng.normal(size=[3]).astype(np.float32)) for n in names}
    deltas = []
    for multipliers in ({}, m):
        variables = {n: tf.Variable(v) for n, v in values.items()}
        opt = optimization.AdamWeightDecay(0.1)
        opt.build(variables)
        opt.set_lr_multipliers(multipliers)
        opt.apply_gradients(grads, 0)
        deltas.append({n: variables[n].numpy() - values[n] for n in names})
    for n in names:
        np.testing.assert_allclose(deltas[1][n], deltas[0][n] * m[n], rtol=1e-5)


def test_classifier_towers_equal_one_device(tmp_path):
    rng = np.random.RandomState(3)
    path = str(tmp_path / "train.tf_record")
    with tf.io.TFRecordWriter(path) as w:
        for _ in range(64):
            n = rng.randint(3, 17)
            ids = np.zeros(16, int)
            ids[:n] = rng.randint(1, 100, size=n)
            w.write(tfrecord.encode_example({
                "input_ids": ids, "input_mask": (ids > 0).astype(int), "segment_ids": [0] * 16,
                "label_ids": [int(ids[1] > 50)], "is_real_example": [1]}))
    config = BertConfig.from_dict(TINY_CONFIG)
    tf.random.set_seed(5)
    init = BertClassifier(config, 2)
    init_path = str(tmp_path / "init")
    from bert_mgpu.engine import checkpoint
    checkpoint.write_bundle(init_path, init.named_variables())
    results = []
    for n_gpus, batch in ((1, 8), (2, 4)):
        cfg = TrainConfig(output_dir=str(tmp_path / f"out{n_gpus}"), train_batch_size=batch,
                          n_gpus=n_gpus,
                          num_train_steps=4, num_warmup_steps=1, learning_rate=1e-3,
                          init_checkpoint=init_path)
        task = BertClassifier(config, 2)
        task.classifier.dropout_prob = 0.0
        trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
        trainer.train(input_pipeline.record_dataset([path], features.classifier_shapes(16), 8,
                                                    True, seed=1))
        results.append({k: v.numpy() for k, v in task.named_variables().items()})
    for k in results[0]:
        np.testing.assert_allclose(results[0][k], results[1][k], atol=1e-5, err_msg=k)


# One changed flag of the script's run (test_bad_input_is_one_line), and its error.
BAD_INPUT = [
    ({"--task_name": "nope"}, "--task_name: task not found: 'nope'"),
    ({"--init_checkpoint": "/x/cased_L-12_H-768_A-12/bert_model.ckpt"},
     "`cased_L-12_H-768_A-12` seems to be a cased model"),
    ({"--max_seq_length": "65"}, "--max_seq_length=65 is longer than max_position_embeddings"),
]


_scripts_with_the_module = with_the_module("scripts")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """The script on a tsv task with 23 dev and 23 test examples (batch sizes 5 and 7), started
    with the module (it goes on while the in-process tests above run).

    Yields: ({"good": Future of its CompletedProcess, "bad<i>": of BAD_INPUT[i]'s run},
        --output_dir, command).
    """
    rng = np.random.RandomState(1)
    root = tmp_path_factory.mktemp("tsv")
    data = root / "data"
    data.mkdir()

    def rows(n, with_label=True):
        out = []
        for _ in range(n):
            label = str(rng.randint(2))
            words = ["good", "great", "fun"] if label == "1" else ["bad", "boring", "terrible"]
            text = sentence(rng) + " " + " ".join(rng.choice(words, size=2))
            out.append([text, label] if with_label else [text])
        return out

    write_lines(data / "train.tsv", [["sentence", "label"]] + rows(96))
    write_lines(data / "dev.tsv", [["sentence", "label"]] + rows(23))
    write_lines(data / "test.tsv", [["sentence"]] + rows(23, with_label=False))
    config = root / "bert_config.json"
    # Two layers: the layer-wise decay test needs a layer between the top one and the
    # embeddings.
    config.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522, num_hidden_layers=2)))
    out = root / "out"
    cmd = [sys.executable, SCRIPT, "--task_name=tsv", f"--data_dir={data}",
           f"--vocab_file={VOCAB}", f"--bert_config_file={config}", f"--output_dir={out}",
           "--do_train=true", "--do_eval=true", "--do_predict=true", "--max_seq_length=16",
           "--train_batch_size=4", "--n_gpus=2", "--num_train_epochs=2",
           "--learning_rate=1e-3", "--eval_batch_size=5", "--predict_batch_size=7",
           "--truncation=head_tail", "--head_tokens=4", "--layerwise_lr_decay=0.9"]
    # The bad inputs' runs (the same flags, one changed; each its own --output_dir) do not
    # depend on this run: started together with it.
    jobs = {"good": lambda: run_command(cmd)}
    jobs.update(bad_input_jobs(cmd, BAD_INPUT, root))
    # The same run on the same files gzip-compressed (`train.tsv.gz` ...), nothing else there.
    packed = root / "data_gz"
    packed.mkdir()
    for split in ("train", "dev", "test"):
        plain = (data / f"{split}.tsv").read_bytes()
        (packed / f"{split}.tsv.gz").write_bytes(gzip.compress(plain))
    cmd_gz = [{f"--data_dir={data}": f"--data_dir={packed}",
               f"--output_dir={out}": f"--output_dir={root / 'out_gz'}"}.get(c, c) for c in cmd]
    jobs["gz"] = lambda: run_command(cmd_gz)
    with started(jobs) as runs:
        yield runs, out, cmd


@pytest.fixture(scope="module")
def tsv_run(scripts):
    """(the script run's CompletedProcess, --output_dir, command)."""
    runs, out, cmd = scripts
    return runs["good"].result(), out, cmd


def test_script_writes_every_example(tsv_run):
    proc, out, _ = tsv_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "24 steps" in proc.stderr  # int(96 / (4 * 2) * 2)
    predict = (out / "predict.txt").read_text().splitlines()
    assert len(predict) == 23 and set(predict) <= {"0", "1"}
    probs = [list(map(float, line.split("\t")))
             for line in (out / "test_results.tsv").read_text().splitlines()]
    assert len(probs) == 23 and all(abs(sum(p) - 1) < 1e-5 for p in probs)
    assert [str(int(np.argmax(p))) for p in probs] == predict
    result = dict(line.split(" = ") for line in
                  (out / "eval_results.txt").read_text().splitlines())
    assert result["eval_examples"] == "23" and result["global_step"] == "24"
    assert {"eval_accuracy", "eval_loss", "loss", "eval_f1_macro", "eval_precision_0",
            "eval_recall_1", "eval_f1_1"} <= set(result)


def test_rerun_reuses_features_and_checkpoint(tsv_run):
    _, out, cmd = tsv_run
    again = run_command([c for c in cmd if not c.startswith("--do_train")])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Reusing eval features (23 examples)" in again.stderr
    assert "Resumed from" in again.stderr
    assert len((out / "predict.txt").read_text().splitlines()) == 23


def test_gzip_compressed_files_give_the_same_run(scripts, tsv_run):
    """README: train/dev/test may be `.tsv.gz`; the run on them equals the plain files' run."""
    proc, out, _ = tsv_run
    packed = scripts[0]["gz"].result()
    assert proc.returncode == 0 and packed.returncode == 0, packed.stderr[-3000:]
    out_gz = out.parent / "out_gz"
    assert (out_gz / "predict.txt").read_text() == (out / "predict.txt").read_text()
    np.testing.assert_allclose(np.loadtxt(out_gz / "test_results.tsv"),
                               np.loadtxt(out / "test_results.tsv"), atol=1e-5)
    results = [dict(line.split(" = ") for line in (d / "eval_results.txt").read_text().split("\n")
                    if line) for d in (out, out_gz)]
    assert results[0].keys() == results[1].keys()
    for key in results[0]:
        np.testing.assert_allclose(float(results[1][key]), float(results[0][key]), atol=1e-5)


def test_layerwise_lr_decay_scales_the_scripts_first_update(tsv_run, tmp_path):
    """--layerwise_lr_decay=0.5 through the script: one update from the trained run's encoder,
    with and without the decay (same seed, so the same batch, dropout and gradients), moves
    every weight by its layer's factor times the undecayed move: 1 in the top layer and the
    pooler, 0.5 in layer 0, 0.25 in the embeddings (2 layers)."""
    _, out, cmd = tsv_run
    init = tf.train.latest_checkpoint(str(out))
    step_cmd = [c for c in cmd if not c.startswith(("--output_dir", "--do_eval", "--do_predict",
                                                    "--num_train_epochs", "--layerwise_lr_decay"))]
    step_cmd += [f"--init_checkpoint={init}", "--num_train_epochs=0.0834",
                 "--warmup_proportion=0"]
    runs = {decay: str(tmp_path / f"decay_{decay}") for decay in ("0.5", "1.0")}
    with started({decay: lambda decay=decay: run_command(step_cmd + [
            f"--output_dir={runs[decay]}", f"--layerwise_lr_decay={decay}"])
                  for decay in runs}) as procs:
        for proc in (f.result() for f in procs.values()):
            assert proc.returncode == 0, proc.stderr[-3000:]
    before = tf.train.load_checkpoint(init)
    after = {decay: tf.train.load_checkpoint(tf.train.latest_checkpoint(d))
             for decay, d in runs.items()}
    assert after["0.5"].get_tensor("global_step") == 1
    factors = {"bert/embeddings/word_embeddings": 0.25, "bert/embeddings/LayerNorm/beta": 0.25,
               "bert/encoder/layer_0/attention/self/query/kernel": 0.5,
               "bert/encoder/layer_0/output/dense/bias": 0.5,
               "bert/encoder/layer_1/output/dense/kernel": 1.0,
               "bert/pooler/dense/bias": 1.0}
    for name, factor in factors.items():
        start = before.get_tensor(name)
        plain = after["1.0"].get_tensor(name) - start
        decayed = after["0.5"].get_tensor(name) - start
        assert np.abs(plain).max() > 1e-4, name  # the update moved it
        np.testing.assert_allclose(decayed, factor * plain, atol=1e-6, err_msg=name)


def test_sigkill_then_rerun_on_another_split_ends_with_the_same_run(tsv_run, tmp_path):
    """kill -9 during fine-tuning with dropout 0.1 (after the checkpoint at step 12 of 24, maybe
    mid-step or mid-save), rerun as 1 tower x 8 instead of 2 x 4: the same final weights and the
    same evaluation history (every 6 steps: the rows after the checkpoint recomputed, the
    best value carried over) as the uninterrupted run, to 1e-5."""
    _, out, cmd = tsv_run
    config = tmp_path / "dropout_config.json"
    config.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=30522, hidden_dropout_prob=0.1,
                                      attention_probs_dropout_prob=0.1)))
    base = [c for c in cmd if not c.startswith(("--output_dir", "--bert_config_file",
                                                "--do_predict", "--layerwise_lr_decay"))]
    base += [f"--bert_config_file={config}", "--save_checkpoints_steps=4",
             "--eval_every_n_steps=6", "--keep_best_checkpoint"]
    whole, killed = str(tmp_path / "whole"), str(tmp_path / "killed")
    uninterrupted = Launched(base + [f"--output_dir={whole}"])
    dying = Launched(base + [f"--output_dir={killed}"])
    killed_at = signal_at_checkpoint([(dying, killed, 12, signal.SIGKILL, 0.05)])[0]
    assert killed_at is not None, "the run ended before it could be killed"
    _, not_killed = finish_killed(dying, killed, 24)
    assert not_killed is None, not_killed
    other_split = [{"--n_gpus=2": "--n_gpus=1", "--train_batch_size=4": "--train_batch_size=8"
                    }.get(c, c) for c in base] + [f"--output_dir={killed}"]
    assert "--n_gpus=1" in other_split and "--train_batch_size=8" in other_split
    rerun = run_command(other_split)
    done = uninterrupted.finish()
    assert done.returncode == 0, done.stderr[-3000:]
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Resumed from" in rerun.stderr and "Input position restored" in rerun.stderr
    ours, reference = final_tensors(killed), final_tensors(whole)
    assert int(reference["global_step"]) == 24 and sorted(ours) == sorted(reference)
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=1e-5, rtol=0,
                                   err_msg=name)
    history = [evaluation.read_history(d) for d in (killed, whole)]
    assert [r["step"] for r in history[1]] == [6, 12, 18, 24]
    assert [sorted(r) for r in history[0]] == [sorted(r) for r in history[1]]
    for got, want in zip(*history):
        for key in want:
            assert got[key] == pytest.approx(want[key], abs=1e-5), (want["step"], key)
    assert evaluation.best_checkpoint(killed).endswith(
        os.path.basename(evaluation.best_checkpoint(whole)))


def test_sigterm_checkpoints_and_exits_cleanly(scripts, tmp_path):
    """README: SIGTERM (as SIGHUP and SIGINT) finishes the current step, writes a checkpoint and
    exits 0; run_classifier_mgpu.py as run_pretraining.py (whose test covers the three
    signals). The module's tiny run, training only, for 100 epochs (1,200 steps)."""
    _, _, cmd = scripts
    out = tmp_path / "out"
    base = [c for c in cmd if not c.startswith(("--output_dir", "--do_eval", "--do_predict",
                                                "--num_train_epochs"))]
    run = Launched(base + [f"--output_dir={out}", "--num_train_epochs=100",
                           "--save_checkpoints_steps=4", "--log_every_n_steps=1000"])
    signalled_at = signal_at_checkpoint([(run, str(out), 4, signal.SIGTERM, 0)])[0]
    proc = run.finish(300)
    assert signalled_at is not None, "the run ended before the signal"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1200 steps" in proc.stderr  # int(96 / (4 * 2) * 100)
    assert "Received SIGTERM" in proc.stderr
    stopped_at = int(proc.stderr.split("Stopped by SIGTERM at global_step ")[1].split(";")[0])
    assert 4 <= stopped_at < 1200  # stopped before its last step
    assert tf.train.latest_checkpoint(str(out)).endswith(f"model.ckpt-{stopped_at}")


@pytest.mark.parametrize("change,message", BAD_INPUT)
def test_bad_input_is_one_line(scripts, change, message):
    proc = scripts[0][f"bad{BAD_INPUT.index((change, message))}"].result()
    last = error_line(proc, "run_classifier_mgpu.py")
    assert message in last, last
