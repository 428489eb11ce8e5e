"""run_ner.py: the script end to end on a crafted CoNLL set, towers == one device with dropout on,
only first pieces reach the loss, the tagging head's variables."""

import json
import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import Launched, error_line, signal_at_checkpoint
from _oracle import REPO, run_json_request
from _pretraining_data import TINY_CONFIG
from _together import bad_input_jobs, run_command, started, with_the_module
from test_length_batching import randomize

from bert_mgpu.configs.base import ModelFiles, TrainConfig, TrainOptions
from bert_mgpu.configs.ner import NerConfig
from bert_mgpu.data import input_pipeline, ner_data
from bert_mgpu.engine import checkpoint, towers, training
from bert_mgpu.metrics import ner as ner_metrics
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks import ner as ner_task
from bert_mgpu.tasks.ner import TaggingTask, run_ner
from bert_mgpu.tokenization import FullTokenizer

SCRIPT = os.path.join(REPO, "run_ner.py")
FIRST_NAMES = ["jim", "anna", "maria"]
LAST_NAMES = ["henson", "smith"]  # henson: two pieces (hen ##son)
PLACES = ["paris", "york", "berlin", "puppeteer"]  # puppeteer: two pieces (puppet ##eer)
OTHERS = ["was", "a", "in", "the", "met", "saw", "went", "to", "and", "then", "."]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hen", "##son", "puppet", "##eer"]
         + [w for w in FIRST_NAMES + LAST_NAMES + PLACES + OTHERS
            if w not in ("henson", "puppeteer")])
NO_PIECES = "\u200b"  # a zero-width space: a token of the file, no WordPiece at all
SEQ = 16  # 14 pieces per window


def random_sentence(rng, n):
    """Words and BIO tags: persons (a first name, and a last name or not), places (1 word),
    other words."""
    words, tags = [], []
    while len(words) < n:
        r = rng.rand()
        if r < 0.2:
            words += [str(rng.choice(FIRST_NAMES)), str(rng.choice(LAST_NAMES))]
            tags += ["B-PER", "I-PER"]
        elif r < 0.3:
            words.append(str(rng.choice(FIRST_NAMES)))
            tags.append("B-PER")
        elif r < 0.45:
            words.append(str(rng.choice(PLACES)))
            tags.append("B-LOC")
        else:
            words.append(str(rng.choice(OTHERS)))
            tags.append("O")
    return words, tags


def conll(sentences):
    return "\n".join("".join(f"{w} {t}\n" for w, t in zip(*s)) for s in sentences)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ner")
    rng = np.random.RandomState(0)
    data = root / "data"
    data.mkdir()
    train = [random_sentence(rng, rng.randint(3, 10)) for _ in range(96)]
    # Evaluated and predicted: a long sentence (several windows), a word without pieces, an
    # I- without B- (conlleval opens an entity there).
    long_words, long_tags = random_sentence(rng, 45)
    dev = [random_sentence(rng, rng.randint(3, 10)) for _ in range(20)] + [
        (long_words, long_tags),
        (["jim", NO_PIECES, "was", "in", "paris"], ["B-PER", "O", "O", "O", "B-LOC"]),
        (["anna", "went", "to", "york"], ["I-PER", "O", "O", "B-LOC"])]
    (data / "train.txt").write_text("-DOCSTART- -X- O\n\n" + conll(train), encoding="utf-8")
    text = conll(dev)
    (data / "dev.txt").write_text(text, encoding="utf-8")
    # test.txt = dev.txt with Windows line ends: predictions.txt must then score as eval_f1.
    (data / "test.txt").write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (root / "bert_config.json").write_text(json.dumps(dict(
        TINY_CONFIG, vocab_size=len(VOCAB), hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1)))
    return root, dev


# -- the task --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def records(files, tmp_path_factory):
    """Training records of crafted sentences (1..9 labelled words per window) and an init
    checkpoint of the tagging model."""
    root, _ = files
    rng = np.random.RandomState(5)
    sentences = [ner_data.Sentence(f"s-{i}", *random_sentence(rng, rng.randint(1, 20)), [], "")
                 for i in range(48)]
    tokenizer = FullTokenizer(str(root / "vocab.txt"), do_lower_case=True)
    labels = ner_data.get_labels(sentences)
    windows = ner_data.convert_sentences(sentences, labels, SEQ, tokenizer, doc_stride=6)
    d = tmp_path_factory.mktemp("records")
    path = str(d / "train.tf_record")
    ner_data.write_features(windows, path)
    config = BertConfig.from_json_file(str(root / "bert_config.json"))
    tf.random.set_seed(3)
    init = checkpoint.write_bundle(str(d / "init" / "bert_model.ckpt"),
                                   TaggingTask(config, len(labels)).named_variables())
    return {"path": path, "labels": labels, "config": config, "init": init, "dir": d,
            "windows": windows, "tokenizer": tokenizer}


