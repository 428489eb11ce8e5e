"""Runs a users' processors file under Google's own run_classifier.py (eedf571) as a test oracle.

The file's code is run as it ran pasted into Google's script: `import tokenization`,
`import modeling`, `from run_classifier import DataProcessor, InputExample` are Google's modules
(google-research/bert at eedf571, /work/shared/material/oracles), `from bert import ...` the
bert-tensorflow package, `tf` is tensorflow.compat.v1 (`tf.flags` is absl's: the file's own
flags are defined and parsed from REQUEST["argv"], as Google's script parses them).

Usage: python google_user_processors.py REQUEST.json
REQUEST: {"processors_file": ..., "class": "iFLYTEKDataProcessor", "data_dir": ...,
"vocab_file": ..., "do_lower_case": true, "max_seq_length": 32, "splits": ["train", "dev"],
"argv": ["--num_aspects=10"], "multilabel": false}
Prints JSON as its last line (what the file prints comes above): {"labels": get_labels(),
"<split>": [[guid, text_a, text_b, label, input_ids, input_mask, segment_ids, label_id], ...]}:
Google's convert_single_example's features; with "multilabel", label_id is the multi-hot list
the multi-label forks (BlueBERT) build from the comma-joined labels (Google's own
convert_single_example takes one label).

Several files in one run: REQUEST {"cases": {KEY: REQUEST, ...}} prints {KEY: that output, ...}
as its last line. TensorFlow and Google's modules are imported once; each case then runs in a
child forked from that process, so a file's flags, its module state and what it changes in
Google's modules stay its own, as they would in a run of its own.
"""

import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _material_oracles():
    for path in (os.environ.get("BERT_MGPU_MATERIAL"),
                 os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                              "shared", "material"),
                 "/work/shared/material"):
        if path and os.path.isdir(os.path.join(path, "oracles")):
            return os.path.join(os.path.abspath(path), "oracles")
    raise SystemExit("the oracles of /work/shared/material are not available")


def google_modules():
    """Google's eedf571 run_classifier and tokenization under TF 2.x (bert-tensorflow's modeling
    imports contrib, hence the shim)."""
    sys.path.insert(0, _material_oracles())
    import run_google_latest
    from _google_compat import install_contrib_shim

    install_contrib_shim()
    return run_google_latest.module("run_classifier"), run_google_latest.module("tokenization")


def run_case(request, run_classifier, tokenization):
    """One processors file's labels and examples as Google's script sees them (the module
    docstring's output)."""
    from absl import flags

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


def run_forked(request, modules):
    """`run_case` in a forked child; its output comes back through a pipe (what the file prints
    goes to this process's stdout and stderr). Raises SystemExit when the child fails."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 1
        try:
            with os.fdopen(write_fd, "w") as pipe:
                pipe.write(json.dumps(run_case(request, *modules)))
            code = 0
        except BaseException:  # the traceback is the report; the child exits either way
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{request['processors_file']} ({request['class']}) failed under "
                         f"Google's run_classifier.py (its traceback above)")
    return json.loads(text)


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    modules = google_modules()
    if "cases" in request:
        print(json.dumps({key: run_forked(case, modules)
                          for key, case in request["cases"].items()}))
    else:
        print(json.dumps(run_case(request, *modules)))


if __name__ == "__main__":
    main(sys.argv[1])
