"""Google's BERT module API over the project's model, and the TF1 runner for users' own files.

`from bert_mgpu.compat import modeling, tokenization, optimization, run_classifier` gives
Google's names and signatures (google-research/bert) computed by the project's model, in TF1
graph mode (`tf.compat.v1`, v2 behaviour off) and in TF2 eager. `python -m bert_mgpu.compat
USER_SCRIPT.py [ARGS...]` runs a TF1-era file unchanged (`runner.py`). Importing this package
imports nothing else (the runner's usage errors come before TensorFlow loads).
"""