def train_tagger(records, name, n_gpus, batch, accum=1, config=None, steps=3):
    cfg = TrainConfig(output_dir=str(records["dir"] / name), train_batch_size=batch,
                      n_gpus=n_gpus, num_accumulation_steps=accum, num_train_steps=steps,
                      num_warmup_steps=1, learning_rate=1e-3, save_checkpoints_steps=100,
                      log_every_n_steps=1, init_checkpoint=records["init"])
    task = TaggingTask(config or records["config"], len(records["labels"]))
    trainer = training.Trainer(task, cfg, towers.tower_devices(n_gpus))
    trainer.train(input_pipeline.record_dataset(
        [records["path"]], ner_data.ner_shapes(SEQ), cfg.global_batch_size, True, seed=2,
        shuffle_buffer=0))
    return {k: v.numpy() for k, v in task.named_variables().items()}


def test_tagging_head_variables(records):
    names = TaggingTask(records["config"], 6).named_variables()
    shapes = {k: v.shape.as_list() for k, v in names.items() if not k.startswith("bert/")}
    assert shapes == {"cls/ner/output_weights": [6, 32], "cls/ner/output_bias": [6]}


def test_towers_and_accumulation_equal_one_device_with_dropout(records):
    """The windows carry 0..9 labelled words each: a loss normalised per tower would differ."""
    one = train_tagger(records, "one", 1, 8)
    # 2 towers x 2 accumulated micro-batches of 2 windows: both splits at once.
    other = train_tagger(records, "towers", 2, 2, accum=2)
    for k in one:
        np.testing.assert_allclose(other[k], one[k], atol=1e-5, err_msg=k)
    no_dropout = train_tagger(records, "nodrop", 1, 8, config=records["config"].replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    assert max(np.abs(no_dropout[k] - one[k]).max() for k in one) > 1e-4  # dropout acted


def test_only_first_pieces_reach_the_loss(records):
    windows, tokenizer = records["windows"], records["tokenizer"]
    # The weighted positions are exactly the words' first pieces ...
    for w in windows:
        tokens = tokenizer.convert_ids_to_tokens(w.values["input_ids"])
        weighted = [i for i, x in enumerate(w.values["label_weights"]) if x]
        assert weighted == sorted(w.positions)
        assert all(not tokens[i].startswith("##") and tokens[i] not in ("[CLS]", "[SEP]",
                                                                        "[PAD]")
                   for i in weighted)
    # ... and the labels elsewhere (later pieces, [CLS], [SEP], padding) change nothing.
    batch = {k: tf.constant([w.values[k] for w in windows[:8]],
                            tf.float32 if k == "label_weights" else tf.int32)
             for k in ner_data.NER_FEATURES}
    task = TaggingTask(records["config"], len(records["labels"]), dropout_prob=0.0)
    scrambled = dict(batch)
    rng = np.random.RandomState(0)
    noise = rng.randint(0, len(records["labels"]), size=batch["label_ids"].shape)
    weights = batch["label_weights"].numpy()
    scrambled["label_ids"] = tf.constant(np.where(weights > 0, batch["label_ids"], noise),
                                         tf.int32)
    assert (scrambled["label_ids"].numpy() != batch["label_ids"].numpy()).any()

    def loss_and_grads(features):
        variables = list(task.named_variables().values())
        with tf.GradientTape() as tape:
            loss = task.tower_loss(features, task.context(features), training=False)["loss"]
        # The pooler is not on the tagging path: its gradients are None.
        return loss.numpy(), [tf.convert_to_tensor(g).numpy()
                              for g in tape.gradient(loss, variables) if g is not None]

    loss, grads = loss_and_grads(batch)
    loss2, grads2 = loss_and_grads(scrambled)
    assert loss2 == loss
    for g, g2 in zip(grads, grads2):
        np.testing.assert_array_equal(g, g2)
    # The loss is the mean over labelled words of -log p(tag), computed here by hand.
    logits = task._forward(batch, training=False)["logits"].numpy()
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, batch["label_ids"].numpy()[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss, -(picked * weights).sum() / weights.sum(), rtol=1e-5)
    # A labelled position's label does count.
    changed = batch["label_ids"].numpy().copy()
    i, j = np.argwhere(weights > 0)[0]
    changed[i, j] = (changed[i, j] + 1) % len(records["labels"])
    assert loss_and_grads(dict(batch, label_ids=tf.constant(changed)))[0] != loss


def hf_name(name):
    """Our (Google's) variable name -> (Hugging Face parameter name, transpose)."""
    if name.startswith("cls/ner/"):
        return {"output_weights": "classifier.weight",
                "output_bias": "classifier.bias"}[name.split("/")[-1]], False
    hf = name.replace("/", ".").replace("layer_", "layer.")
    hf = hf.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                  "LayerNorm.bias")
    if hf.endswith("_embeddings"):
        return hf + ".weight", False
    if hf.endswith(".kernel"):
        return hf[:-len(".kernel")] + ".weight", True
    return hf, False


