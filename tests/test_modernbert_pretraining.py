"""ModernBERT pretraining through create_pretraining_data.py and run_pretraining.py (issue 50,
section 3): a tokenizer.json (ModernBERT-shaped byte-level BPE, trained by Hugging Face
`tokenizers` on the KJV text the repo ships), 30% masking, dynamic masking, packed documents
with `document_ids`, the warmup-stable-decay schedule, a longer second phase, exactness with
dropout 0.1 (towers, kill -9 and rerun, gradient checkpointing), and the checkpoint back to a
Hugging Face folder that `transformers` loads with equal logits.
"""

import gzip
import json
import math
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _launch import (
    Launched,
    error_line,
    final_tensors,
    finish_killed,
    run_all,
    signal_at_checkpoint,
)
from _oracle import DATA, ORACLES, REPO, run_json_request

from bert_mgpu.data import input_pipeline, tfrecord
from bert_mgpu.engine import checkpoint, optimization
from bert_mgpu.model import execution, heads, modeling
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.pretraining import BertPretrainer

# ModernBERT's keys (docs/modernbert.md), tiny: layer 0 global, layers 1-2 local (window 8, so
# the 32- and 64-token sequences here are longer than it); dropout on as in a real run.
MB_CONFIG = {
    "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
    "intermediate_size": 48, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128, "type_vocab_size": 0,
    "initializer_range": 0.02, "pre_layer_norm": True, "use_bias": False, "gated_ffn": True,
    "position_embedding_type": "rope", "rope_theta": 160000.0, "local_rope_theta": 10000.0,
    "local_attention_window": 8, "global_attention_every_n_layers": 3,
    "layer_norm_bias": False, "layer_norm_eps": 1e-5, "first_layer_attention_norm": False,
    "head_bias": False, "classifier_pooling": "cls"}
STEPS, WARMUP, DECAY, LR, FINAL = 12, 2, 5, 1e-3, 0.1


def _script(name):
    return os.path.join(REPO, name)


def _python(name, *flags):
    return [sys.executable, _script(name), *flags]


def _check(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The corpus (KJV verses, a blank line after every 7th: 7-verse documents), its
    tokenizer.json, the ModernBERT bert_config.json, and records: packed with document_ids and
    unmasked (--dynamic_masking) at 32 and 64 tokens."""
    d = tmp_path_factory.mktemp("mb")
    with gzip.open(os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz"),
                   "rt", encoding="utf-8") as f:
        verses = [f.readline().strip() for _ in range(700)]
    corpus = d / "corpus.txt"
    corpus.write_text("".join(v + ("\n\n" if i % 7 == 6 else "\n")
                              for i, v in enumerate(verses)), encoding="utf-8")
    # The oracle's trainer needs `tokenizers` only, a project dependency: run it here.
    tokenizer = d / "tokenizer.json"
    _check(subprocess.run([sys.executable, os.path.join(ORACLES, "hf_bpe_tokenizer.py"),
                           "train", str(tokenizer), "400", str(corpus)],
                          capture_output=True, text=True, timeout=300))
    vocab_size = 1 + max(t["id"] for t in json.loads(tokenizer.read_text())["added_tokens"])
    config = d / "bert_config.json"
    config.write_text(json.dumps(dict(MB_CONFIG, vocab_size=vocab_size)))
    out = {"dir": d, "corpus": str(corpus), "tokenizer": str(tokenizer), "config": str(config)}
    cmds = []
    for length in (32, 64):
        out[f"dyn{length}"] = str(d / f"dyn{length}.tfrecord")
        cmds.append(_python("create_pretraining_data.py", f"--input_file={corpus}",
                            f"--output_file={out[f'dyn{length}']}", f"--vocab_file={tokenizer}",
                            f"--max_seq_length={length}", "--pack_sequences", "--document_ids",
                            "--dynamic_masking", "--dupe_factor=1", "--random_seed=7"))
    for proc in run_all(cmds):
        _check(proc)
    return out


def _records(path):
    return [tfrecord.decode_example(r) for r in tfrecord.read_records(path)]


def _documents_ids(files):
    """Each document's ids by Hugging Face `tokenizers` (one line at a time, as the script reads
    them, no special tokens), as bytes of 2-byte ids for substring search."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(files["tokenizer"])
    docs = [d.splitlines() for d in open(files["corpus"], encoding="utf-8").read().split("\n\n")]
    encoded = [[i for line in doc if line for i in tok.encode(line, add_special_tokens=False).ids]
               for doc in docs if any(doc)]
    return [np.array(ids, "<u2").tobytes() for ids in encoded]


