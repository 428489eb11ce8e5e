"""Runs a users' processors file under Google's own run_classifier.py (eedf571) as a test oracle.

The file's code is run as it ran pasted into Google's script: `import tokenization`,
`import modeling`, `from run_classifier import DataProcessor, InputExample` are Google's modules
(google-research/bert at eedf571, /work/shared/material/oracles), `from bert import ...` the
bert-tensorflow package, `tf` is tensorflow.compat.v1 (`tf.flags` is absl's: the file's own
flags are defined and parsed from REQUEST["argv"], as Google's script parses them).

Usage: python google_user_processors.py REQUEST.json
REQUEST: a list of cases, each {"processors_file": ..., "class": "iFLYTEKDataProcessor",
"data_dir": ..., "vocab_file": ..., "do_lower_case": true, "max_seq_length": 32, "splits":
["train", "dev"], "argv": ["--num_aspects=10"], "multilabel": false}. The cases run one after
the other in this one process (Google's modules load once); each file is executed afresh in a
namespace of its own and the flags it defined are deleted after its case, so a file can come
back in a later case (its `flags.DEFINE_*` lines run again) and no case sees another's flags.
Prints JSON as its last line (what the files print comes above): a list, one result per case,
{"labels": get_labels(), "<split>": [[guid, text_a, text_b, label, input_ids, input_mask,
segment_ids, label_id], ...]}: Google's convert_single_example's features; with "multilabel",
label_id is the multi-hot list the multi-label forks (BlueBERT) build from the comma-joined
labels (Google's own convert_single_example takes one label).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _material_oracles():
    for path in (os.environ.get("BERT_MGPU_MATERIAL"),
                 os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                              "shared", "material"),
                 "/work/shared/material"):
        if path and os.path.isdir(os.path.join(path, "oracles")):
            return os.path.join(os.path.abspath(path), "oracles")
    raise SystemExit("the oracles of /work/shared/material are not available")


def main(request_path):
    with open(request_path) as f:
        cases = json.load(f)
    sys.path.insert(0, _material_oracles())
    # Google's eedf571 modules under TF 2.x; bert-tensorflow's modeling imports contrib.
    import run_google_latest
    from _google_compat import install_contrib_shim

    install_contrib_shim()
    run_classifier = run_google_latest.module("run_classifier")
    tokenization = run_google_latest.module("tokenization")
    from absl import flags

    results = []
    for request in cases:
        before = set(flags.FLAGS)
        try:
            results.append(_case(request, run_classifier, tokenization, flags))
        finally:
            for name in set(flags.FLAGS) - before:  # the file's own flags
                delattr(flags.FLAGS, name)
    print(json.dumps(results))


def _case(request, run_classifier, tokenization, flags):
    """One case of the request: the file run as pasted into Google's script."""
    path = request["processors_file"]
    namespace = {"__name__": "user_processors", "__file__": path}
    with open(path, "rb") as f:
        exec(compile(f.read(), path, "exec"), namespace)  # noqa: S102 - the oracle's input
    flags.FLAGS([path] + request.get("argv", []))
    processor = namespace[request["class"]]()
    labels = processor.get_labels()
    tokenizer = tokenization.FullTokenizer(request["vocab_file"], request["do_lower_case"])
    out = {"labels": [str(label) for label in labels]}
    for split in request["splits"]:
        rows = []
        examples = getattr(processor, f"get_{split}_examples")(request["data_dir"])
        for i, e in enumerate(examples):
            label = e.label
            if request.get("multilabel"):
                e.label = labels[0]  # the token features; the label vector below
            feature = run_classifier.convert_single_example(
                i, e, labels, request["max_seq_length"], tokenizer)
            label_id = feature.label_id
            if request.get("multilabel"):
                e.label = label
                label_id = [0] * len(labels)
                for name in label.split(","):
                    label_id[labels.index(name)] = 1
            rows.append([e.guid, e.text_a, e.text_b, e.label, feature.input_ids,
                         feature.input_mask, feature.segment_ids, label_id])
        out[split] = rows
    return out


if __name__ == "__main__":
    main(sys.argv[1])