def test_logits_and_loss_equal_hugging_face_bert_for_token_classification(records, tmp_path):
    """The same weights in Hugging Face's model (the head is its `classifier`, labels -100 off
    the first pieces): the same logits at every position and the same loss."""
    config = records["config"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    tf.random.set_seed(11)
    task = TaggingTask(config, len(records["labels"]))
    weights = {}
    for name, var in task.named_variables().items():
        if not name.startswith("bert/pooler/"):  # not on the tagging path, not in HF's model
            key, transpose = hf_name(name)
            weights[key] = var.numpy().T if transpose else var.numpy()
    np.savez(tmp_path / "weights.npz", **weights)
    windows = records["windows"][:12]
    batch = {k: np.array([w.values[k] for w in windows]) for k in ner_data.NER_FEATURES}
    np.savez(tmp_path / "batch.npz", **batch)
    out = json.loads(run_json_request("hf_token_classification.py", {
        "config": config.to_dict(), "num_labels": len(records["labels"]),
        "weights": str(tmp_path / "weights.npz"), "batch": str(tmp_path / "batch.npz")},
        tmp_path).strip().splitlines()[-1])
    features = {k: tf.constant(v, tf.float32 if k == "label_weights" else tf.int32)
                for k, v in batch.items()}
    logits = task._forward(features, training=False)["logits"].numpy()
    np.testing.assert_allclose(logits, np.array(out["logits"]), atol=2e-5)
    loss = task.tower_loss(features, task.context(features), training=False)["loss"]
    assert float(loss) == pytest.approx(out["loss"], rel=1e-5)


# -- the script (last: its runs start with the module and go on while the tests above run) -----

# One changed flag of the script's run (test_bad_input_is_one_line), and its error.
BAD_INPUT = [
    ({"--label_list": "B-PER,O"}, "--label_list must start with 'O'"),
    ({"--tag_scheme": "iob"}, "--tag_scheme"),
    ({"--doc_stride": "15"}, "--doc_stride must be in [1, max_seq_length - 2 = 14]"),
]


# -- length-aware batching (--pad_to_longest) ---------------------------------------------------

LENGTH_SEQ = 32  # windows of 5..24 pieces: trimmed batches of 8, 16 or 24 positions


@pytest.fixture(scope="module")
def length_runs(files, tmp_path_factory):
    """run_ner (in process) on `files` with --max_seq_length=32, 2 towers, dropout on, from
    visible random weights: padded (--pad_to_longest=false, every position of every layer
    computed) and trimmed to multiples of 8 (training on the real tokens' rows only).
    Returns {pad_to_longest: (output_dir, final weights)}."""
    root, _ = files
    d = tmp_path_factory.mktemp("ner_lengths")
    config = BertConfig.from_json_file(str(root / "bert_config.json"))
    tf.random.set_seed(7)
    init_model = TaggingTask(config, 4)  # O, B-LOC, B-PER, I-PER
    randomize(init_model.named_variables(), seed=3)
    init = checkpoint.write_bundle(str(d / "init" / "bert_model.ckpt"),
                                   init_model.named_variables())
    runs, trimmed_length = {}, input_pipeline.trimmed_length
    for pad in (False, True):
        out = d / f"pad_{pad}"
        cfg = NerConfig(
            model=ModelFiles(bert_config_file=str(root / "bert_config.json"),
                             vocab_file=str(root / "vocab.txt"), init_checkpoint=init,
                             max_seq_length=LENGTH_SEQ),
            train=TrainOptions(n_gpus=2, train_batch_size=4, learning_rate=3e-3,
                               random_seed=5, shuffle_buffer_size=0,
                               save_checkpoints_steps=1000, log_every_n_steps=100),
            output_dir=str(out), data_dir=str(root / "data"), do_train=True, do_eval=True,
            do_predict=True, num_train_epochs=0.5, eval_batch_size=5, predict_batch_size=3,
            pad_to_longest=pad, pad_to_multiple_of=8)
        lengths, options, training_options = [], [], ner_task.training_options
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(input_pipeline, "trimmed_length", lambda *args: lengths.append(
                trimmed_length(*args)) or lengths[-1])
            patch.setattr(ner_task, "training_options", lambda: options.append(
                training_options() if pad else {"drop_padding": False}) or options[-1])
            run_ner(cfg)
        assert options and all(o["drop_padding"] == pad for o in options), options
        # Only the trimmed run cuts batches (training, evaluation, prediction), most to < 32.
        if pad:
            assert {8, 16} <= set(lengths) <= {8, 16, 24, 32}, sorted(set(lengths))
        else:
            assert not lengths
        reader = tf.train.load_checkpoint(str(out))
        runs[pad] = (out, {name: reader.get_tensor(name)
                           for name in reader.get_variable_to_shape_map()})
    return runs


def test_trimmed_run_equals_the_padded_run(length_runs):
    """Training (dropout on), eval_results.txt and predictions.txt with --pad_to_longest: the
    padded run's, to 1e-5 (the file exactly)."""
    (padded_out, padded), (trimmed_out, trimmed) = length_runs[False], length_runs[True]
    assert int(padded["global_step"]) == 6 == int(trimmed["global_step"])  # 96 / 8 * 0.5
    assert sorted(padded) == sorted(trimmed)
    for name in padded:
        np.testing.assert_allclose(trimmed[name], padded[name], atol=1e-5, err_msg=name)
    init = tf.train.load_checkpoint(str(padded_out.parent / "init" / "bert_model.ckpt"))
    assert np.abs(padded["cls/ner/output_weights"]
                  - init.get_tensor("cls/ner/output_weights")).max() > 1e-4  # it trained

    def results(out):
        return {k: float(v) for k, v in (line.split(" = ") for line in
                                         (out / "eval_results.txt").read_text().splitlines())}

    assert results(trimmed_out) == pytest.approx(results(padded_out), abs=1e-5)
    predictions = (padded_out / "predictions.txt").read_text(encoding="utf-8")
    assert (trimmed_out / "predictions.txt").read_text(encoding="utf-8") == predictions
    # The random weights tag the words differently: an equality of all-"O" files proves little.
    predicted = [line.split(" ")[-1] for line in predictions.splitlines() if line]
    assert len(set(predicted)) >= 2 and predicted.count("O") < len(predicted) - 5


def test_trimmed_batches_cut_labels_with_the_inputs(records):
    """A tagging batch cut to its longest window keeps every label weight, each with its
    label; grouped by length (--group_by_length), an epoch still covers every window."""
    task = TaggingTask(records["config"], len(records["labels"]))
    shapes = ner_data.ner_shapes(SEQ)
    for batch in input_pipeline.record_dataset([records["path"]], shapes, 8, False):
        cut = task.trim_padding(batch, 4)
        length = int(cut["input_ids"].shape[1])
        assert {k: v.shape[1] for k, v in cut.items()} == dict.fromkeys(shapes, length)
        assert float(tf.reduce_sum(cut["label_weights"])) == float(
            tf.reduce_sum(batch["label_weights"]))
        np.testing.assert_array_equal(cut["label_ids"], batch["label_ids"][:, :length])
    n = len(records["windows"])
    grouped = input_pipeline.record_dataset([records["path"]], shapes, 4, True, seed=1,
                                            shuffle_buffer=0, group_by_length=True)
    stream = np.concatenate([b["input_ids"].numpy() for b in grouped.take(n)])  # 4 epochs
    every = sorted(w.values["input_ids"] for w in records["windows"])
    for e in range(4):
        assert sorted(stream[e * n:(e + 1) * n].tolist()) == every


_scripts_with_the_module = with_the_module("scripts")


@pytest.fixture(scope="module")
def scripts(files):
    """The script's run; the bad inputs' runs (the same flags, one changed; each its own
    --output_dir) and --help do not depend on it: started together with it.

    Yields: ({"good": Future of the run's CompletedProcess, "bad<i>": of BAD_INPUT[i]'s run,
        "help": of --help's}, its --output_dir).
    """
    root, _ = files
    out = root / "out"
    cmd = [sys.executable, SCRIPT, f"--data_dir={root / 'data'}",
           f"--vocab_file={root / 'vocab.txt'}", f"--bert_config_file={root / 'bert_config.json'}",
           f"--output_dir={out}", "--do_train=true", "--do_eval=true", "--do_predict=true",
           f"--max_seq_length={SEQ}", "--doc_stride=5", "--train_batch_size=4", "--n_gpus=2",
           "--num_train_epochs=12", "--learning_rate=3e-3", "--warmup_proportion=0.1",
           "--eval_batch_size=5", "--predict_batch_size=3", "--tag_scheme=bioes",
           "--save_checkpoints_steps=1000", "--log_every_n_steps=50",
           "--eval_every_n_steps=100"]
    jobs = {"good": lambda: run_command(cmd, timeout=600)}
    jobs.update(bad_input_jobs(cmd, BAD_INPUT, root))
    jobs["help"] = lambda: run_command([sys.executable, SCRIPT, "--help"])
    with started(jobs) as runs:
        yield runs, out


@pytest.fixture(scope="module")
def run(scripts, files):
    """(the script run's CompletedProcess, --output_dir, the dev sentences)."""
    runs, out = scripts
    return runs["good"].result(), out, files[1]


def test_script_trains_evaluates_and_writes_every_token(run):
    proc, out, dev = run
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = dict(line.split(" = ") for line in
                  (out / "eval_results.txt").read_text().splitlines())
    assert {"eval_precision", "eval_recall", "eval_f1", "eval_accuracy", "eval_loss",
            "eval_token_accuracy", "loss", "global_step", "eval_f1_PER", "eval_f1_LOC",
            "eval_precision_LOC", "eval_recall_PER", "eval_sentences", "eval_tokens"
            } <= set(result), sorted(result)
    assert int(result["eval_sentences"]) == len(dev)
    assert int(result["eval_tokens"]) == sum(len(w) for w, _ in dev)
    # 96 sentences -> one window each; 12 epochs of 8 windows.
    assert int(result["global_step"]) == 96 * 12 // 8
    # The tiny model learnt the word -> entity mapping (it is all there is to learn).
    assert float(result["eval_f1"]) > 0.8, result
    # Not collapsed (issue 34): every tag of the dev words predicted, no warning.
    assert result["eval_predicted_tags"] == "5" and float(result["train_loss_change"]) < -0.1
    assert "Fine-tuning looks collapsed" not in proc.stderr

    # predictions.txt: every token of test.txt, in order, with its gold tag (BIO, as the file:
    # the model worked in BIOES) and a predicted BIO tag; the word without pieces is "O".
    lines = (out / "predictions.txt").read_text(encoding="utf-8").split("\n")
    sentences, current = [], []
    for line in lines[:-1]:
        if line:
            current.append(line.split(" "))
        else:
            sentences.append(current)
            current = []
    sentences.append(current)
    assert [[r[0] for r in s] for s in sentences] == [w for w, _ in dev]
    assert [[r[1] for r in s] for s in sentences] == [t for _, t in dev]
    predicted = [t for s in sentences for _, _, t in s]
    assert all(t == "O" or t[:2] in ("B-", "I-") for t in predicted)
    assert sentences[-2][1] == [NO_PIECES, "O", "O"]
    # test.txt is dev.txt: conlleval over predictions.txt gives the eval results.
    scores = ner_metrics.evaluate_lines(lines)
    assert scores.overall.f1 == pytest.approx(float(result["eval_f1"]), abs=1e-12)
    assert scores.accuracy == pytest.approx(float(result["eval_accuracy"]), abs=1e-12)
    # The long sentence made several windows; the log says how many.
    assert "Running evaluation: 23 sentences" in proc.stderr
    windows = int(proc.stderr.split("Running evaluation: 23 sentences, ")[1].split()[0])
    assert windows >= 23 + 3, windows
    # Evaluation during training: conlleval's F1 at steps 100 and 144 (the last, whose weights
    # the final evaluation sees too).
    history = [line.split("\t") for line in
               (out / "eval_history.tsv").read_text().splitlines()]
    rows = [dict(zip(history[0], row)) for row in history[1:]]
    assert [r["step"] for r in rows] == ["100", "144"]
    assert float(rows[-1]["eval_f1"]) == pytest.approx(float(result["eval_f1"]), abs=1e-12)
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["labels"] == ["O", "B-PER", "E-PER", "S-LOC", "S-PER"]
    # The default --best_metric is conlleval's F1 (README).
    assert run_config["best_metric"] == "eval_f1"
    assert "Evaluation at step 144: eval_f1 = " in proc.stderr


def test_rerun_predicts_from_the_checkpoint(run):
    proc, out, _ = run
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = (out / "predictions.txt").read_text(encoding="utf-8")
    again = run_command([sys.executable, SCRIPT] + [
        a for a in proc.args[2:]
        if not a.startswith(("--do_train", "--do_eval", "--eval_every_n_steps"))])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Reusing test features" in again.stderr
    assert (out / "predictions.txt").read_text(encoding="utf-8") == before


def test_sigterm_checkpoints_and_exits_cleanly(files, tmp_path):
    """README: SIGTERM (as SIGHUP and SIGINT) finishes the current step, writes a checkpoint and
    exits 0; run_ner.py as run_pretraining.py (whose test covers the three signals)."""
    root, _ = files
    out = tmp_path / "out"
    run = Launched([sys.executable, SCRIPT, f"--data_dir={root / 'data'}",
                    f"--vocab_file={root / 'vocab.txt'}",
                    f"--bert_config_file={root / 'bert_config.json'}", f"--output_dir={out}",
                    "--do_train=true", f"--max_seq_length={SEQ}", "--doc_stride=5",
                    "--train_batch_size=4", "--num_train_epochs=100", "--learning_rate=1e-3",
                    "--save_checkpoints_steps=5", "--log_every_n_steps=1000"])
    signalled_at = signal_at_checkpoint([(run, str(out), 5, signal.SIGTERM, 0)])[0]
    proc = run.finish(300)
    assert signalled_at is not None, "the run ended before the signal"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Received SIGTERM" in proc.stderr
    stopped_at = int(proc.stderr.split("Stopped by SIGTERM at global_step ")[1].split(";")[0])
    assert 5 <= stopped_at < 96 * 100 // 4  # before the last of the 2400 steps
    assert tf.train.latest_checkpoint(str(out)).endswith(f"model.ckpt-{stopped_at}")


@pytest.mark.parametrize("change,message", BAD_INPUT)
def test_bad_input_is_one_line(scripts, change, message):
    bad = scripts[0][f"bad{BAD_INPUT.index((change, message))}"].result()
    last = error_line(bad, "run_ner.py")
    assert message in last, last


def test_help_lists_the_flags(scripts):
    # (absl's --help exits with 1, as in tests/test_bad_input.py.)
    proc = scripts[0]["help"].result()
    for flag in ("--tag_scheme", "--doc_stride", "--label_list", "--n_gpus", "--data_dir",
                 "--eval_every_n_steps", "--num_accumulation_steps", "--init_checkpoint"):
        assert flag in proc.stdout, flag


def test_ner_export_tags_equal_the_runs_predictions(run, tmp_path):
    """export_saved_model.py --task=ner --output_dir=RUN: the test sentences as raw text (words
    joined by spaces) in, in a process without bert_mgpu: their words, and tags that, in the
    files' scheme (the run trained on BIOES), are predictions.txt's: the long sentence read in
    the run's windows, the word without a WordPiece tagged O."""
    pytest.importorskip("tensorflow_text")
    from _serving import run_loaded

    proc, out, dev = run
    assert proc.returncode == 0, proc.stderr[-3000:]
    export = run_command([sys.executable, os.path.join(REPO, "export_saved_model.py"),
                          "--task=ner", f"--output_dir={out}",
                          f"--export_dir={tmp_path / 'export'}"])
    assert export.returncode == 0, export.stderr[-3000:]
    got = run_loaded(tmp_path, tmp_path / "export" / "1", """
        served = model.signatures["serving_default"](text=tf.constant(request["texts"]))
        # (UTF-8 words: the zero-width space.)
        out = {k: [[w.decode("utf-8") for w in row] for row in v.numpy().tolist()]
               if v.dtype == tf.string else v.numpy().tolist() for k, v in served.items()}
    """, {"texts": [" ".join(words) for words, _ in dev]})
    lines = [line.split(" ") for line in
             (out / "predictions.txt").read_text(encoding="utf-8").splitlines() if line]
    assert got["num_words"] == [len(words) for words, _ in dev]
    at = 0
    for row, (words, _) in enumerate(dev):
        n = len(words)
        assert got["words"][row][:n] == words
        assert ner_data.bioes_to_bio(got["tags"][row][:n]) == [
            line[2] for line in lines[at:at + n]], row
        at += n
    assert got["tags"][-2][1] == "O"  # NO_PIECES
