"""Runs Google's run_classifier.py processors and feature conversion as a test oracle.

Usage: python google_classifier.py REQUEST.json
REQUEST: {"task": "mrpc", "data_dir": ..., "vocab_file": ..., "do_lower_case": true,
"max_seq_length": 32, "splits": ["train", "dev", "test"], "output_dir": ...}
Writes, per split, OUTPUT_DIR/<split>.examples.json ([guid, text_a, text_b, label] rows) and
OUTPUT_DIR/<split>.tf_record written by Google's file_based_convert_examples_to_features.
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
    from bert import run_classifier, tokenization  # Google's code

    flags.FLAGS.mark_as_parsed()
    processor = {"cola": run_classifier.ColaProcessor, "mnli": run_classifier.MnliProcessor,
                 "mrpc": run_classifier.MrpcProcessor,
                 "xnli": run_classifier.XnliProcessor}[request["task"]]()
    tokenizer = tokenization.FullTokenizer(request["vocab_file"], request["do_lower_case"])
    labels = processor.get_labels()
    for split in request["splits"]:
        examples = getattr(processor, f"get_{split}_examples")(request["data_dir"])
        out = os.path.join(request["output_dir"], split)
        with open(out + ".examples.json", "w") as f:
            json.dump([[e.guid, e.text_a, e.text_b, e.label] for e in examples], f)
        run_classifier.file_based_convert_examples_to_features(
            examples, labels, request["max_seq_length"], tokenizer, out + ".tf_record")


if __name__ == "__main__":
    main(sys.argv[1])
