"""Runs Google's create_pretraining_data.py (PyPI bert-tensorflow==1.0.4) as a test oracle.

Runs in the oracle virtualenv (.venv-oracle), never in the project's. Google's module runs under
TF 2.21 unchanged (it imports `tensorflow.compat.v1`). Usage:

    python google_create_pretraining_data.py REQUEST.json

REQUEST.json is a list of jobs; each is a dict of Google's flags (`input_file`, `output_file`,
`vocab_file`, `do_lower_case`, `max_seq_length`, `max_predictions_per_seq`, `random_seed`,
`dupe_factor`, `masked_lm_prob`, `short_seq_prob`, and `do_whole_word_mask`). All jobs run in one
process (TensorFlow is imported once); each calls Google's `main` with its flags set.

`do_whole_word_mask`: the 1.0.4 release predates Google's whole-word masking (added to the
repository's master in May 2019, after the release). For it, `create_masked_lm_predictions` is
replaced by the master version's algorithm, written out here from its description and code:
candidates are lists of positions; a token starting with "##" joins the list before it (whatever
lies between them, [SEP] included); the lists are shuffled; a list that would take the
predictions past `num_to_predict` is skipped; a list with a covered position is skipped; then
per position the same 80% / 10% / 10% draws as per-token masking. With the flag off the function
gives exactly 1.0.4's draws (every list has one position), and 1.0.4's own function is used.
"""

import collections
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from absl import flags  # noqa: E402
from bert import create_pretraining_data as google  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_bool("do_whole_word_mask", False, "Google's later whole-word masking flag.")

_MaskedLm = collections.namedtuple("_MaskedLm", ["index", "label"])
_release_create_masked_lm_predictions = google.create_masked_lm_predictions


def _whole_word_create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                             vocab_words, rng):
    if not FLAGS.do_whole_word_mask:
        return _release_create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng)
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms = []
    covered_indexes = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if any(index in covered_indexes for index in index_set):
            continue
        for index in index_set:
            covered_indexes.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append(_MaskedLm(index=index, label=tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms.sort(key=lambda x: x.index)
    return (output_tokens, [p.index for p in masked_lms], [p.label for p in masked_lms])


google.create_masked_lm_predictions = _whole_word_create_masked_lm_predictions


_JOB_FLAGS = ("input_file", "output_file", "vocab_file", "do_lower_case", "max_seq_length",
              "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob",
              "short_seq_prob", "do_whole_word_mask")


def main(argv):
    with open(argv[1]) as f:
        jobs = json.load(f)
    FLAGS([argv[0]])  # parse an empty command line: every flag at its default
    defaults = {name: FLAGS[name].default for name in _JOB_FLAGS}
    for job in jobs:
        for name, value in defaults.items():
            setattr(FLAGS, name, value)
        for name, value in job.items():
            if name not in _JOB_FLAGS:
                raise ValueError(f"unknown flag in job: {name}")
            setattr(FLAGS, name, value)
        google.main(None)


if __name__ == "__main__":
    main(sys.argv)
