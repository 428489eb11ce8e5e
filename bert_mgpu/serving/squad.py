"""SQuAD in the serving graph: doc-stride windows of raw question/context strings, and the
answer search of Google's `write_predictions`, as TensorFlow ops.

`SquadServing` builds, for a batch of (question, context) strings, the windows Google's
`convert_examples_to_features` builds (`[CLS] question [SEP] window [SEP]`, the question cut to
`max_query_length` tokens, windows of `max_seq_length - len(question) - 3` document tokens
starting `doc_stride` apart, the last one ending at the last token; each token's "max context"
window by Google's score), and picks each question's answer over all of its windows by Google's
rule:

- candidates: the `n_best_size` largest start logits and end logits of each window;
- a span is valid when start and end are in the window's document part, the start token has
  its maximum context in this window, start <= end and it is at most `max_answer_length`
  tokens long;
- the best is the valid span with the largest start + end logit (float64 sums, as Google's
  Python floats); ties go to the first in Google's order (window, start rank, end rank);
- SQuAD v2.0 (`version_2_with_negative`): null score = the lowest [CLS] start + end logit over
  the windows; the answer is empty when null score - best span's score >
  `null_score_diff_threshold` (`null_score_diff` is the value Google writes to null_odds.json).

Where this differs from Google's post-processing, by design:

- The answer text is the context's own substring from the first character of the start token
  to the last character of the end token (`answer_start`, `answer_end`: Python `str` offsets).
  Google's `get_final_text` projects the de-WordPieced tokens back onto the original words and
  gives the same text whenever that projection works (lower-casing and accent stripping keep
  one character per character); where it gives up and returns whole words, this gives the
  tokens' own characters.
- Candidates are taken among each window's real positions; Google's also rank the padding
  positions of its max_seq_length-long windows (never a valid answer, but they can take one of
  the `n_best_size` places).
- No valid span at all: the answer is "" with offsets -1 (Google's nonce text is "empty").
- An empty context is one window without document tokens (Google's makes none).

Google tokenizes the context word by word (split on " \\t\\r\\n" and U+202F); the WordPiece
tokenizer splits on every whitespace anyway, so tokenizing the whole context gives the same
tokens, and character offsets come with them (`ServingTokenizer.tokenize_paragraph`).

A tokenizer.json (ModernBERT's byte-level BPE) reads the context as run_squad.py does, its
words joined by single spaces (so a word after the first starts with its space, "Ġword");
`answer_start`/`answer_end` count the characters of the context as its normalizer leaves it
(`ServingTokenizer.offset_text`: the context itself when it is in NFC), and the answer is
those characters, the span of the start token (without its leading space) to the end token.
run_squad.py decodes the same tokens from the words joined by single spaces: the two agree
unless the answer crosses a whitespace run other than one space. SentencePiece models are
refused (no offsets).
"""

import dataclasses

import tensorflow as tf

from bert_mgpu.configs.squad import SquadAnswerOptions
from bert_mgpu.model import heads
from bert_mgpu.serving.task import ExportError, TaskServing
from bert_mgpu.serving.tokenizer import pack_rows, token_column
from bert_mgpu.serving.windows import slice_windows, window_spans

_NEG_INF = float("-inf")


