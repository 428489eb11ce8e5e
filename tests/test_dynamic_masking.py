"""Dynamic masking: create_pretraining_data.py --dynamic_masking's unmasked records and
run_pretraining.py --dynamic_masking's masks (input_pipeline.mask_example).

The masks are checked against the rule as stated by Google's create_pretraining_data.py (the
number of predictions, 80/10/10, no [CLS]/[SEP]/padding, whole words, spans), over many draws;
their keying by (seed, example index) by splitting, sharding and checkpointing the input; and
the whole script by a SIGKILL + rerun on another tower split ending with the uninterrupted run's
weights.
"""

import os
import signal
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
from _oracle import DATA, REPO
from _pretraining_data import DROPOUT, write_config, write_records

from bert_mgpu import tokenization
from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig, PretrainingConfig
from bert_mgpu.data import features, input_pipeline, pretraining_data, tfrecord

EN_VOCAB = os.path.join(DATA, "vocab", "bert_uncased_vocab.txt")
ZH_VOCAB = os.path.join(DATA, "vocab", "bert_chinese_vocab.txt")
KJV = os.path.join(DATA, "pretraining", "kjv_bible_one_verse_per_line.txt.gz")
SCRIPT = os.path.join(REPO, "run_pretraining.py")

# A tiny vocabulary: specials, 60 words, 35 continuation pieces (100 tokens).
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(60)]
         + [f"##p{i}" for i in range(35)])
CLS, SEP, MASK = 2, 3, 4
SEQ = 32


def unmasked_records(n, seed=0, seq=SEQ, single_segment_every=4):
    """n random unmasked instances `[CLS] A [SEP] B [SEP]` (every 4th one segment), words of 1-3
    pieces, with word_starts by Google's rule written out here: a `##` piece continues the word
    before it, the first maskable token always starts one."""
    rng = np.random.RandomState(seed)
    out = []
    for r in range(n):
        length = rng.randint(6, seq + 1)
        segments = 1 if r % single_segment_every == 0 else 2
        text = length - 1 - segments
        ids = [CLS]
        cut = rng.randint(1, text) if segments == 2 else text
        for s, size in enumerate([cut, text - cut][:segments]):
            for j in range(size):
                # A piece may open segment B: Google's groups continue across [SEP].
                piece = rng.rand() < 0.35 and (j > 0 or s == 1)
                ids.append(rng.randint(65, 100) if piece else rng.randint(5, 65))
            ids.append(SEP)
        tokens = [VOCAB[i] for i in ids]
        maskable = [t not in ("[CLS]", "[SEP]") for t in tokens]
        first = maskable.index(True)
        starts = [int(m and (i == first or not t.startswith("##")))
                  for i, (t, m) in enumerate(zip(tokens, maskable))]
        segment_ids = [0] * (cut + 2) + [1] * (length - cut - 2)
        pad = [0] * (seq - length)
        out.append({"input_ids": ids + pad, "input_mask": [1] * length + pad,
                    "segment_ids": segment_ids + pad, "word_starts": starts + pad,
                    "next_sentence_labels": [int(rng.randint(2))]})
    return out


def write_unmasked(path, records):
    with tfrecord.RecordFileWriter(str(path)) as writer:
        for r in records:
            writer.write(tfrecord.encode_example(r))
    return str(path)


def masking(**changes):
    values = dict(max_seq_length=SEQ, max_predictions_per_seq=6, masked_lm_prob=0.15,
                  vocab_size=len(VOCAB), mask_id=MASK, cls_id=CLS, sep_id=SEP, seed=7)
    values.update(changes)
    return input_pipeline.DynamicMasking(**values)


def batches(path, m, batch_size, count, **kwargs):
    kwargs.setdefault("shuffle_buffer", 1)
    d = input_pipeline.record_dataset([path], m.shapes, batch_size, is_training=True, masking=m,
                                      **kwargs)
    return [{k: v.numpy() for k, v in b.items()} for b in d.take(count)]


def stacked(batch_list):
    return {k: np.concatenate([b[k] for b in batch_list]) for k in batch_list[0]}


@pytest.fixture(scope="module")
def records():
    return unmasked_records(64)


@pytest.fixture(scope="module")
def data(tmp_path_factory, records):
    return write_unmasked(tmp_path_factory.mktemp("dm") / "unmasked.tfrecord", records)


