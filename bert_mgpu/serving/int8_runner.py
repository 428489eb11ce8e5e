"""Serves an int8 export (export_saved_model.py --quantize=int8, see serving/int8.py): raw text
in, the fp32 export's classifier outputs out.

One line, from a shell::

    python -m bert_mgpu.serving.int8_runner EXPORT_DIR/1 "a raw sentence" "another one"

or from Python::

    from bert_mgpu.serving.int8_runner import Int8Classifier
    model = Int8Classifier("EXPORT_DIR/1")
    model(["a raw sentence"])  # {"probabilities": float32 [1, labels], "label_id", "label"}

This module imports tensorflow, tensorflow-text and numpy only (nothing else of bert_mgpu), so
it can be copied next to a server as it is.
"""

import json
import os
import sys
import threading

import numpy as np
import tensorflow as tf

# The LiteRT model's file name in the export (serving/int8.py writes it).
TFLITE_FILE = "model_int8.tflite"
_IDS = ("input_ids", "input_mask", "segment_ids")


class Int8Classifier:
    """The tokenizer SavedModel and the LiteRT int8 model of one export, as one callable.

    Each call tokenizes in TensorFlow (the export's `tokenize`/`tokenize_pair`), cuts the
    padding to the batch's longest text and runs the LiteRT model on that shape; the
    interpreter is resized only when the shape changes. Calls are serialised by a lock (a LiteRT
    interpreter runs one call at a time).
    """

    def __init__(self, export_dir: str, num_threads: int = 0):
        """Args:
          export_dir: the version directory of an int8 export.
          num_threads: LiteRT's threads (0: one per CPU core).
        """
        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

        self._tokenizer = tf.saved_model.load(export_dir)
        signatures = self._tokenizer.signatures
        self._tokenize, self._tokenize_pair = signatures["tokenize"], signatures["tokenize_pair"]
        self.labels = np.array([s.decode("utf-8") for s in
                                signatures["labels"]()["label"].numpy().tolist()])
        self._interpreter = tf.lite.Interpreter(
            model_path=os.path.join(export_dir, TFLITE_FILE),
            num_threads=num_threads or os.cpu_count())
        runner = self._interpreter.get_signature_runner()
        self._inputs = {name: d["index"] for name, d in runner.get_input_details().items()}
        self._output = runner.get_output_details()["probabilities"]["index"]
        self._shape = None
        self._lock = threading.Lock()

    def predict_ids(self, input_ids, input_mask, segment_ids) -> np.ndarray:
        """int32 arrays [batch, seq_length] -> probabilities float32 [batch, labels]."""
        arrays = dict(zip(_IDS, (np.ascontiguousarray(x, np.int32)
                                 for x in (input_ids, input_mask, segment_ids))))
        with self._lock:
            shape = arrays["input_ids"].shape
            if shape != self._shape:
                for name, index in self._inputs.items():
                    self._interpreter.resize_tensor_input(index, shape)
                self._interpreter.allocate_tensors()
                self._shape = shape
            for name, index in self._inputs.items():
                self._interpreter.set_tensor(index, arrays[name])
            self._interpreter.invoke()
            return self._interpreter.get_tensor(self._output).copy()

    def __call__(self, text_a, text_b=None) -> dict:
        """Texts (str list [batch]; `text_b` as the fp32 export's `serving_pair`) ->
        `probabilities` float32 [batch, labels], `label_id` int32 [batch], `label` str
        [batch]."""
        if text_b is None:
            features = self._tokenize(text_a=tf.constant(text_a, tf.string))
        else:
            features = self._tokenize_pair(text_a=tf.constant(text_a, tf.string),
                                           text_b=tf.constant(text_b, tf.string))
        ids = {name: features[name].numpy() for name in _IDS}
        if not len(ids["input_ids"]):
            return {"probabilities": np.zeros([0, len(self.labels)], np.float32),
                    "label_id": np.zeros([0], np.int32), "label": self.labels[:0]}
        # Masks are prefixes: the longest text ends where the last column with a 1 is.
        longest = int(np.max(np.nonzero(ids["input_mask"].any(axis=0))[0], initial=0)) + 1
        probabilities = self.predict_ids(*(ids[name][:, :longest] for name in _IDS))
        label_id = probabilities.argmax(axis=-1).astype(np.int32)
        return {"probabilities": probabilities, "label_id": label_id,
                "label": self.labels[label_id]}


def main(argv) -> None:
    """`python -m bert_mgpu.serving.int8_runner EXPORT_DIR/1 TEXT...`: one JSON line per text."""
    if len(argv) < 3:
        sys.exit("usage: python -m bert_mgpu.serving.int8_runner EXPORT_DIR/VERSION TEXT...")
    out = Int8Classifier(argv[1])(argv[2:])
    for i, _ in enumerate(argv[2:]):
        print(json.dumps({"probabilities": out["probabilities"][i].tolist(),
                          "label_id": int(out["label_id"][i]), "label": str(out["label"][i])},
                         ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv)
