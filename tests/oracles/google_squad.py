"""Runs Google's latest run_squad.py data and post-processing functions as a test oracle.

Usage: python google_squad.py REQUEST.json
REQUEST: {"google_dir": folder of run_google_latest.py, "vocab_file": ..., "do_lower_case": true,
          "jobs": [JOB, ...]}, one process for every job (TensorFlow's import is the slow part).
JOB, by "op":
  "features": {"input_file", "is_training", "version_2_with_negative", "max_seq_length",
      "doc_stride", "max_query_length", "shuffle": Google's pre-shuffle of training examples,
      "tf_record": path or null (Google's FeatureWriter output), "output": json path}
      -> {"examples": [...], "features": [...], "warnings": [...]}
  "predictions": {"input_file", "version_2_with_negative", "max_seq_length", "doc_stride",
      "max_query_length", "results_file": json [[unique_id, start_logits, end_logits], ...],
      "n_best_size", "max_answer_length", "null_score_diff_threshold", "output_dir"}
      -> Google's write_predictions files in output_dir
  "final_text": {"cases": [[pred_text, orig_text, do_lower_case], ...], "output": json path}
      -> [get_final_text(...) or "ERROR: <exception>", ...]
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def feature_json(f):
    return {"unique_id": f.unique_id, "example_index": f.example_index,
            "doc_span_index": f.doc_span_index, "tokens": f.tokens,
            "token_to_orig_map": sorted(f.token_to_orig_map.items()),
            "token_is_max_context": sorted(f.token_is_max_context.items()),
            "input_ids": f.input_ids, "input_mask": f.input_mask, "segment_ids": f.segment_ids,
            "start_position": f.start_position, "end_position": f.end_position,
            "is_impossible": bool(f.is_impossible)}


def example_json(e):
    return {"qas_id": e.qas_id, "question_text": e.question_text, "doc_tokens": e.doc_tokens,
            "orig_answer_text": e.orig_answer_text, "start_position": e.start_position,
            "end_position": e.end_position, "is_impossible": bool(e.is_impossible)}


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    sys.path.insert(0, request["google_dir"])
    import run_google_latest  # the TF1 shim over Google's scripts

    rs = run_google_latest.module("run_squad")
    from absl import flags
    flags.FLAGS.mark_as_parsed()
    warnings = []
    original_warning = rs.tf.logging.warning

    def capture_warning(msg, *args, **kwargs):
        warnings.append(msg % args if args else msg)
        original_warning(msg, *args, **kwargs)

    rs.tf.logging.warning = capture_warning
    rs.tf.logging.set_verbosity(rs.tf.logging.ERROR)
    tokenizer = rs.tokenization.FullTokenizer(request["vocab_file"], request["do_lower_case"])

    def read_and_convert(job, is_training, output_fn):
        rs.FLAGS.version_2_with_negative = job["version_2_with_negative"]
        examples = rs.read_squad_examples(job["input_file"], is_training=is_training)
        if job.get("shuffle"):
            import random
            random.Random(12345).shuffle(examples)
        rs.convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=job["max_seq_length"],
            doc_stride=job["doc_stride"], max_query_length=job["max_query_length"],
            is_training=is_training, output_fn=output_fn)
        return examples

    for job in request["jobs"]:
        if job["op"] == "features":
            del warnings[:]
            features = []
            writer = (rs.FeatureWriter(job["tf_record"], job["is_training"])
                      if job.get("tf_record") else None)

            def output_fn(feature, features=features, writer=writer):
                features.append(feature)
                if writer is not None:
                    writer.process_feature(feature)

            examples = read_and_convert(job, job["is_training"], output_fn)
            if writer is not None:
                writer.close()
            with open(job["output"], "w") as f:
                json.dump({"examples": [example_json(e) for e in examples],
                           "features": [feature_json(x) for x in features],
                           "warnings": list(warnings)}, f)
        elif job["op"] == "predictions":
            features = []
            examples = read_and_convert(job, False, features.append)
            with open(job["results_file"]) as f:
                results = [rs.RawResult(unique_id=u, start_logits=s, end_logits=e)
                           for u, s, e in json.load(f)]
            rs.FLAGS.null_score_diff_threshold = job["null_score_diff_threshold"]
            out = job["output_dir"]
            os.makedirs(out, exist_ok=True)
            rs.write_predictions(examples, features, results, job["n_best_size"],
                                 job["max_answer_length"], request["do_lower_case"],
                                 os.path.join(out, "predictions.json"),
                                 os.path.join(out, "nbest_predictions.json"),
                                 os.path.join(out, "null_odds.json"))
        elif job["op"] == "final_text":
            outputs = []
            for pred_text, orig_text, do_lower_case in job["cases"]:
                try:
                    outputs.append(rs.get_final_text(pred_text, orig_text, do_lower_case))
                except Exception as e:  # pylint: disable=broad-except
                    outputs.append(f"ERROR: {type(e).__name__}")
            with open(job["output"], "w") as f:
                json.dump(outputs, f)
        else:
            raise ValueError(f"unknown op {job['op']!r}")


if __name__ == "__main__":
    main(sys.argv[1])
