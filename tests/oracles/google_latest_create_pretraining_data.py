"""Runs Google's latest create_pretraining_data.py (google-research/bert at eedf571, which has
--do_whole_word_mask) as a test oracle, through the TF1 shim run_google_latest.py of the test
material (../shared/material/oracles). Google's code as published, nothing replaced.

Runs in the oracle virtualenv (.venv-oracle), never in the project's. Usage:

    python google_latest_create_pretraining_data.py REQUEST.json

REQUEST.json: {"google_dir": folder of run_google_latest.py, "jobs": [{flag: value}, ...]}; each
job is a dict of Google's flags (`input_file`, `output_file`, `vocab_file`, `do_lower_case`,
`do_whole_word_mask`, `max_seq_length`, `max_predictions_per_seq`, `random_seed`, `dupe_factor`,
`masked_lm_prob`, `short_seq_prob`). All jobs run in one process; each calls Google's `main`
with its flags set and every other flag at its default.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

JOB_FLAGS = ("input_file", "output_file", "vocab_file", "do_lower_case", "do_whole_word_mask",
             "max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor",
             "masked_lm_prob", "short_seq_prob")


def main(request_path):
    with open(request_path) as f:
        request = json.load(f)
    sys.path.insert(0, request["google_dir"])
    import run_google_latest  # the TF1 shim over Google's scripts

    google = run_google_latest.module("create_pretraining_data")
    flags = google.FLAGS
    flags([sys.argv[0]])  # parse an empty command line: every flag at its default
    defaults = {name: flags[name].default for name in JOB_FLAGS}
    for job in request["jobs"]:
        for name, value in defaults.items():
            setattr(flags, name, value)
        for name, value in job.items():
            if name not in defaults:
                raise ValueError(f"unknown flag in job: {name}")
            setattr(flags, name, value)
        google.main(None)


if __name__ == "__main__":
    main(sys.argv[1])