class SquadServing(tf.Module):
    """Windows and answers of raw (question, context) batches; see the module docstring.

    Attributes:
      tokenizer: the `ServingTokenizer` (WordPiece or tokenizer.json); its max_seq_length is
        the windows'.
      options: `configs/squad.py`'s `SquadAnswerOptions`.
    """

    def __init__(self, tokenizer, options: SquadAnswerOptions):
        super().__init__(name=None)
        options.validate(tokenizer.max_seq_length)
        self.tokenizer = tokenizer
        self.options = options

    def windows(self, question, context, padded_length=None):
        """The windows of every question, as Google's `convert_examples_to_features`.

        Args:
          question, context: string Tensors of shape [batch_size] (UTF-8).
          padded_length: int or scalar Tensor, the padded length of the windows; None = the
            longest window of the batch.

        Returns:
          dict of Tensors, W = the number of windows of the whole batch, in question order:
          `input_ids`, `input_mask`, `segment_ids` int32 [W, L]; `example_index` int32 [W]
          (the question each window belongs to); `length` int64 [W] (real tokens);
          `doc_offset` int64 [W] (the first document position, len(question) + 2);
          `doc_length` int64 [W]; `doc_start` int64 [W] (the window's first token in the
          context's token list); `max_context` bool [W, L] (document positions whose token
          has its maximum context in this window); `doc_tokens`: the context's tokens,
          (ids, char start, char end) RaggedTensors [batch_size, (tokens)].
        """
        opt = self.options
        cls_id, sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        query = self.tokenizer.tokenize_ids(question)[:, :opt.max_query_length]
        doc_ids, char_start, char_end = self.tokenizer.tokenize_paragraph(context)
        query_len = query.row_lengths()                      # [B]
        # Google: max_tokens_for_doc, and windows `min(length, doc_stride)` apart.
        max_doc = self.tokenizer.max_seq_length - query_len - 3         # [B], >= 1 (validate)
        example, doc_start, doc_length = window_spans(doc_ids.row_lengths(), max_doc,
                                                      opt.doc_stride)
        w_query = tf.gather(query, example)
        doc_offset = tf.gather(query_len, example) + 2
        length = doc_offset + doc_length + 1
        doc, token = slice_windows(doc_ids, example, doc_start, doc_length)  # [W, (doc)]

        is_max = is_max_context(doc_ids, token, doc_length)

        rows = tf.size(example, out_type=tf.int64)
        cls = token_column(rows, cls_id)
        sep = token_column(rows, sep_id)
        if padded_length is None:
            padded_length = tf.reduce_max(tf.concat([length, [1]], 0))
        packed = pack_rows([(cls, 0), (w_query, 0), (sep, 0), (doc, 1), (sep, 1)],
                           padded_length)
        false = tf.zeros_like(cls, tf.bool)
        max_context = tf.concat([false, tf.zeros_like(w_query, tf.bool), false,
                                 token.with_values(is_max), false], axis=1)
        shape = tf.stack([rows, tf.cast(padded_length, tf.int64)])
        return dict(packed, example_index=tf.cast(example, tf.int32),
                    length=length, doc_offset=doc_offset, doc_length=doc_length,
                    doc_start=doc_start,
                    max_context=max_context.to_tensor(False, shape=shape),
                    doc_tokens=(doc_ids, char_start, char_end))

    def answers(self, context, windows, start_logits, end_logits):
        """Google's best span per question over its windows (see the module docstring).

        Args:
          context: string Tensor [batch_size].
          windows: `windows(...)` of the batch.
          start_logits, end_logits: float32 Tensors [W, L].

        Returns:
          dict of Tensors [batch_size]: `answer` string, `answer_start`, `answer_end` int32
          (character offsets in the context, end exclusive; -1 without an answer),
          `start_logit`, `end_logit` float32 (of the best span; 0 when none is valid),
          `null_score_diff` float32 (null score - best span's score).
        """
        opt = self.options
        batch = tf.shape(context, out_type=tf.int64)[0]
        example = tf.cast(windows["example_index"], tf.int64)
        spans = _window_spans(windows, start_logits, end_logits, opt)
        best = _question_spans(spans, example, batch)
        has_span = best["has_span"]
        begin, finish = _char_offsets(windows, example, best)

        # SQuAD v2.0's null answer: the lowest [CLS] start + end over the windows.
        null = tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64)
        score_null = tf.math.unsorted_segment_min(null, example, batch)
        null_score_diff = (score_null - tf.cast(best["start_logit"], tf.float64)
                           - tf.cast(best["end_logit"], tf.float64))
        answered = has_span
        if opt.version_2_with_negative:
            answered &= ~(null_score_diff > opt.null_score_diff_threshold)
        minus_one = -tf.ones_like(begin)
        begin = tf.where(answered, begin, minus_one)
        finish = tf.where(answered, finish, minus_one)
        # Offsets count the characters of the context as the tokenizer reads it.
        text = self.tokenizer.offset_text(context)
        answer = tf.strings.substr(text, tf.maximum(begin, 0), tf.maximum(finish - begin, 0),
                                   unit="UTF8_CHAR")
        return {"answer": answer,
                "answer_start": tf.cast(begin, tf.int32), "answer_end": tf.cast(finish, tf.int32),
                "start_logit": best["start_logit"], "end_logit": best["end_logit"],
                "null_score_diff": tf.cast(null_score_diff, tf.float32)}