def draws(data, records, m, epochs):
    """(original record, masked example) for every example of `epochs` passes in file order."""
    n = len(records)
    out = stacked(batches(data, m, n, epochs))
    return [(records[i % n], {k: v[i] for k, v in out.items()}) for i in range(n * epochs)]


def predictions(example):
    k = int(example["masked_lm_weights"].sum())
    return example["masked_lm_positions"][:k], example["masked_lm_ids"][:k]


def check_well_formed(original, example, m):
    """What every masked example satisfies, whatever the mode."""
    ids = np.array(original["input_ids"])
    k = int(example["masked_lm_weights"].sum())
    positions, labels = predictions(example)
    assert list(example["masked_lm_weights"]) == [1.0] * k + [0.0] * (m.max_predictions_per_seq
                                                                        - k)
    assert not example["masked_lm_positions"][k:].any() and not example["masked_lm_ids"][k:].any()
    assert list(positions) == sorted(set(positions))
    assert (np.array(original["input_mask"])[positions] == 1).all()   # never padding
    assert not np.isin(ids[positions], [CLS, SEP]).any()               # never [CLS]/[SEP]
    np.testing.assert_array_equal(labels, ids[positions])
    unchanged = np.ones(SEQ, bool)
    unchanged[positions] = False
    np.testing.assert_array_equal(example["input_ids"][unchanged], ids[unchanged])
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):
        np.testing.assert_array_equal(example[name], original[name])
    return k


def groups_of(original):
    """Whole-word groups (lists of positions): a start and the continuation pieces after it."""
    groups = []
    for i, (t, s) in enumerate(zip(original["input_ids"], original["word_starts"])):
        if original["input_mask"][i] and t not in (CLS, SEP):
            if s:
                groups.append([i])
            else:
                groups[-1].append(i)
    return groups


def budget(original, m):
    n = sum(original["input_mask"])
    return min(m.max_predictions_per_seq, max(1, int(round(n * m.masked_lm_prob))))


# ---------------------------------------------------------------------------------------------
# The masks

@pytest.mark.parametrize("prob,preds", [(0.15, 6), (0.4, 14)])
def test_token_masking_statistics(data, records, prob, preds):
    """Google's rule over 64 x 40 draws: exactly min(max_predictions, max(1, round(n * p)))
    predictions among the maskable tokens, each position equally likely, 80% [MASK], 10% kept,
    10% a random word of the vocabulary."""
    m = masking(masked_lm_prob=prob, max_predictions_per_seq=preds)
    replaced = {"mask": 0, "kept": 0, "other": 0}
    hits = np.zeros(SEQ)
    chances = np.zeros(SEQ)
    random_words = []
    for original, example in draws(data, records, m, 40):
        k = check_well_formed(original, example, m)
        maskable = [i for i, t in enumerate(original["input_ids"])
                    if original["input_mask"][i] and t not in (CLS, SEP)]
        assert k == min(budget(original, m), len(maskable))
        positions, labels = predictions(example)
        now = example["input_ids"][positions]
        replaced["mask"] += int((now == MASK).sum())
        replaced["kept"] += int((now == labels).sum())
        other = (now != MASK) & (now != labels)
        replaced["other"] += int(other.sum())
        random_words.extend(now[other])
        hits[positions] += 1
        chances[maskable] += k / len(maskable)
    total = sum(replaced.values())
    # A random word equal to the original (1 in 100) counts as kept.
    assert abs(replaced["mask"] / total - 0.8) < 0.02, replaced
    assert abs(replaced["kept"] / total - 0.1 - 0.001) < 0.015, replaced
    assert abs(replaced["other"] / total - 0.1 + 0.001) < 0.015, replaced
    assert min(random_words) >= 0 and max(random_words) < len(VOCAB)
    assert len(set(random_words)) > 60  # drawn over the whole vocabulary
    # Uniform over positions: hits per position within 5 sigma of the expected count.
    seen = chances > 20
    assert (np.abs(hits[seen] - chances[seen]) < 5 * np.sqrt(chances[seen]) + 3).all()