def test_bpe_records_are_tokenizers_ids_masked_30_percent_with_documents_marked(files):
    """Static masking with --masked_lm_prob=0.3: every packed record, unmasked again, is a run
    of `tokenizers`' ids per document; a document_ids run that another follows ends its document
    (with its [SEP]) and one that follows another starts one; 30% of the tokens are predicted,
    never [CLS]/[SEP]."""
    out = str(files["dir"] / "static.tfrecord")
    proc = _check(run_all([_python(
        "create_pretraining_data.py", f"--input_file={files['corpus']}", f"--output_file={out}",
        f"--vocab_file={files['tokenizer']}", "--max_seq_length=32",
        "--max_predictions_per_seq=12", "--masked_lm_prob=0.3", "--pack_sequences",
        "--document_ids", "--dupe_factor=1", "--random_seed=3")])[0])
    # The suggested next command trains masked-LM only.
    assert "run_pretraining.py" in proc.stderr and "--no_next_sentence=true" in proc.stderr
    added = {t["content"]: t["id"] for t in
             json.loads(open(files["tokenizer"]).read())["added_tokens"]}
    cls_id, sep_id = added["[CLS]"], added["[SEP]"]
    documents = _documents_ids(files)
    records = _records(out)
    assert len(records) > 100
    multi = 0
    for r in records:
        n = sum(r["input_mask"])
        ids = list(r["input_ids"][:n])
        k = int(sum(r["masked_lm_weights"]))
        assert k == min(12, max(1, round(n * 0.3)))
        positions = r["masked_lm_positions"][:k]
        for p, original in zip(positions, r["masked_lm_ids"][:k]):
            ids[p] = original
        assert all(ids[p] not in (cls_id, sep_id) for p in positions)
        assert ids[0] == cls_id and ids[-1] == sep_id
        doc = list(r["document_ids"])
        assert doc[n:] == [0] * (32 - n) and doc[0] == 1 and doc[1:n] == sorted(doc[1:n])
        runs = [[i for i in range(1, n - 1) if doc[i] == j] for j in range(1, doc[n - 1] + 1)]
        multi += len(runs) > 1
        for j, run in enumerate(runs):
            tokens = [ids[i] for i in run]
            if j < len(runs) - 1:
                assert tokens[-1] == sep_id  # the document's own [SEP] closes it
            if tokens and tokens[-1] == sep_id:  # (the last run's, when its document ends)
                tokens = tokens[:-1]
            assert sep_id not in tokens and cls_id not in tokens
            piece = np.array(tokens, "<u2").tobytes()
            if j > 0:  # starts a document
                assert any(d.startswith(piece) for d in documents)
            if j < len(runs) - 1:  # ends one
                assert any(d.endswith(piece) for d in documents)
            assert any(piece in d for d in documents)
    assert multi > 10  # instances holding several documents were checked