def is_max_context(doc_ids, token, doc_length):
    """Google's `_check_is_max_context` for every window token: bool [W, (doc)] values, True
    where the token's window scores highest, min(left, right) + 0.01 * window length (float64
    as Python's); the first window with the highest score wins.

    Args:
      doc_ids: int RaggedTensor [batch_size, (tokens)], the contexts' tokens.
      token: int64 RaggedTensor [W, (doc)], each window's tokens' indices in `doc_ids.values`.
      doc_length: int64 [W], each window's document tokens.
    """
    window_of = token.value_rowids()
    left = tf.ragged.range(doc_length).values
    right = tf.gather(doc_length, window_of) - 1 - left
    score = (tf.cast(tf.minimum(left, right), tf.float64)
             + 0.01 * tf.cast(tf.gather(doc_length, window_of), tf.float64))
    num_tokens = tf.size(doc_ids.values, out_type=tf.int64)
    best = tf.math.unsorted_segment_max(score, token.values, num_tokens)
    first = tf.math.unsorted_segment_min(
        tf.where(tf.equal(score, tf.gather(best, token.values)), window_of,
                 tf.int64.max), token.values, num_tokens)
    return tf.equal(tf.gather(first, token.values), window_of)


def _window_spans(windows, start_logits, end_logits, opt: SquadAnswerOptions) -> dict:
    """Each window's best valid span among its `n_best_size` top starts and ends.

    Returns:
      dict: `s_val`, `e_val` [W, k] the top logits, `s_pos`, `e_pos` int64 [W, k] their
      positions, `k` int32 scalar; `best` float64 [W] the best valid span's start + end logit
      (-inf: none), `choice` int64 [W] its candidate index start_rank * k + end_rank (ties to
      the first in Google's order), `any_valid` bool [W].
    """
    seq = tf.shape(start_logits, out_type=tf.int64)[1]
    positions = tf.range(seq)[None, :]                                   # [1, L]
    real = positions < windows["length"][:, None]                        # [W, L]
    doc_begin = windows["doc_offset"][:, None]
    in_doc = (positions >= doc_begin) & (positions < doc_begin
                                         + windows["doc_length"][:, None])
    k = tf.cast(tf.minimum(tf.cast(opt.n_best_size, tf.int64), seq), tf.int32)
    neg_inf = tf.constant(_NEG_INF, start_logits.dtype)
    s_val, s_pos = tf.math.top_k(tf.where(real, start_logits, neg_inf), k)   # [W, k]
    e_val, e_pos = tf.math.top_k(tf.where(real, end_logits, neg_inf), k)
    s_pos, e_pos = tf.cast(s_pos, tf.int64), tf.cast(e_pos, tf.int64)
    s_ok = (tf.gather(in_doc, s_pos, batch_dims=1)
            & tf.gather(windows["max_context"], s_pos, batch_dims=1))
    e_ok = tf.gather(in_doc, e_pos, batch_dims=1)
    s_idx, e_idx = s_pos[:, :, None], e_pos[:, None, :]                # [W, k, 1], [W, 1, k]
    valid = (s_ok[:, :, None] & e_ok[:, None, :] & (e_idx >= s_idx)
             & (e_idx - s_idx + 1 <= opt.max_answer_length))           # [W, k, k]
    score = (tf.cast(s_val, tf.float64)[:, :, None]
             + tf.cast(e_val, tf.float64)[:, None, :])
    num_windows = tf.shape(valid, out_type=tf.int64)[0]
    flat_valid = tf.reshape(valid, [num_windows, -1])
    flat_score = tf.where(flat_valid, tf.reshape(score, [num_windows, -1]),
                          tf.constant(_NEG_INF, tf.float64))
    # Best per window, ties to the first candidate in Google's (start rank, end rank) order.
    window_best = tf.reduce_max(flat_score, axis=1)                      # [W]
    candidate = tf.range(tf.shape(flat_score, out_type=tf.int64)[1])[None, :]
    window_choice = tf.reduce_min(tf.where(
        flat_valid & tf.equal(flat_score, window_best[:, None]), candidate,
        tf.int64.max), axis=1)
    return dict(s_val=s_val, e_val=e_val, s_pos=s_pos, e_pos=e_pos, k=k, best=window_best,
                choice=window_choice, any_valid=tf.reduce_any(flat_valid, axis=1))