def test_whole_word_masking(data, records):
    """Whole groups only; Google's greedy fill: the budget is met, or every group left out was
    too large for what remained; every group can be picked, long ones too."""
    m = masking(whole_word=True)
    picked_sizes = set()
    n_mask = n_total = 0
    for original, example in draws(data, records, m, 30):
        k = check_well_formed(original, example, m)
        chosen = set(predictions(example)[0].tolist())
        left_out = []
        for group in groups_of(original):
            inside = [p in chosen for p in group]
            assert all(inside) or not any(inside), (group, chosen)
            if all(inside):
                picked_sizes.add(len(group))
            else:
                left_out.append(len(group))
        b = budget(original, m)
        assert k <= b
        assert k == b or all(size > b - k for size in left_out), (k, b, left_out)
        now = example["input_ids"][sorted(chosen)]
        n_mask += int((now == MASK).sum())
        n_total += len(chosen)
    assert {1, 2, 3} <= picked_sizes
    assert abs(n_mask / n_total - 0.8) < 0.03


def span_words(original):
    """Span masking's words: the whole-word groups, cut where a segment starts."""
    words = []
    segment = 0
    for group in groups_of(original):
        for p in group:
            seg = int(np.sum(np.array(original["input_ids"][:p]) == SEP))
            if not words or seg != segment or p == group[0]:
                words.append((seg, [p]))
            else:
                words[-1][1].append(p)
            segment = seg
    return words


def test_span_masking(data, records):
    """One run of whole words inside one segment, at most the budget, and no neighbouring word
    of that segment would still fit (grown right, then left, as far as the budget allows); a
    first word longer than the budget is cut to it. Replaced as a whole: all [MASK], all kept,
    or all random words."""
    m = masking(span=True)
    kinds = {"mask": 0, "kept": 0, "random": 0}
    cut = 0
    for original, example in draws(data, records, m, 30):
        k = check_well_formed(original, example, m)
        positions, labels = predictions(example)
        b = budget(original, m)
        words = span_words(original)
        inside = [i for i, (_, w) in enumerate(words) if set(w) & set(positions.tolist())]
        assert k >= 1 and inside == list(range(inside[0], inside[-1] + 1))
        assert len({words[i][0] for i in inside}) == 1  # one segment
        if len(inside) == 1 and len(words[inside[0]][1]) > b:
            assert list(positions) == words[inside[0]][1][:b]
            cut += 1
        else:
            assert sorted(p for i in inside for p in words[i][1]) == list(positions)
            for neighbour in (inside[0] - 1, inside[-1] + 1):
                if 0 <= neighbour < len(words) and words[neighbour][0] == words[inside[0]][0]:
                    assert k + len(words[neighbour][1]) > b, (positions, words, b)
        now = example["input_ids"][positions]
        if (now == MASK).all():
            kinds["mask"] += 1
        elif (now == labels).all():
            kinds["kept"] += 1
        else:  # random words (which may be [MASK] or the original now and then)
            kinds["random"] += 1
    total = sum(kinds.values())
    assert abs(kinds["mask"] / total - 0.8) < 0.06, kinds
    assert kinds["kept"] > 0.04 * total and kinds["random"] > 0.04 * total, kinds


def test_span_length_limits_the_words(data, records):
    m = masking(span=True, span_length=2, max_predictions_per_seq=10)
    for original, example in draws(data, records, m, 5):
        check_well_formed(original, example, m)
        positions = set(predictions(example)[0].tolist())
        assert 1 <= sum(bool(set(w) & positions) for _, w in span_words(original)) <= 2


def test_masks_change_every_epoch_and_follow_the_seed(data, records):
    n = len(records)
    out = stacked(batches(data, masking(), n, 3))
    again = stacked(batches(data, masking(), n, 3))
    other_seed = stacked(batches(data, masking(seed=8), n, 3))
    for name in out:
        np.testing.assert_array_equal(out[name], again[name])
    positions = out["masked_lm_positions"]
    for a, b in ((0, 1), (1, 2), (0, 2)):
        same = (positions[a * n:(a + 1) * n] == positions[b * n:(b + 1) * n]).all(axis=1)
        assert same.mean() < 0.2, (a, b, same.mean())
        np.testing.assert_array_equal(out["input_mask"][a * n:(a + 1) * n],
                                      out["input_mask"][b * n:(b + 1) * n])
    assert (other_seed["masked_lm_positions"] != positions).any(axis=1).mean() > 0.8


