"""Google's run_squad.py document spans and max-context choice, as a test oracle.

Usage: python google_squad_spans.py REQUEST.json
REQUEST: {"vocab_file": ..., "cases": [{"num_tokens": 40, "max_seq_length": 11,
"doc_stride": 3}, ...]}
For each case a SQuAD example with an empty question and `num_tokens` one-piece document words
goes through Google's `convert_examples_to_features` (prediction mode). An empty question leaves
`max_seq_length - 3` document pieces per span. Prints JSON: per case, per feature, the sorted
document-word indices for which that feature is the max-context span.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from _google_compat import install_contrib_shim  # noqa: E402


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    tf.compat.v1.disable_v2_behavior()
    install_contrib_shim()
    from absl import flags
    from bert import run_squad, tokenization  # Google's code

    flags.FLAGS.mark_as_parsed()
    tokenizer = tokenization.FullTokenizer(request["vocab_file"], do_lower_case=True)
    out = []
    for case in request["cases"]:
        words = [f"w{i}" for i in range(case["num_tokens"])]
        example = run_squad.SquadExample(qas_id="q", question_text="", doc_tokens=words)
        features = []
        run_squad.convert_examples_to_features(
            [example], tokenizer, case["max_seq_length"], case["doc_stride"],
            max_query_length=8, is_training=False, output_fn=features.append)
        out.append([sorted(f.token_to_orig_map[p] for p, is_max in
                           f.token_is_max_context.items() if is_max) for f in features])
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
