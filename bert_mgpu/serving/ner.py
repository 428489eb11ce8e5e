"""The token-classification SavedModel (export_saved_model.py --task=ner): a run_ner.py model,
raw text in, one tag per word out.

Each text is read as run_ner.py reads a sentence of its CoNLL files (data/ner_data.py):

- its words are the text split at whitespace (" \\t\\r\\n" and U+202F, Google's SQuAD split; a
  CoNLL line holds one word);
- the words' pieces are `ServingTokenizer.tokenize_paragraph`'s: WordPiece tokenizes each word
  alone; a tokenizer.json (ModernBERT's byte-level BPE) reads the words joined by single
  spaces, each piece going to the word that holds its last character (a piece of the
  separating space alone: the next word), as `BpeTokenizer.tokenize_words`;
- windows of `max_seq_length - 2` pieces, `doc_stride` pieces apart (the run's
  `--doc_stride`, half a window by default), `[CLS] window [SEP]` each;
- a word is tagged at its first piece, in the window where that piece has the most context
  (Google's `_check_is_max_context`, the first such window on ties): the argmax of the
  tagging head's logits there. A word without pieces (only zero-width characters) is tagged
  'O', id 0, as predictions.txt has it.

Signatures (every batch dimension is free):

- `serving_default`: `text` string [batch] -> `words` string [batch, max_words] (each text's
  words, "" past its last), `tags` string [batch, max_words] (the run's tag names, "" past the
  last word), `tag_ids` int32 [batch, max_words] (-1 past the last word), `num_words` int32
  [batch].
- `tokenize`: `text` -> the windows: `input_ids`, `input_mask`, `segment_ids` int32
  [windows, max_seq_length] (run_ner.py's records), `example_index` int32 [windows].
- `serve_ids`: those ids [windows, seq_length] -> `logits` float32 [windows, seq_length, tags],
  `tag_ids` int32 [windows, seq_length] (the argmax at every position).

The tags are the model's (run_config.json's `labels`): a --tag_scheme=bioes run's are BIOES,
which its predictions.txt converts back to the files' scheme.
"""

import tensorflow as tf

from bert_mgpu.configs.ner import default_doc_stride
from bert_mgpu.model import heads
from bert_mgpu.serving.squad import is_max_context
from bert_mgpu.serving.task import ExportError, TaskServing
from bert_mgpu.serving.tokenizer import SQUAD_WHITESPACE, pack_rows, token_column
from bert_mgpu.serving.windows import slice_windows, window_spans


def _words(text):
    """The words of `offset_text` strings [batch] (split at SQUAD_WHITESPACE): (words string
    RaggedTensor [batch, (words)], word int64 [num_chars]: the index in its text of the word
    each character belongs to (a whitespace character: the next word's), row_splits of the
    characters int64 [batch + 1])."""
    decoded = tf.strings.unicode_decode(text, "UTF-8")
    cps, rows = decoded.values, decoded.value_rowids()
    white = tf.reduce_any(tf.equal(cps[:, None], SQUAD_WHITESPACE), axis=1)
    first = tf.equal(tf.range(tf.size(cps, out_type=tf.int64)),
                     tf.gather(decoded.row_splits, rows))
    after_white = tf.concat([tf.ones([1], tf.bool), white[:-1]], 0)[:tf.size(cps)]
    starts = ~white & (first | after_white)
    count = tf.cumsum(tf.cast(starts, tf.int64))                  # word starts up to here
    before_row = tf.gather(tf.concat([tf.zeros([1], tf.int64), count], 0),
                           decoded.row_splits[:-1])                             # [batch]
    word = count - tf.gather(before_row, rows) - 1 + tf.cast(white, tf.int64)
    letters = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(cps, ~white), tf.boolean_mask(count - 1, ~white),
        nrows=tf.reduce_sum(tf.cast(starts, tf.int64)), validate=False)
    words = tf.RaggedTensor.from_value_rowids(
        tf.strings.unicode_encode(letters, "UTF-8"), tf.boolean_mask(rows, starts),
        nrows=tf.size(text, out_type=tf.int64), validate=False)
    return words, word, decoded.row_splits