def test_masks_do_not_depend_on_the_split(data, records):
    """Global batches of 8 = 2 towers x 4 = 2 workers taking alternate batches (record
    sharding): the same example index gives the same mask, with a shuffled input too."""
    m = masking(whole_word=True)
    for shuffle in (1, 100):
        whole = stacked(batches(data, m, 8, 20, shuffle_buffer=shuffle))
        halves = stacked(batches(data, m, 4, 40, shuffle_buffer=shuffle))
        workers = [batches(data, m, 8, 10, shuffle_buffer=shuffle, num_shards=2,
                           shard_index=w) for w in (0, 1)]
        interleaved = stacked([b for pair in zip(*workers) for b in pair])
        for name in whole:
            np.testing.assert_array_equal(halves[name], whole[name], err_msg=name)
            np.testing.assert_array_equal(interleaved[name], whole[name], err_msg=name)


def test_files_split_over_workers_key_example_i_of_worker_w_as_i_times_w_plus_w(records,
                                                                                 tmp_path):
    """README: with files split over workers, worker w of W keys its i-th example i x W + w.
    The records alternate over two files (even ones in A, odd ones in B), so worker w's i-th
    example is record 2i + w: its masks are those one process draws for record 2i + w of the
    file holding them all in order."""
    m = masking(whole_word=True)
    whole = write_unmasked(tmp_path / "all.tfrecord", records)
    parts = [write_unmasked(tmp_path / f"{name}.tfrecord", records[w::2])
             for w, name in enumerate("ab")]
    n = len(records)
    reference = stacked(batches(whole, m, n, 1))
    for w in (0, 1):
        d = input_pipeline.record_dataset(parts, m.shapes, 4, is_training=True, masking=m,
                                          shuffle_buffer=1, num_shards=2, shard_index=w)
        mine = stacked([{k: v.numpy() for k, v in b.items()} for b in d.take(n // 2 // 4)])
        for name in reference:
            np.testing.assert_array_equal(mine[name], reference[name][w::2], err_msg=name)


def test_masks_after_an_iterator_checkpoint_round_trip(data, tmp_path):
    """Resume: the iterator restored from a checkpoint continues with the same masks (the
    saved state includes the example counter) as the iterator that was not interrupted."""
    m = masking()
    make = lambda: input_pipeline.record_dataset(  # noqa: E731
        [data], m.shapes, 8, is_training=True, masking=m, shuffle_buffer=100)
    iterator = iter(make())
    for _ in range(11):  # past the first epoch (64 records)
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "it"))
    expected = [next(iterator) for _ in range(5)]
    restored = iter(make())
    tf.train.Checkpoint(iterator=restored).read(path).assert_consumed()
    for a, b in zip(expected, [next(restored) for _ in range(5)]):
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy(), err_msg=name)


def test_evaluation_sees_the_same_masks_every_time(data):
    m = masking()
    runs = [[{k: v.numpy() for k, v in b.items()} for b in input_pipeline.record_dataset(
        [data], m.shapes, 24, is_training=False, masking=m)] for _ in range(2)]
    assert [len(b["input_ids"]) for b in runs[0]] == [24, 24, 16]  # every example, no drop
    for a, b in zip(*runs):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


# ---------------------------------------------------------------------------------------------
# create_pretraining_data.py --dynamic_masking

def _create(tmp_path, lines, vocab, **flags):
    text = tmp_path / "input.txt"
    text.write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "unmasked.tfrecord"
    cfg = CreatePretrainingDataConfig(input_file=str(text), output_file=str(out),
                                      vocab_file=vocab, dynamic_masking=True, **flags)
    pretraining_data.create_pretraining_data(cfg)
    return [tfrecord.decode_example(r) for r in tfrecord.read_records(str(out))]


def test_unmasked_records_of_the_script(tmp_path):
    """Each instance once per dupe_factor copy, unmasked: exactly the dynamic features, every
    token of the text (no [MASK]), word_starts by Google's `##` rule."""
    import gzip
    with gzip.open(KJV, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(150)]
    out = _create(tmp_path, lines, EN_VOCAB, max_seq_length=48, dupe_factor=2)
    tokenizer = tokenization.FullTokenizer(EN_VOCAB)
    inv = tokenizer.inv_vocab
    assert len(out) > 100
    text_tokens = set(tokenizer.tokenize(" ".join(lines)))
    for r in out:
        assert sorted(r) == sorted(features.DYNAMIC_PRETRAINING_FEATURES)
        assert all(len(r[name]) == 48 for name in ("input_ids", "input_mask", "segment_ids",
                                                   "word_starts"))
        n = sum(r["input_mask"])
        tokens = [inv[t] for t in r["input_ids"][:n]]
        assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and tokens.count("[SEP]") == 2
        assert set(tokens) - {"[CLS]", "[SEP]"} <= text_tokens  # unmasked
        first = True
        for t, s in zip(tokens, r["word_starts"][:n]):
            special = t in ("[CLS]", "[SEP]")
            assert s == int(not special and (first or not t.startswith("##"))), tokens
            first = first and special
        assert not any(r["word_starts"][n:])


