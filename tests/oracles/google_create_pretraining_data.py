"""Runs Google's create_pretraining_data.py (PyPI bert-tensorflow==1.0.4) as a test oracle.

Runs in the oracle virtualenv (.venv-oracle), never in the project's. Google's module runs under
TF 2.21 unchanged (it imports `tensorflow.compat.v1`). Usage:

    python google_create_pretraining_data.py REQUEST.json

REQUEST.json is a list of jobs; each is a dict of Google's flags (`input_file`, `output_file`,
`vocab_file`, `do_lower_case`, `max_seq_length`, `max_predictions_per_seq`, `random_seed`,
`dupe_factor`, `masked_lm_prob`, `short_seq_prob`). All jobs run in one
process (TensorFlow is imported once); each calls Google's `main` with its flags set.

Whole-word masking is not in the 1.0.4 release (added to the repository in May 2019):
google_latest_create_pretraining_data.py runs Google's later script for it.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from absl import flags  # noqa: E402
from bert import create_pretraining_data as google  # noqa: E402

FLAGS = flags.FLAGS

_JOB_FLAGS = ("input_file", "output_file", "vocab_file", "do_lower_case", "max_seq_length",
              "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob",
              "short_seq_prob")


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
