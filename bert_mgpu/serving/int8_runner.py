"""Serves an int8 export (export_saved_model.py --quantize=int8, see serving/int8.py): raw text
in, the fp32 export's `serving_default` outputs out.

One line, from a shell::

    python -m bert_mgpu.serving.int8_runner EXPORT_DIR/1 "a raw sentence" "another one"
    python -m bert_mgpu.serving.int8_runner SQUAD_EXPORT/1 "a question?" "its context" ...

or from Python::

    from bert_mgpu.serving.int8_runner import load
    model = load("EXPORT_DIR/1")   # an Int8Classifier or an Int8Squad
    model(["a raw sentence"])  # {"probabilities": float32 [1, labels], "label_id", "label"}
    # a multi-label head: {"probabilities", "predicted" bool [1, labels], "label"}
    squad = load("SQUAD_EXPORT/1")
    squad(["a question?"], ["its context"])  # {"answer", "answer_start", "answer_end", ...}

This module imports tensorflow, tensorflow-text and numpy, and of bert_mgpu only
`bert_mgpu/tokenization.py` (stdlib only), so it can be copied next to a server with a copy of
that file beside it. Texts are tokenized in Python by `tokenization.FullTokenizer` (Google's
WordPiece, the tokenizer the export's graph equals) when the export holds
`assets/python_tokenizer.json` (a WordPiece vocabulary: serving/int8.py writes it) and
`tokenization.py` can be imported (from the package, else from this file's directory); otherwise
(an export from before that file, a SentencePiece or tokenizer.json vocabulary, no
tokenization.py) by the export's `tokenize` / `tokenize_pair` signatures. Both give the same ids.
"""

import importlib.util
import json
import os
import sys
import threading

import numpy as np
import tensorflow as tf

# The LiteRT model's file name in the export (serving/int8.py writes it).
TFLITE_FILE = "model_int8.tflite"
_IDS = ("input_ids", "input_mask", "segment_ids")
# The Python tokenizer's options in the export's assets/ (serving/int8.py writes it).
PYTHON_TOKENIZER_FILE = "python_tokenizer.json"
# The fewest texts of a length chunk (the fp32 export's MIN_CHUNK_EXAMPLES): below that the
# products get thin and each piece pays an interpreter resize.
MIN_CHUNK_ROWS = 8


class LiteRTModel:
    """The LiteRT model of an int8 export: int32 ids [batch, seq_length] in, its outputs by
    name out. The interpreter is resized only when the shape changes; calls are serialised by
    a lock (a LiteRT interpreter runs one call at a time)."""

    def __init__(self, export_dir: str, num_threads: int = 0):
        """Args: the version directory of an int8 export; LiteRT's threads (0: one per CPU
        core)."""
        self._interpreter = tf.lite.Interpreter(
            model_path=os.path.join(export_dir, TFLITE_FILE),
            num_threads=num_threads or os.cpu_count())
        runner = self._interpreter.get_signature_runner()
        self._inputs = {name: d["index"] for name, d in runner.get_input_details().items()}
        self._outputs = {name: d["index"] for name, d in runner.get_output_details().items()}
        self._shape = None
        self._lock = threading.Lock()

    def __call__(self, input_ids, input_mask, segment_ids) -> dict:
        """int32 arrays [batch, seq_length] -> {output name: float32 array [batch, ...]}."""
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
            return {name: self._interpreter.get_tensor(index).copy()
                    for name, index in self._outputs.items()}


def _load_side(export_dir: str):
    """The export's SavedModel (tokenizer, task module) and its signatures."""
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    side = tf.saved_model.load(export_dir)
    return side, side.signatures