def test_word_segmented_units_are_the_words(tmp_path):
    """--word_segmented_input: a word starts at the first character of each whitespace unit
    (every CJK character is a token of its own), and after [CLS]/[SEP] (a unit cut by the
    truncation starts a word there, as in the static path)."""
    lines = ["我们 喜欢 北京\n", "今天 很 好\n", "\n", "他 说 中文\n", "你 知道 吗\n"]
    starts = {unit[0] for line in lines for unit in line.split()}  # every character is unique
    out = _create(tmp_path, lines, ZH_VOCAB, max_seq_length=12, dupe_factor=5,
                  word_segmented_input=True)
    inv = tokenization.FullTokenizer(ZH_VOCAB).inv_vocab
    continuations = 0
    for r in out:
        n = sum(r["input_mask"])
        tokens = [inv[t] for t in r["input_ids"][:n]]
        expected = [int(t not in ("[CLS]", "[SEP]") and (
            t in starts or tokens[i - 1] in ("[CLS]", "[SEP]"))) for i, t in enumerate(tokens)]
        assert list(r["word_starts"][:n]) == expected, tokens
        continuations += expected.count(0) - 1 - tokens.count("[SEP]")
    assert len(out) > 5 and continuations > 5


def test_create_flags_that_belong_to_run_pretraining():
    with pytest.raises(ValueError, match="pass --do_whole_word_mask / --span_masking to "
                                         "run_pretraining.py --dynamic_masking"):
        CreatePretrainingDataConfig(input_file="x", output_file="y", vocab_file="v",
                                    dynamic_masking=True, do_whole_word_mask=True).validate()


# ---------------------------------------------------------------------------------------------
# run_pretraining.py --dynamic_masking

@pytest.fixture(scope="module")
def script_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rp_dm")
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return {"config": write_config(d / "bert_config.json", **DROPOUT),
            "vocab": str(d / "vocab.txt"),
            "data": write_unmasked(d / "unmasked.tfrecord", unmasked_records(120, seed=3)),
            "static": os.path.join(d, "static.tfrecord")}


def script_args(files, output_dir, extra=()):
    return [sys.executable, SCRIPT, f"--bert_config_file={files['config']}",
            f"--input_file={files['data']}", f"--output_dir={output_dir}",
            f"--vocab_file={files['vocab']}", "--dynamic_masking=true", "--do_whole_word_mask",
            "--masked_lm_prob=0.2", f"--max_seq_length={SEQ}", "--max_predictions_per_seq=6",
            "--do_train=true", "--train_batch_size=4", "--n_gpus=2", "--num_train_steps=24",
            "--num_warmup_steps=3", "--learning_rate=1e-3", "--save_checkpoints_steps=4",
            "--log_every_n_steps=10", "--random_seed=11", *extra]


def test_sigkill_then_rerun_on_another_split_ends_with_the_same_weights(script_files,
                                                                         tmp_path):
    """2 towers x 4 uninterrupted (24 steps of 8 over 120 examples: into the second epoch, with
    fresh masks) vs 1 tower x 8 killed after step 12 and rerun as 1 tower x 4 x 2 accumulated
    micro-batches: the same weights, dropout 0.1. The uninterrupted and the killed run run side
    by side."""
    reference = str(tmp_path / "uninterrupted")
    uninterrupted = Launched(script_args(script_files, reference,
                                         ("--do_eval=true", "--max_eval_steps=3")))
    out = str(tmp_path / "killed")
    cmd = script_args(script_files, out, ("--n_gpus=1", "--train_batch_size=8"))
    killed = Launched(cmd)
    killed_at = signal_at_checkpoint([(killed, out, 12, signal.SIGKILL, 0.05)])[0]
    assert killed_at is not None, "the run ended before it could be killed"
    _, not_killed = finish_killed(killed, out, 24)
    assert not_killed is None, not_killed
    # Rerun with accumulation: 1 tower x 4 x 2 micro-batches, the same global batch of 8.
    resumed = run_all([[a for a in cmd if not a.startswith("--train_batch_size")]
                       + ["--train_batch_size=4", "--num_accumulation_steps=2"]])[0]
    proc = uninterrupted.finish()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Dynamic masking: whole-word, masked_lm_prob 0.2" in proc.stderr
    results = open(os.path.join(reference, "eval_results.txt")).read()
    assert "masked_lm_accuracy = " in results and "global_step = 24" in results
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Input position restored" in resumed.stderr
    ours, expected = final_tensors(out), final_tensors(reference)
    assert int(ours["global_step"]) == 24 and sorted(ours) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(ours[name], expected[name], atol=1e-5, rtol=0, err_msg=name)