def test_dynamic_masking_takes_the_tokenizer_json_ids(files):
    """run_pretraining.py --dynamic_masking --vocab_file=tokenizer.json: [MASK]/[CLS]/[SEP] and
    the random words' range are the tokenizer's (by `tokenizers`), and the packed records'
    document_ids pass through the masking unchanged."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(files["tokenizer"])
    masking = input_pipeline.DynamicMasking.from_vocab(
        files["tokenizer"], max_seq_length=32, max_predictions_per_seq=12, masked_lm_prob=0.3,
        seed=1, document_ids=True)
    assert (masking.mask_id, masking.cls_id, masking.sep_id, masking.vocab_size) == (
        tok.token_to_id("[MASK]"), tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"),
        tok.get_vocab_size(with_added_tokens=True))
    raw = next(tfrecord.read_records(files["dyn32"]))
    masked = input_pipeline.mask_example(
        input_pipeline.features.parse_example(tf.constant(raw), masking.shapes), 0, masking)
    assert masked["document_ids"].numpy().tolist() == tfrecord.decode_example(raw)[
        "document_ids"]
    n = int(masked["masked_lm_weights"].numpy().sum())
    assert n == min(12, round(32 * 0.3))
    changed = masked["input_ids"].numpy() != np.array(tfrecord.decode_example(raw)["input_ids"])
    assert changed.sum() <= n and masking.mask_id in masked["input_ids"].numpy()


@pytest.mark.parametrize("attention_chunk", [0, 4])
def test_packed_documents_train_as_if_alone(attention_chunk):
    """The task's masked-LM loss on a row packing two documents (document_ids) equals the loss
    of the two documents run alone; without document_ids (packed=False) it does not. The
    global layer with its full probabilities, and in chunks of 4 query rows (a chunk holding
    both documents' queries)."""
    with execution.entered(attention_chunk=attention_chunk):
        _packed_documents_train_as_if_alone()


def _packed_documents_train_as_if_alone():
    config = BertConfig.from_dict(dict(MB_CONFIG, vocab_size=50, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))
    rng = np.random.RandomState(0)
    lengths = (13, 11)
    ids = rng.randint(5, 50, size=sum(lengths)).astype(np.int32)
    positions = [2, 7, 15, 20]

    def batch(rows, pos, doc=None):
        width = max(len(r) for r in rows)
        out = {"input_ids": np.array([np.pad(r, (0, width - len(r))) for r in rows]),
               "input_mask": np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
               "masked_lm_positions": np.array(pos, np.int32),
               "masked_lm_weights": np.ones([len(rows), len(pos[0])], np.float32)}
        out["segment_ids"] = np.zeros_like(out["input_mask"])
        out["masked_lm_ids"] = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1)
        if doc is not None:
            out["document_ids"] = np.array([doc], np.int32)
        return {k: tf.constant(v) for k, v in out.items()}

    packed = batch([ids], [positions], [1] * lengths[0] + [2] * lengths[1])
    alone = batch([ids[:lengths[0]], ids[lengths[0]:]], [positions[:2], [p - lengths[0] for p in
                                                                          positions[2:]]])
    task = BertPretrainer(config, next_sentence=False, packed=True)
    for var in task.named_variables().values():  # larger than the initializer's: attention
        var.assign(rng.normal(0, 0.5, var.shape))  # across documents then shows clearly
    loss_packed = task.eval_sums(packed)["masked_lm_weighted_loss"]
    plain = BertPretrainer(config, next_sentence=False)
    for name, var in plain.named_variables().items():
        var.assign(task.named_variables()[name])
    loss_alone = plain.eval_sums(alone)["masked_lm_weighted_loss"]
    np.testing.assert_allclose(loss_packed, loss_alone, rtol=1e-5)
    unpacked = dict(packed)
    del unpacked["document_ids"]
    across = float(plain.eval_sums(unpacked)["masked_lm_weighted_loss"])
    assert abs(across - float(loss_alone)) > 1e-2 * abs(float(loss_alone))


def _wsd(step, total=STEPS, warmup=WARMUP, decay=DECAY, peak=LR, final=FINAL):
    """The warmup-stable-decay rate written out by hand (Hägele et al. 2024's 1-sqrt cooldown,
    down to `final` of the peak as ModernBERT's OneMinusSqrtScheduler's alpha_f)."""
    if step < warmup:
        return peak * step / warmup
    start = total - decay
    if step < start or not decay:
        return peak
    return peak * (final + (1 - final) * (1 - math.sqrt(min(step - start, decay) / decay)))