class Int8Classifier:
    """The tokenizer SavedModel and the LiteRT int8 model of a classifier export, as one
    callable.

    Each call tokenizes (in Python, `PythonTokenizer`, or with the export's
    `tokenize`/`tokenize_pair` signatures: see the module docstring), sorts the batch by length
    into up to `length_chunks` pieces, cuts each piece's padding to its longest text and runs
    the LiteRT model on that shape.

    Attributes:
      python_tokenizer: the export's `PythonTokenizer`, or None (the signatures tokenize).
    """

    def __init__(self, export_dir: str, num_threads: int = 0, length_chunks: int = 4,
                 loaded=None):
        """Args:
          export_dir: the version directory of an int8 export.
          num_threads: LiteRT's threads (0: one per CPU core).
          length_chunks: a batch is sorted by length and run in up to this many pieces of at
            least MIN_CHUNK_ROWS texts, each cut to its own longest text (1: one piece).
          loaded: `_load_side(export_dir)` if the caller has it.
        """
        self.length_chunks = length_chunks
        self._side, signatures = loaded or _load_side(export_dir)
        self._tokenize, self._tokenize_pair = signatures["tokenize"], signatures["tokenize_pair"]
        self.python_tokenizer = PythonTokenizer.load(export_dir)
        labels = signatures["labels"]()
        self.labels = np.array([s.decode("utf-8") for s in labels["label"].numpy().tolist()])
        # A multi-label head: one sigmoid per label, predicted above the run's threshold.
        self.threshold = (float(labels["multilabel_threshold"].numpy())
                          if "multilabel_threshold" in labels else None)
        self._model = LiteRTModel(export_dir, num_threads)

    def predict_ids(self, input_ids, input_mask, segment_ids) -> np.ndarray:
        """int32 arrays [batch, seq_length] -> probabilities float32 [batch, labels]."""
        return self._model(input_ids, input_mask, segment_ids)["probabilities"]

    def _chunks(self, input_mask):
        """The rows of a batch in up to `length_chunks` groups of similar lengths (at least
        MIN_CHUNK_ROWS rows each), as the fp32 export's --length_chunks: each group is cut to
        its own longest text. Activations are quantized per row, so a text's outputs do not
        depend on the rows it is run with."""
        lengths = input_mask.sum(axis=1)
        chunks = int(np.clip(len(lengths) // MIN_CHUNK_ROWS, 1, self.length_chunks))
        order = np.argsort(lengths, kind="stable")
        return [order[i * len(order) // chunks:(i + 1) * len(order) // chunks]
                for i in range(chunks) if len(order)]

    def __call__(self, text_a, text_b=None) -> dict:
        """Texts (str list [batch]; `text_b` as the fp32 export's `serving_pair`) ->
        `probabilities` float32 [batch, labels], `label_id` int32 [batch], `label` str
        [batch]; a multi-label head: `probabilities` (sigmoids), `predicted` bool
        [batch, labels], `label` (the predicted labels joined by commas)."""
        ids = self._features(text_a, text_b)
        probabilities = np.zeros([len(ids[0]), len(self.labels)], np.float32)
        for rows in self._chunks(ids[1]):
            # Masks are prefixes: a chunk is cut after its longest text.
            longest = max(int(ids[1][rows].sum(axis=1).max()), 1)
            probabilities[rows] = self.predict_ids(*(x[rows, :longest] for x in ids))
        if self.threshold is not None:
            predicted = probabilities > self.threshold
            return {"probabilities": probabilities, "predicted": predicted,
                    "label": np.array([",".join(self.labels[row]) for row in predicted])}
        label_id = probabilities.argmax(axis=-1).astype(np.int32)
        return {"probabilities": probabilities, "label_id": label_id,
                "label": self.labels[label_id]}

    def _features(self, text_a, text_b=None):
        """[input_ids, input_mask, segment_ids] int32 numpy [batch, max_seq_length]."""
        if self.python_tokenizer is not None:
            return self.python_tokenizer(text_a, text_b)
        if text_b is None:
            features = self._tokenize(text_a=tf.constant(text_a, tf.string))
        else:
            features = self._tokenize_pair(text_a=tf.constant(text_a, tf.string),
                                           text_b=tf.constant(text_b, tf.string))
        return [features[name].numpy() for name in _IDS]


def _tokenization_module():
    """bert_mgpu/tokenization.py: the package's, else a copy next to this file, else None."""
    try:
        from bert_mgpu import tokenization
        return tokenization
    except ImportError:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenization.py")
        if not os.path.isfile(path):
            return None
        spec = importlib.util.spec_from_file_location("tokenization", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


class PythonTokenizer:
    """The export's `tokenize` / `tokenize_pair` in Python: `FullTokenizer` and the
    classifier's packing as the graph does it (`[CLS] a [SEP]`, `[CLS] a [SEP] b [SEP]`, no
    second [SEP] when b has no tokens, Google's pair truncation, single texts cut by
    `truncation`), the same ids for a fraction of a signature call's time."""

    def __init__(self, tokenizer, max_seq_length: int, truncation: str, head_tokens: int):
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.truncation = truncation
        self.head_tokens = head_tokens
        self.cls_id, self.sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])

    @classmethod
    def load(cls, export_dir: str):
        """The export's Python tokenizer, or None (no options file, or no tokenization.py)."""
        path = os.path.join(export_dir, "assets", PYTHON_TOKENIZER_FILE)
        tokenization = _tokenization_module()
        if tokenization is None or not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            options = json.load(f)
        tokenizer = tokenization.FullTokenizer(
            os.path.join(export_dir, "assets", options["vocab_file"]),
            do_lower_case=options["do_lower_case"])
        return cls(tokenizer, options["max_seq_length"], options["truncation"],
                   options["head_tokens"])

    def ids(self, text) -> list:
        """One text (str or UTF-8 bytes) -> its token ids."""
        return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))

    def _single(self, ids: list) -> list:
        """A single text's ids cut as the graph does (`head` or `head_tail`)."""
        budget = self.max_seq_length - 2
        if len(ids) <= budget:
            return ids
        if self.truncation != "head_tail":
            return ids[:budget]
        head = min(self.head_tokens, budget)
        return ids[:head] + ids[len(ids) - (budget - head):]

    def _pair(self, a: list, b: list):
        """Google's `_truncate_seq_pair` (the longer text loses its last token first, a wins
        ties), closed form; a text b without tokens makes a single text."""
        if not b:
            return self._single(a), b
        budget = self.max_seq_length - 3
        if len(a) + len(b) <= budget:
            return a, b
        keep_a = min(len(a), max((budget + 1) // 2, budget - len(b)))
        return a[:keep_a], b[:budget - keep_a]

    def __call__(self, text_a, text_b=None) -> list:
        """Texts (str or bytes lists [batch]) -> [input_ids, input_mask, segment_ids], int32
        numpy [batch, max_seq_length], equal to the export's signatures' outputs."""
        out = np.zeros([3, len(text_a), self.max_seq_length], np.int32)
        for row, text in enumerate(text_a):
            if text_b is None:
                a, b = self._single(self.ids(text)), []
            else:
                a, b = self._pair(self.ids(text), self.ids(text_b[row]))
            tokens = [self.cls_id, *a, self.sep_id] + ([*b, self.sep_id] if b else [])
            out[0, row, :len(tokens)] = tokens
            out[1, row, :len(tokens)] = 1
            out[2, row, len(a) + 2:len(tokens)] = 1
        return list(out)


class Int8Squad:
    """The SavedModel (windows, answer search) and the LiteRT int8 model of a SQuAD export, as
    one callable: (questions, contexts) -> the fp32 export's `serving_default` outputs."""

    def __init__(self, export_dir: str, num_threads: int = 0, loaded=None):
        """Args as `Int8Classifier`'s."""
        self._side, signatures = loaded or _load_side(export_dir)
        self._windows, self._answers = signatures["windows"], signatures["answers"]
        self._model = LiteRTModel(export_dir, num_threads)

    def __call__(self, question, context) -> dict:
        """Questions and contexts (str lists [batch]) -> `answer` str, `answer_start`,
        `answer_end` int32 (character offsets, -1 without an answer), `start_logit`,
        `end_logit`, `null_score_diff` float32, each [batch]."""
        context = tf.constant(context, tf.string)
        windows = self._windows(question=tf.constant(question, tf.string), context=context)
        ids = [windows[name].numpy() for name in _IDS]
        if len(ids[0]):
            logits = self._model(*ids)
        else:  # no question: no window to run
            logits = {name: np.zeros(ids[0].shape, np.float32)
                      for name in ("start_logits", "end_logits")}
        out = self._answers(context=context, **windows,
                            **{k: tf.constant(v) for k, v in logits.items()})
        answers = {k: v.numpy() for k, v in out.items()}
        answers["answer"] = np.array([a.decode("utf-8") for a in answers["answer"].tolist()])
        return answers


def load(export_dir: str, num_threads: int = 0):
    """The runner of an int8 export: an `Int8Squad` for a SQuAD export, else an
    `Int8Classifier`."""
    loaded = _load_side(export_dir)
    runner = Int8Squad if "answers" in loaded[1] else Int8Classifier
    return runner(export_dir, num_threads, loaded=loaded)


def main(argv) -> None:
    """`python -m bert_mgpu.serving.int8_runner EXPORT_DIR/1 TEXT...`: one JSON line per text
    (a SQuAD export: per QUESTION CONTEXT pair)."""
    if len(argv) < 3:
        sys.exit("usage: python -m bert_mgpu.serving.int8_runner EXPORT_DIR/VERSION TEXT... "
                 "(a SQuAD export: QUESTION CONTEXT ...)")
    model = load(argv[1])
    texts = argv[2:]
    if isinstance(model, Int8Squad):
        if len(texts) % 2:
            sys.exit("a SQuAD export answers QUESTION CONTEXT pairs: an odd number of texts")
        out = model(texts[0::2], texts[1::2])
    else:
        out = model(texts)
    for i in range(len(out["label" if "label" in out else "answer"])):
        print(json.dumps({k: _plain(v[i]) for k, v in out.items()}, ensure_ascii=False))


def _plain(value):
    """A numpy value -> its JSON-able Python value."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value


if __name__ == "__main__":
    main(sys.argv)