class NerServing(tf.Module):
    """Windows of raw texts and the tags of their words; see the module docstring.

    Attributes:
      tokenizer: the `ServingTokenizer`; its max_seq_length is the windows'.
      doc_stride: int, pieces between the starts of a long text's windows.
    """

    def __init__(self, tokenizer, doc_stride: int):
        super().__init__(name=None)
        self.tokenizer = tokenizer
        self.doc_stride = doc_stride

    def windows(self, text, padded_length=None):
        """The windows of every text, as run_ner.py's `convert_sentences`.

        Args:
          text: string Tensor [batch_size] (UTF-8).
          padded_length: int or scalar Tensor, the windows' padded length; None = the longest
            window of the batch.

        Returns:
          dict: `input_ids`, `input_mask`, `segment_ids` int32 [W, L]; `example_index` int32
          [W]; `word` int64 [W, L]: the index in its text of the word a position tags (its
          first piece, in its window of most context), -1 elsewhere; `words` string
          RaggedTensor [batch_size, (words)].
        """
        ids, _, end = self.tokenizer.tokenize_paragraph(text)
        words, word_of_char, char_splits = _words(self.tokenizer.offset_text(text))
        piece_rows = ids.value_rowids()
        piece_word = tf.gather(word_of_char, tf.gather(char_splits, piece_rows) + end.values - 1)
        first_in_row = tf.equal(tf.range(tf.size(piece_rows, out_type=tf.int64)),
                                tf.gather(ids.row_splits, piece_rows))
        previous = tf.concat([tf.fill([1], tf.constant(-1, tf.int64)), piece_word[:-1]],
                             0)[:tf.size(piece_word)]
        first_piece = first_in_row | tf.not_equal(piece_word, previous)
        max_tokens = self.tokenizer.max_seq_length - 2
        rows = tf.size(text, out_type=tf.int64)
        example, start, length = window_spans(
            ids.row_lengths(), tf.fill([rows], tf.constant(max_tokens, tf.int64)),
            self.doc_stride)
        window, index = slice_windows(ids, example, start, length)
        tagged = is_max_context(ids, index, length) & tf.gather(first_piece, index.values)
        num_windows = tf.size(example, out_type=tf.int64)
        if padded_length is None:
            padded_length = tf.reduce_max(tf.concat([length, tf.zeros([1], tf.int64)], 0)) + 2
        packed = pack_rows([(token_column(num_windows, self.tokenizer.cls_id), 0), (window, 0),
                            (token_column(num_windows, self.tokenizer.sep_id), 0)],
                           padded_length)
        none = tf.cast(token_column(num_windows, -1), tf.int64)
        word = tf.concat([none, index.with_values(tf.where(
            tagged, tf.gather(piece_word, index.values), -1)), none], axis=1)
        shape = tf.stack([num_windows, tf.cast(padded_length, tf.int64)])
        return dict(packed, example_index=tf.cast(example, tf.int32),
                    word=word.to_tensor(-1, shape=shape), words=words)

    @staticmethod
    def tags(windows, tag_ids, labels):
        """Each word's tag: `serving_default`'s outputs (module docstring) from the windows'
        `tag_ids` int32 [W, L] and the tag names `labels` string [tags]."""
        words = windows["words"]
        at = tf.where(windows["word"] >= 0)                                # [tagged, 2]
        example = tf.gather(tf.cast(windows["example_index"], tf.int64), at[:, 0])
        flat = tf.gather(words.row_splits, example) + tf.gather_nd(windows["word"], at)
        ids = tf.tensor_scatter_nd_update(
            tf.zeros(tf.shape(words.values), tf.int32), flat[:, None],
            tf.gather_nd(tag_ids, at))
        tagged = words.with_values(ids)
        return {"words": words.to_tensor(""), "tag_ids": tagged.to_tensor(-1),
                "tags": words.with_values(tf.gather(labels, ids)).to_tensor(""),
                "num_words": tf.cast(words.row_lengths(), tf.int32)}