def _question_spans(spans: dict, example, batch) -> dict:
    """Each question's best span over its windows (ties to its first window).

    Returns:
      dict of Tensors [batch_size]: `has_span` bool, `window` int64 (0 without a span),
      `start`, `end` int64 positions in that window, `start_logit`, `end_logit` (0 without a
      span).
    """
    num_windows = tf.shape(spans["best"], out_type=tf.int64)[0]
    best = tf.math.unsorted_segment_max(spans["best"], example, batch)      # [B]
    window_ids = tf.range(num_windows)
    has_best = spans["any_valid"] & tf.equal(spans["best"], tf.gather(best, example))
    chosen = tf.math.unsorted_segment_min(tf.where(has_best, window_ids, tf.int64.max),
                                          example, batch)               # [B]
    has_span = chosen < num_windows
    w = tf.where(has_span, chosen, 0)
    c = tf.gather(spans["choice"], w)
    c = tf.where(has_span, c, 0)
    k = tf.cast(spans["k"], tf.int64)
    start_rank, end_rank = c // k, c % k
    start = tf.gather(spans["s_pos"], w)
    start = tf.gather(start, start_rank, batch_dims=1)                   # [B] window pos
    end = tf.gather(tf.gather(spans["e_pos"], w), end_rank, batch_dims=1)
    start_logit = tf.gather(tf.gather(spans["s_val"], w), start_rank, batch_dims=1)
    end_logit = tf.gather(tf.gather(spans["e_val"], w), end_rank, batch_dims=1)
    zero = tf.zeros_like(start_logit)
    return dict(has_span=has_span, window=w, start=start, end=end,
                start_logit=tf.where(has_span, start_logit, zero),
                end_logit=tf.where(has_span, end_logit, zero))


def _char_offsets(windows, example, best: dict):
    """Window positions -> the context's tokens -> characters: (begin, finish) int64
    [batch_size], the first character of the start token and the end of the end token."""
    w = best["window"]
    doc_ids, char_start, char_end = windows["doc_tokens"]
    first_token = (tf.gather(doc_ids.row_splits[:-1], tf.gather(example, w))
                   + tf.gather(windows["doc_start"], w) - tf.gather(windows["doc_offset"], w))
    # (A sentinel keeps the gathers valid for a batch without any context token.)
    sentinel = tf.zeros([1], tf.int64)
    last = tf.size(char_start.values, out_type=tf.int64)
    begin = tf.gather(tf.concat([char_start.values, sentinel], 0),
                      tf.clip_by_value(first_token + best["start"], 0, last))
    finish = tf.gather(tf.concat([char_end.values, sentinel], 0),
                       tf.clip_by_value(first_token + best["end"], 0, last))
    return begin, finish


class SquadTaskServing(TaskServing):
    """A run_squad.py model (export_saved_model.py --task=squad): the span head on the sequence
    output (ModernBERT's: after its token head), and signatures of (question, context)
    strings (see serving/export.py)."""
    token_level = True
    int8_outputs = ("start_logits", "end_logits")

    def resolve(self, cfg, run, checkpoint_prefix, option):
        """run_squad.py's window and answer flags: the run's unless given."""
        del run, checkpoint_prefix
        given = cfg.squad or SquadAnswerOptions()
        return {"squad": SquadAnswerOptions(**{
            f.name: type(f.default)(option(f.name, getattr(given, f.name)))
            for f in dataclasses.fields(SquadAnswerOptions)})}

    def check(self, spec) -> None:
        if spec.spm_model_file:
            raise ExportError("--task=squad needs a --vocab_file (WordPiece or tokenizer.json: "
                              "answers are cut from the context by the tokens' character "
                              "offsets), not --spm_model_file")
        try:
            spec.squad.validate(spec.max_seq_length)
        except ValueError as e:
            raise ExportError(str(e)) from None

    def build(self, bert_config, shapes, spec):
        del spec
        if "cls/squad/output_bias" not in shapes:
            raise ExportError("--task=squad: the checkpoint has no SQuAD head "
                              "(cls/squad/output_weights, cls/squad/output_bias): export a "
                              "run_squad.py run")
        return heads.SpanHead(bert_config)

    def outputs(self, head, bert_out, input_mask):
        del input_mask
        return head(bert_out.sequence_output)

    def module(self, tokenizer, spec):
        return SquadServing(tokenizer, spec.squad)

    def signatures(self, model, serve_ids):
        texts = [tf.TensorSpec([None], tf.string, name=n) for n in ("question", "context")]
        return {"serving_default": tf.function(lambda question, context: serve_squad(
                    model, question, context), input_signature=texts, autograph=False),
                "tokenize": tf.function(lambda question, context: _windows(
                    model, question, context), input_signature=texts, autograph=False),
                "serve_ids": serve_ids}


    def int8_signatures(self, side, model):
        """`tokenize` (the fp32 export's), `windows` (question, context -> every field the
        answer search reads, `WINDOW_FIELDS`, the windows padded to the longest) and `answers`
        (context, those fields, `start_logits`, `end_logits` float32 [W, L] -> the fp32
        export's `serving_default` outputs)."""
        del model
        texts = [tf.TensorSpec([None], tf.string, name=n) for n in ("question", "context")]
        fields = [tf.TensorSpec([None] * len(shape), dtype, name=name)
                  for name, (dtype, shape) in WINDOW_FIELDS.items()]
        logits = [tf.TensorSpec([None, None], tf.float32, name=n)
                  for n in ("start_logits", "end_logits")]

        def answers(context, *args):
            flat = dict(zip(list(WINDOW_FIELDS) + ["start_logits", "end_logits"], args))
            return side.task_module.answers(context, _unflatten(flat), flat["start_logits"],
                                            flat["end_logits"])

        return {"tokenize": tf.function(lambda question, context: _windows(
                    side, question, context), input_signature=texts, autograph=False),
                "windows": tf.function(lambda question, context: _flatten(
                    side.task_module.windows(question, context)), input_signature=texts,
                    autograph=False),
                "answers": tf.function(answers, input_signature=[texts[1], *fields, *logits],
                                       autograph=False)}