def test_warmup_stable_decay_at_chosen_steps():
    for step, expected in ((0, 0.0), (5, 0.5), (10, 1.0), (79, 1.0), (80, 1.0), (85, 0.5),
                           (95, 1 - math.sqrt(0.75)), (100, 0.0), (150, 0.0)):
        got = float(optimization.warmup_stable_decay_learning_rate_at(step, 1.0, 100, 10, 20))
        assert got == pytest.approx(expected, abs=1e-6), step
        assert got == pytest.approx(_wsd(step, 100, 10, 20, 1.0, 0.0), abs=1e-6)
    # With a floor (ModernBERT's alpha_f): 0.1 + 0.9 * (1 - sqrt(t)).
    for step, expected in ((85, 0.55), (95, 0.1 + 0.9 * (1 - math.sqrt(0.75))), (100, 0.1),
                           (130, 0.1), (60, 1.0)):
        got = float(optimization.warmup_stable_decay_learning_rate_at(step, 1.0, 100, 10, 20,
                                                                      0.1))
        assert got == pytest.approx(expected, abs=1e-6), step
    # No decay: constant after the warmup (a phase a later one decays).
    assert float(optimization.warmup_stable_decay_learning_rate_at(99, 2.0, 100, 10, 0)) == 2.0
    with pytest.raises(ValueError, match="num_decay_steps"):
        optimization.warmup_stable_decay_schedule(1.0, 10, 5, 6)


def _train_args(files, out, *extra, data="dyn32", length=32, steps=STEPS, warmup=WARMUP,
                decay=DECAY):
    return _python(
        "run_pretraining.py", f"--bert_config_file={files['config']}",
        f"--input_file={files[data]}", f"--output_dir={out}", "--do_train=true",
        f"--max_seq_length={length}", "--max_predictions_per_seq=12", "--no_next_sentence",
        "--dynamic_masking", "--masked_lm_prob=0.3", f"--vocab_file={files['tokenizer']}",
        "--lr_schedule=wsd", f"--num_warmup_steps={warmup}", f"--num_decay_steps={decay}",
        f"--final_lr_fraction={FINAL}",
        f"--num_train_steps={steps}", f"--learning_rate={LR}", "--save_checkpoints_steps=3",
        "--log_every_n_steps=1", "--random_seed=11", *extra)


TWO_TOWERS = ("--n_gpus=2", "--train_batch_size=4")
ONE_DEVICE = ("--n_gpus=1", "--train_batch_size=8")
ACCUMULATED = ("--n_gpus=1", "--train_batch_size=4", "--num_accumulation_steps=2")


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory):
    """Side by side, the same global batch of 8 with dropout 0.1: "towers" (2 x 4),
    "one_device" (1 x 8), "recompute" (2 x 4, --gradient_checkpointing) and "killed" (2 x 4,
    SIGKILL after its checkpoint 6, then rerun as 1 x 4 x 2 micro-batches); then "phase2" (64
    tokens from towers' checkpoint) and "eval" (evaluation of `_large_weights`). Each
    (CompletedProcess, output_dir, or the evaluated checkpoint for "eval"); "killed" also its
    kill report."""
    outs = {name: str(tmp_path_factory.mktemp(name))
            for name in ("towers", "one_device", "recompute", "killed", "phase2", "eval")}
    launched = {"towers": Launched(_train_args(files, outs["towers"], *TWO_TOWERS)),
                "one_device": Launched(_train_args(files, outs["one_device"], *ONE_DEVICE)),
                "recompute": Launched(_train_args(files, outs["recompute"], *TWO_TOWERS,
                                                  "--gradient_checkpointing")),
                "killed": Launched(_train_args(files, outs["killed"], *TWO_TOWERS))}
    killed_at = signal_at_checkpoint([(launched["killed"], outs["killed"], 6, signal.SIGKILL,
                                       0.05)])[0]
    _, not_killed = finish_killed(launched["killed"], outs["killed"], STEPS)
    result = {name: (launched[name].finish(), outs[name])
              for name in ("towers", "one_device", "recompute")}
    result["killed"] = (run_all([_train_args(files, outs["killed"], *ACCUMULATED)])[0],
                        outs["killed"], killed_at, not_killed)
    phase2 = _train_args(files, outs["phase2"], *TWO_TOWERS, "--verbose",
                         f"--init_checkpoint={outs['towers']}", data="dyn64", length=64,
                         steps=3, warmup=0, decay=3)
    weights = _large_weights(files, tmp_path_factory.mktemp("large"))
    evaluate = [a for a in _train_args(files, outs["eval"]) if a != "--do_train=true"] + [
        "--do_eval=true", "--eval_batch_size=8", "--max_eval_steps=3",
        f"--init_checkpoint={weights}"]
    result["phase2"], result["eval"] = zip(run_all([phase2, evaluate]),
                                           (outs["phase2"], weights))
    return result