class NerTaskServing(TaskServing):
    """A run_ner.py model (export_saved_model.py --task=ner): the tagging head on every token
    (ModernBERT's: after its token head), and signatures of raw texts (module docstring).
    `windows`: the run's --doc_stride is served (its windows over long texts)."""
    token_level = True
    windows = True

    def resolve(self, cfg, run, checkpoint_prefix, option):
        """The run's tags (--label_list wins) and --doc_stride (the export's flag wins)."""
        del checkpoint_prefix, option
        doc_stride = cfg.doc_stride if cfg.doc_stride is not None else run.get("doc_stride")
        return {"labels": list(cfg.label_list) if cfg.label_list else run.get("labels"),
                "doc_stride": int(doc_stride or 0)}

    def check(self, spec) -> None:
        if spec.spm_model_file:
            raise ExportError("--task=ner needs a --vocab_file (WordPiece or tokenizer.json: "
                              "pieces go to words by their characters), not --spm_model_file")
        if not spec.labels:
            raise ExportError("--task=ner: the tag names are unknown: export a run_ner.py run "
                              "(--output_dir, its run_config.json) or give --label_list")
        if not 0 <= spec.doc_stride <= spec.max_seq_length - 2:
            raise ExportError(f"--doc_stride={spec.doc_stride} must be in [1, --max_seq_length "
                              f"- 2 = {spec.max_seq_length - 2}]")

    def build(self, bert_config, shapes, spec):
        if "cls/ner/output_bias" not in shapes:
            raise ExportError("--task=ner: the checkpoint has no tagging head "
                              "(cls/ner/output_weights, cls/ner/output_bias): export a "
                              "run_ner.py run")
        num_tags = shapes["cls/ner/output_bias"][0]
        if spec.labels and len(spec.labels) != num_tags:
            raise ExportError(f"--task=ner: {len(spec.labels)} tag names for a head of "
                              f"{num_tags} tags")
        return heads.TokenTaggingHead(bert_config, num_tags)

    def labels(self, head, spec):
        del head
        return spec.labels

    def outputs(self, head, bert_out, input_mask):
        del input_mask
        logits = head(bert_out.sequence_output)["logits"]
        return {"logits": logits, "tag_ids": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    def module(self, tokenizer, spec):
        return NerServing(tokenizer, spec.doc_stride
                          or default_doc_stride(tokenizer.max_seq_length))

    def signatures(self, model, serve_ids):
        text = [tf.TensorSpec([None], tf.string, name="text")]
        return {"serving_default": tf.function(lambda text: serve_ner(model, text),
                                               input_signature=text, autograph=False),
                "tokenize": tf.function(lambda text: _windows(model, text),
                                        input_signature=text, autograph=False),
                "serve_ids": serve_ids}


def _windows(model, text):
    """The windows of `text` as run_ner.py builds them (padded to max_seq_length)."""
    windows = model.task_module.windows(text, model.tokenizer.max_seq_length)
    return {k: windows[k] for k in ("input_ids", "input_mask", "segment_ids", "example_index")}


def serve_ner(model, text):
    """Raw texts -> their words and tags (`model`: a serving/export.py `ServingModel` of
    --task=ner)."""
    ner = model.task_module
    windows = ner.windows(text)
    length = tf.shape(windows["input_ids"])[1]
    cut = model.cut_length(length, model.tokenizer.max_seq_length)
    pad = [[0, 0], [0, cut - length]]
    # (With jit_compile the windows are padded up to the rounded length.)
    windows.update({k: tf.pad(windows[k], pad, constant_values=-1 if k == "word" else 0)
                    for k in ("input_ids", "input_mask", "segment_ids", "word")})
    out = model.encode(windows["input_ids"], windows["input_mask"], windows["segment_ids"])
    return ner.tags(windows, out["tag_ids"], model.labels)


SERVING = NerTaskServing()
