"""bert_mgpu: Google's BERT scripts on TensorFlow 2 with in-graph multi-GPU tower training."""

__version__ = "0.1.0"