def _large_weights(files, directory):
    """A checkpoint of the model with random weights far larger than the initializer's (whose
    attention is nearly uniform): attending across documents then changes the loss clearly."""
    config = BertConfig.from_json_file(files["config"])
    task = BertPretrainer(config, next_sentence=False)
    rng = np.random.RandomState(4)
    named = task.named_variables()
    for var in named.values():
        var.assign(rng.normal(0, 0.5, var.shape))
    return checkpoint.write_bundle(str(directory / "model.ckpt"), named)


def _assert_same_weights(ours, reference, atol=1e-5):
    assert sorted(ours) == sorted(reference)
    assert int(ours["global_step"]) == int(reference["global_step"]) == STEPS
    for name in reference:
        np.testing.assert_allclose(ours[name], reference[name], atol=atol, rtol=0, err_msg=name)


def test_logged_learning_rate_follows_warmup_stable_decay(runs):
    """The script's step lines: the rate of step N's update is the schedule at N - 1 (updates
    applied before it); a linear schedule would differ from step 3 on, a decay to 0 (the floor
    --final_lr_fraction ignored) from step 9 on."""
    proc = _check(runs["towers"][0])
    logged = {int(m.group(1)): float(m.group(2)) for m in re.finditer(
        r"step (\d+)/\d+: .*?lr = ([0-9.e+-]+)", proc.stderr)}
    assert sorted(logged) == list(range(1, STEPS + 1))
    for step, lr in logged.items():
        assert lr == pytest.approx(_wsd(step - 1), abs=1e-6), step
    assert "masked_lm_loss = " in proc.stderr and "next_sentence_loss" not in proc.stderr
    assert "Records carry document_ids: each token attends within its own document" in \
        proc.stderr


def test_towers_equal_one_device_with_dropout(runs):
    towers, one = runs["towers"], runs["one_device"]
    _check(towers[0])
    _check(one[0])
    _assert_same_weights(final_tensors(one[1]), final_tensors(towers[1]))


def test_gradient_checkpointing_equals_keeping_activations(runs):
    _check(runs["recompute"][0])
    _assert_same_weights(final_tensors(runs["recompute"][1]), final_tensors(runs["towers"][1]))


def test_sigkill_then_rerun_with_accumulation_ends_with_the_same_weights(runs):
    """Killed with 2 towers, rerun on 1 device accumulating 2 micro-batches: the same weights as
    the uninterrupted towers."""
    proc, out, killed_at, not_killed = runs["killed"]
    assert killed_at is not None, "the run ended before it could be killed"
    assert not_killed is None, not_killed
    _check(proc)
    assert "Resumed from" in proc.stderr and "Input position restored" in proc.stderr
    _assert_same_weights(final_tensors(out), final_tensors(runs["towers"][1]))