REFUSED = [
    ("static_records", "records are masked already (made without create_pretraining_data.py "
                       "--dynamic_masking); run without --dynamic_masking"),
    ("no_flag", "records are unmasked (create_pretraining_data.py --dynamic_masking); pass "
                "--dynamic_masking=true"),
    ("no_vocab", "--dynamic_masking needs --vocab_file"),
]
CASED = "/x/cased_L-12_H-768_A-12/bert_model.ckpt"


def refused_args(files, tmp_path, case):
    """A run that must stop with a one-line error: a REFUSED case, or "cased" (an
    --init_checkpoint of a cased model that does not exist)."""
    cmd = script_args(files, str(tmp_path / "bad"))
    if case == "static_records":
        static = write_records(tmp_path / "static.tfrecord", 8, seq=SEQ, preds=6)
        return [f"--input_file={static}" if a.startswith("--input_file=") else a for a in cmd]
    if case == "no_flag":
        return [a for a in cmd if a not in ("--dynamic_masking=true", "--do_whole_word_mask")]
    if case == "no_vocab":
        return [a for a in cmd if not a.startswith("--vocab_file")]
    return cmd + [f"--init_checkpoint={CASED}"]


@pytest.fixture(scope="module")
def refused(script_files, tmp_path_factory):
    """The runs of refused_args by case, run side by side."""
    cases = [case for case, _ in REFUSED] + ["cased"]
    return dict(zip(cases, run_all([refused_args(script_files, tmp_path_factory.mktemp(c), c)
                                    for c in cases])))


@pytest.mark.parametrize("case,message", REFUSED)
def test_flag_and_records_disagree_is_one_line(refused, case, message):
    last = error_line(refused[case], "run_pretraining.py")
    assert message in last, last


def test_cased_checkpoint_is_not_refused_for_its_casing(refused):
    """run_pretraining.py has no --do_lower_case (it reads ids): Google's casing check, whose
    error asks for that flag, must not stop continued pretraining of a cased model with
    --dynamic_masking's --vocab_file. The next check (the checkpoint exists) is what fails."""
    proc = refused["cased"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "seems to be a cased model" not in last and CASED in last, last


def test_masking_flags_without_dynamic_masking_are_refused():
    from bert_mgpu.configs.base import ModelFiles, TrainOptions
    cfg = PretrainingConfig(model=ModelFiles(), train=TrainOptions(), output_dir="o",
                            input_file="i", do_train=True, span_masking=True)
    with pytest.raises(ValueError, match="--span_masking needs --dynamic_masking"):
        cfg.validate()


def test_the_jobs_masking_rule_is_its_flags():
    """run_pretraining.py's config reaches the pipeline's rule (`tasks.pretraining
    .dynamic_masking`, what the job passes to its training input): the seed is --random_seed
    (another seed, other masks: test_masks_change_every_epoch_and_follow_the_seed), and the
    probability, the predictions per sequence and whole-word masking are the flags'; none
    without --dynamic_masking."""
    from bert_mgpu.configs.base import ModelFiles, TrainOptions
    from bert_mgpu.tasks import pretraining

    def rule(**flags):
        return pretraining.dynamic_masking(PretrainingConfig(
            model=ModelFiles(bert_config_file="unused", vocab_file=EN_VOCAB, max_seq_length=48),
            train=TrainOptions(random_seed=flags.pop("seed", 12345)), output_dir="unused",
            input_file="unused", do_train=True, **flags))

    assert rule() is None
    masking = rule(dynamic_masking=True, seed=8, masked_lm_prob=0.25,
                   max_predictions_per_seq=7, do_whole_word_mask=True)
    assert (masking.seed, masking.masked_lm_prob, masking.max_predictions_per_seq,
            masking.whole_word, masking.max_seq_length) == (8, 0.25, 7, True, 48)
    assert rule(dynamic_masking=True, seed=9).seed == 9