# The int8 export's `windows` outputs and `answers` inputs: `SquadServing.windows` with its
# context tokens as flat Tensors, name -> (dtype, one letter per dimension: W the windows, L
# their length, B the questions + 1, T the batch's context tokens); the ragged `doc_tokens`
# become their row splits and the values of its ids and character offsets.
WINDOW_FIELDS = {
    "input_ids": (tf.int32, "WL"), "input_mask": (tf.int32, "WL"),
    "segment_ids": (tf.int32, "WL"), "example_index": (tf.int32, "W"),
    "length": (tf.int64, "W"), "doc_offset": (tf.int64, "W"), "doc_length": (tf.int64, "W"),
    "doc_start": (tf.int64, "W"), "max_context": (tf.bool, "WL"),
    "doc_splits": (tf.int64, "B"), "doc_ids": (tf.int32, "T"), "char_start": (tf.int64, "T"),
    "char_end": (tf.int64, "T")}


def _flatten(windows):
    """`SquadServing.windows` -> `WINDOW_FIELDS` (dense Tensors only)."""
    doc_ids, char_start, char_end = windows["doc_tokens"]
    flat = {k: v for k, v in windows.items() if k != "doc_tokens"}
    flat.update(doc_splits=doc_ids.row_splits, doc_ids=doc_ids.values,
                char_start=char_start.values, char_end=char_end.values)
    return {name: tf.cast(flat[name], dtype) for name, (dtype, _) in WINDOW_FIELDS.items()}


def _unflatten(flat):
    """`WINDOW_FIELDS` -> the `SquadServing.windows` that `answers` reads."""
    windows = {k: v for k, v in flat.items() if k in WINDOW_FIELDS}
    splits = windows.pop("doc_splits")
    windows["doc_tokens"] = tuple(tf.RaggedTensor.from_row_splits(windows.pop(name), splits)
                                  for name in ("doc_ids", "char_start", "char_end"))
    return windows


def _windows(model, question, context):
    """The windows of (question, context) as run_squad.py builds them (padded to
    max_seq_length) and the question each belongs to."""
    windows = model.task_module.windows(question, context, model.tokenizer.max_seq_length)
    return {k: windows[k] for k in ("input_ids", "input_mask", "segment_ids", "example_index")}


def serve_squad(model, question, context):
    """Raw (question, context) -> the answer of each question over all its windows (`model`:
    a serving/export.py `ServingModel` of --task=squad)."""
    squad = model.task_module
    windows = squad.windows(question, context)
    length = tf.shape(windows["input_ids"])[1]
    cut = model.cut_length(length, model.tokenizer.max_seq_length)
    pad = [[0, 0], [0, cut - length]]
    # (With jit_compile the windows are padded up to the rounded length.)
    windows.update({k: tf.pad(windows[k], pad) for k in ("input_ids", "input_mask",
                                                         "segment_ids", "max_context")})
    logits = model.encode(windows["input_ids"], windows["input_mask"], windows["segment_ids"])
    return squad.answers(context, windows, logits["start_logits"], logits["end_logits"])


SERVING = SquadTaskServing()