def test_chunked_global_attention_towers_and_kill_resume_equal_one_device(files, tmp_path):
    """Packed records, attention dropout 0 (hidden dropout 0.1) and --attention_chunk=8, shorter
    than the 32-token rows, so the global layer runs in chunks keeping documents apart: 2
    towers killed (SIGKILL) after checkpoint 6 and rerun as 1 x 4 x 2 micro-batches end with
    the weights of 1 x 8 run through."""
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(json.loads(open(files["config"]).read()),
                                      attention_probs_dropout_prob=0.0)))
    chunked = {**files, "config": str(config)}
    one, killed = str(tmp_path / "one"), str(tmp_path / "killed")
    launched = [Launched(_train_args(chunked, one, *ONE_DEVICE, "--attention_chunk=8")),
                Launched(_train_args(chunked, killed, *TWO_TOWERS, "--attention_chunk=8"))]
    assert signal_at_checkpoint([(launched[1], killed, 6, signal.SIGKILL, 0.05)])[0] is not None
    _, not_killed = finish_killed(launched[1], killed, STEPS)
    assert not_killed is None, not_killed
    rerun = run_all([_train_args(chunked, killed, *ACCUMULATED, "--attention_chunk=8")])[0]
    _check(launched[0].finish())
    _check(rerun)
    assert "Resumed from" in rerun.stderr
    _assert_same_weights(final_tensors(killed), final_tensors(one))


def test_second_phase_at_64_tokens_starts_from_the_first(runs):
    """RoPE has no position table to extend: phase 2 at a longer length loads every variable of
    phase 1 (no position_embeddings anywhere) and trains on."""
    proc, out = runs["phase2"]
    _check(proc)
    assert "*INIT_FROM_CKPT*" in proc.stderr
    phase1, phase2 = final_tensors(runs["towers"][1]), final_tensors(out)
    assert not any("position_embeddings" in n for n in list(phase1) + list(phase2))
    assert int(phase2["global_step"]) == 3
    model = [n for n in phase1 if n.startswith(("bert/", "cls/")) and "/adam_" not in n]
    assert sorted(model) == sorted(n for n in phase2 if n.startswith(("bert/", "cls/"))
                                   and "/adam_" not in n)
    for name in model:
        diff = np.abs(phase2[name] - phase1[name]).max()
        assert diff < 0.05, name  # moved from phase 1's values, not from a fresh init


def _restored_task(config_file, prefix, packed):
    task = BertPretrainer(BertConfig.from_json_file(config_file), next_sentence=False,
                          packed=packed)
    checkpoint.init_from_checkpoint(prefix, task.named_variables(),
                                    required_prefixes=("bert/", "cls/"))
    return task


def test_evaluation_keeps_packed_documents_apart(files, runs):
    """run_pretraining.py --do_eval on packed records: its masked_lm_loss is the task's with
    document_ids (each document alone), not the one attending across documents (the script
    would give that if it dropped the records' document_ids)."""
    proc, weights = runs["eval"]
    _check(proc)
    out = re.search(r"--output_dir=(\S+)", " ".join(proc.args)).group(1)
    result = dict(line.split(" = ") for line in
                  open(os.path.join(out, "eval_results.txt")).read().splitlines())
    masking = input_pipeline.DynamicMasking.from_vocab(
        files["tokenizer"], max_seq_length=32, max_predictions_per_seq=12, masked_lm_prob=0.3,
        seed=11, document_ids=True)
    batches = list(input_pipeline.record_dataset([files["dyn32"]], masking.shapes, 8,
                                                 is_training=False, masking=masking).take(3))
    losses = {}
    for packed in (True, False):
        task = _restored_task(files["config"], weights, packed)
        sums = [task.eval_sums(b) for b in batches]
        losses[packed] = sum(float(x["masked_lm_weighted_loss"]) for x in sums) / \
            sum(float(x["masked_lm_weight"]) for x in sums)
    assert float(result["masked_lm_loss"]) == pytest.approx(losses[True], abs=1e-5)
    # Attending across documents moves the loss 100 times the tolerance above.
    assert abs(losses[False] - losses[True]) > 1e-3


def _our_logits(output_dir, ids, mask):
    config = BertConfig.from_json_file(os.path.join(output_dir, "bert_config.json"))
    model, head = modeling.BertModel(config), heads.MaskedLMHead(config)
    named = modeling.merge_named_variables(model, head)
    checkpoint.init_from_checkpoint(tf.train.latest_checkpoint(output_dir), named,
                                    required_prefixes=("bert/", "cls/"))
    out = model(tf.constant(ids), tf.constant(mask), training=False)
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), [ids.shape[0], 1])
    logits = head(out.sequence_output, out.embedding_table, tf.constant(positions))["logits"]
    return tf.reshape(logits, [ids.shape[0], ids.shape[1], -1]).numpy()


def test_pretrained_checkpoint_converts_to_transformers_with_equal_logits(files, runs,
                                                                          tmp_path):
    """convert_to_hf.py on phase 2's output: transformers' ModernBertForMaskedLM (eager and
    sdpa) loads it (special-token ids from the tokenizer.json) and gives our logits, on 64
    tokens (past the window) with padding, to 1e-4."""
    out = runs["phase2"][1]
    hf = tmp_path / "hf"
    _check(subprocess.run(_python(
        "convert_to_hf.py", f"--bert_config_file={out}/bert_config.json",
        f"--init_checkpoint={out}", f"--vocab_file={files['tokenizer']}",
        "--do_lower_case=false", f"--output_dir={hf}"), capture_output=True, text=True,
        cwd=REPO, timeout=300))
    hf_config = json.loads((hf / "config.json").read_text())
    assert hf_config["pad_token_id"] != hf_config["cls_token_id"]
    assert (hf / "tokenizer.json").exists()
    records = _records(files["dyn64"])[:3]
    ids = np.array([r["input_ids"] for r in records], np.int32)
    mask = np.array([r["input_mask"] for r in records], np.int32)
    mask[1, 40:] = 0  # a padded row
    ids[1, 40:] = hf_config["pad_token_id"]
    run_json_request("hf_modernbert.py", {"save_dir": str(hf), "input_ids": ids.tolist(),
                                          "attention_mask": mask.tolist(),
                                          "out": str(tmp_path / "hf.npz")}, tmp_path)
    reference = np.load(tmp_path / "hf.npz")
    ours = _our_logits(out, ids, mask)
    real = mask.astype(bool)
    for attn in ("eager", "sdpa"):
        np.testing.assert_allclose(ours[real], reference[f"{attn}_logits"][real], atol=1e-4,
                                   rtol=0, err_msg=attn)


@pytest.mark.parametrize("flags, message", [
    ((), "--vocab_file=TOK is a tokenizer.json (ModernBERT's BPE), which pretrains masked-LM "
         "only: add --no_next_sentence or --pack_sequences"),
    (("--no_next_sentence", "--do_whole_word_mask"), "--do_whole_word_mask needs a WordPiece "
                                                     "--vocab_file"),
    (("--no_next_sentence", "--document_ids"), "--document_ids marks the documents of packed "
                                               "instances: it needs --pack_sequences"),
])
def test_create_pretraining_data_bad_combinations_are_one_line(files, tmp_path, flags,
                                                               message):
    out = tmp_path / "x.tfrecord"
    proc = run_all([_python("create_pretraining_data.py", f"--input_file={files['corpus']}",
                            f"--output_file={out}", f"--vocab_file={files['tokenizer']}",
                            *flags)])[0]
    line = error_line(proc, "create_pretraining_data.py")
    assert message.replace("TOK", files["tokenizer"]) in line
    assert not out.exists()


def test_run_pretraining_bad_combinations_are_one_line(files, tmp_path):
    """A ModernBERT config without --no_next_sentence (before TensorFlow loads), and records
    with document_ids for a model with a position table."""
    bert = tmp_path / "bert_config.json"
    bert.write_text(json.dumps({**{k: MB_CONFIG[k] for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")},
        "vocab_size": json.loads(open(files["config"]).read())["vocab_size"],
        "max_position_embeddings": 64, "type_vocab_size": 2}))
    no_nsp = [a for a in _train_args(files, tmp_path / "a") if a != "--no_next_sentence"]
    learned = [a.replace(files["config"], str(bert)) for a in _train_args(files, tmp_path / "b")]
    first, second = run_all([no_nsp, learned])
    assert "no token types (type_vocab_size 0: ModernBERT), so no next-sentence task: " \
           "pretrain it masked-LM only with --no_next_sentence" in \
           error_line(first, "run_pretraining.py")
    assert "records carry document_ids (packed documents), which needs a bert_config with " \
           "position_embedding_type \"rope\"" in error_line(second, "run_pretraining.py")
