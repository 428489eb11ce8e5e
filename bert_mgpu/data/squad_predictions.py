"""SQuAD post-processing: Google's `write_predictions`, from the features' logits to answers.

Given each feature's start and end logits, `compute_predictions` gives what Google's
`run_squad.write_predictions` writes, value for value, and `write_predictions` writes the same
files byte for byte (`predictions.json`, `nbest_predictions.json`, for SQuAD v2.0
`null_odds.json`; `json.dumps(indent=4)` plus a newline), each atomically (temporary file, then
rename). The arithmetic is Google's, in Python floats and in Google's order, so the
probabilities and score differences are the same doubles. The answers' text is projected back
onto the original words with Google's `BasicTokenizer` (`get_final_text`), which is why this lives
with the features (data/squad_data.py) and not with the scores (metrics/squad.py).

One deliberate difference: on SQuAD v2.0, when no span of any window is a valid answer, Google's
code fails (`best_non_null_entry` is None); here, as in Hugging Face's `compute_predictions_logits`,
a nonce candidate "empty" with logits 0/0 is put first, so the null answer wins unless the
threshold says otherwise.
"""

import collections
import json
import math
import os
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from absl import logging

from bert_mgpu import tokenization


class RawResult(NamedTuple):
    """The model's output for one feature.

    Attributes:
      unique_id: int, the feature's `unique_id`.
      start_logits, end_logits: float sequences (or arrays) of length max_seq_length.
    """
    unique_id: int
    start_logits: Sequence[float]
    end_logits: Sequence[float]


class PredictionError(ValueError):
    """Results that do not fit the features (a missing unique id); the message names it."""


# ---------------------------------------------------------------------------------------------
# Post-processing

def get_best_indexes(logits: Sequence[float], n_best_size: int) -> List[int]:
    """Indexes of the `n_best_size` largest logits, largest first; ties in index order."""
    # sorted(..., reverse=True) is stable: equal logits keep index order, as Google's.
    order = sorted(range(len(logits)), key=logits.__getitem__, reverse=True)
    return order[:n_best_size]


def compute_softmax(scores: Sequence[float]) -> List[float]:
    """Softmax over raw scores, in Google's order of operations (so the same doubles)."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = []
    total_sum = 0.0
    for score in scores:
        x = math.exp(score - max_score)
        exp_scores.append(x)
        total_sum += x
    return [x / total_sum for x in exp_scores]


_BASIC_TOKENIZERS: Dict[bool, tokenization.BasicTokenizer] = {}


def _strip_spaces(text: str) -> Tuple[str, Dict[int, int]]:
    """`text` without " ", and a map: index in the stripped text -> index in `text`."""
    ns_chars = []
    ns_to_s_map = {}
    for i, c in enumerate(text):
        if c == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool,
                   verbose_logging: bool = False) -> str:
    """Projects a predicted (normalised, de-WordPieced) text back onto the original words.

    Google's heuristic: `orig_text` (the original words the predicted tokens came from) is
    basic-tokenized; if `pred_text` occurs in that and both agree character for character once
    spaces are removed, the matching characters of `orig_text` are returned (so "steve smith" in
    "Steve Smith's" gives "Steve Smith", with the original casing and accents); otherwise
    `orig_text` itself.

    Args:
      pred_text: str, the predicted WordPieces joined, "##" removed.
      orig_text: str, the original whitespace tokens of the span joined by " ".
      do_lower_case: bool, the tokenizer's casing.
      verbose_logging: log why the projection fell back to `orig_text`.
    """
    tokenizer = _BASIC_TOKENIZERS.get(do_lower_case)
    if tokenizer is None:
        tokenizer = _BASIC_TOKENIZERS[do_lower_case] = tokenization.BasicTokenizer(
            do_lower_case=do_lower_case)
    tok_text = " ".join(tokenizer.tokenize(orig_text))

    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'",
                         orig_ns_text, tok_ns_text)
        return orig_text

    # The characters are assumed aligned one to one once spaces are gone.
    tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}
    orig_start_position = None
    if start_position in tok_s_to_ns_map:
        orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map[start_position])
    if orig_start_position is None:
        if verbose_logging:
            logging.info("Couldn't map start position")
        return orig_text
    orig_end_position = None
    if end_position in tok_s_to_ns_map:
        orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map[end_position])
    if orig_end_position is None:
        if verbose_logging:
            logging.info("Couldn't map end position")
        return orig_text
    return orig_text[orig_start_position:(orig_end_position + 1)]


class _Prelim(NamedTuple):
    feature_index: int
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float


class _NBest(NamedTuple):
    text: str
    start_logit: float
    end_logit: float


def _as_floats(logits) -> List[float]:
    # numpy arrays -> Python floats (float32 values exactly), as Google's `float(x)` per value.
    if hasattr(logits, "tolist"):
        return [float(x) for x in logits.tolist()]
    return [float(x) for x in logits]


def decodes_original(tokenizer) -> bool:
    """Whether `tokenizer.convert_tokens_to_string` gives the original characters (byte-level
    BPE: `compute_predictions`' `decodes_original`), not normalized WordPieces."""
    return isinstance(tokenizer, tokenization.BpeTokenizer)


def _detokenize_wordpieces(tokens: Sequence[str]) -> str:
    """Google's: WordPieces " ##"-joined, whitespace cleaned."""
    text = " ".join(tokens).replace(" ##", "").replace("##", "")
    return " ".join(text.strip().split())


def compute_predictions(all_examples, all_features, all_results: Sequence[RawResult],
                        n_best_size: int, max_answer_length: int, do_lower_case: bool,
                        version_2_with_negative: bool = False,
                        null_score_diff_threshold: float = 0.0, verbose_logging: bool = False,
                        detokenize: Optional[Callable[[Sequence[str]], str]] = None,
                        decodes_original: bool = False
                        ) -> Tuple[Dict[str, str], Dict[str, List[Dict]], Dict[str, float]]:
    """Google's `write_predictions`, returning what it writes.

    For every example: the `n_best_size` best start and end logits of each of its windows give
    candidate spans (inside the window's document part, starting where the window has the
    token's maximum context, end not before start, at most `max_answer_length` tokens), sorted by
    start + end logit; the first `n_best_size` distinct texts (projected back onto the original
    text by `get_final_text`) form the n-best list with softmax probabilities. SQuAD v2.0 adds
    the null answer (the [CLS] logits of the window where they sum lowest) and predicts "" when
    null score - best non-null score > `null_score_diff_threshold`.

    Args:
      all_examples: list of `SquadExample` (read with is_training False).
      all_features: list of `SquadFeature` of those examples.
      all_results: `RawResult`s, one per feature (any order).
      n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
      null_score_diff_threshold, verbose_logging: Google's flags.
      detokenize: a span's tokens -> its text, before `get_final_text` projects it onto the
        original words: the tokenizer's `convert_tokens_to_string` (byte-level BPE decodes
        its bytes); None = Google's WordPiece rule (" ##" joined).
      decodes_original: `detokenize` gives the original characters (byte-level BPE, whose
        tokens hold the text's own bytes): a text found as it is in the original words is the
        answer. `get_final_text` would look for it in the basic-tokenized words, where
        punctuation stands apart ("Normandy , France"), and fall back to the whole words for
        any answer with punctuation in it. Otherwise Google's projection.

    Returns:
      predictions: OrderedDict qas_id -> answer text.
      nbest: OrderedDict qas_id -> list of OrderedDicts (text, probability, start_logit,
        end_logit).
      null_odds: OrderedDict qas_id -> null score - best non-null score (v2.0 only; empty
        otherwise).

    Raises:
      PredictionError: a feature has no result.
    """
    example_index_to_features = collections.defaultdict(list)
    for feature in all_features:
        example_index_to_features[feature.example_index].append(feature)
    unique_id_to_result = {int(result.unique_id): result for result in all_results}

    all_predictions = collections.OrderedDict()
    all_nbest_json = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()

    for example_index, example in enumerate(all_examples):
        features = example_index_to_features[example_index]
        prelim_predictions = []
        # The null answer's score: the lowest [CLS] start + end over the windows.
        score_null = 1000000
        min_null_feature_index = 0
        null_start_logit = 0
        null_end_logit = 0
        for feature_index, feature in enumerate(features):
            result = unique_id_to_result.get(feature.unique_id)
            if result is None:
                raise PredictionError(f"no result for feature unique_id {feature.unique_id} "
                                      f"(question {example.qas_id})")
            start_logits = _as_floats(result.start_logits)
            end_logits = _as_floats(result.end_logits)
            start_indexes = get_best_indexes(start_logits, n_best_size)
            end_indexes = get_best_indexes(end_logits, n_best_size)
            if version_2_with_negative:
                feature_null_score = start_logits[0] + end_logits[0]
                if feature_null_score < score_null:
                    score_null = feature_null_score
                    min_null_feature_index = feature_index
                    null_start_logit = start_logits[0]
                    null_end_logit = end_logits[0]
            num_tokens = len(feature.tokens)
            token_to_orig_map = feature.token_to_orig_map
            for start_index in start_indexes:
                # Invalid spans (in the question or padding, not the start's max-context window,
                # reversed, too long) are dropped.
                if (start_index >= num_tokens or start_index not in token_to_orig_map
                        or not feature.token_is_max_context.get(start_index, False)):
                    continue
                for end_index in end_indexes:
                    if end_index >= num_tokens or end_index not in token_to_orig_map:
                        continue
                    if end_index < start_index:
                        continue
                    if end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim_predictions.append(_Prelim(feature_index, start_index, end_index,
                                                      start_logits[start_index],
                                                      end_logits[end_index]))
        if version_2_with_negative:
            prelim_predictions.append(_Prelim(min_null_feature_index, 0, 0, null_start_logit,
                                              null_end_logit))
        # Stable: equal sums keep the order they were found in (Google's).
        prelim_predictions.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)

        seen_predictions = set()
        nbest = []
        for pred in prelim_predictions:
            if len(nbest) >= n_best_size:
                break
            feature = features[pred.feature_index]
            if pred.start_index > 0:  # a non-null prediction
                tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
                orig_doc_start = feature.token_to_orig_map[pred.start_index]
                orig_doc_end = feature.token_to_orig_map[pred.end_index]
                orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
                tok_text = (detokenize or _detokenize_wordpieces)(tok_tokens)
                orig_text = " ".join(orig_tokens)
                final_text = (tok_text if decodes_original and tok_text in orig_text else
                              get_final_text(tok_text, orig_text, do_lower_case,
                                             verbose_logging))
                if final_text in seen_predictions:
                    continue
                seen_predictions.add(final_text)
            else:
                final_text = ""
                seen_predictions.add(final_text)
            nbest.append(_NBest(final_text, pred.start_logit, pred.end_logit))

        if version_2_with_negative:
            if "" not in seen_predictions:
                nbest.append(_NBest("", null_start_logit, null_end_logit))
            if not any(entry.text for entry in nbest):
                # Google fails here (no non-null candidate); Hugging Face adds this nonce.
                nbest.insert(0, _NBest("empty", 0.0, 0.0))
        # In rare cases no candidate is valid: a nonce prediction, as Google.
        if not nbest:
            nbest.append(_NBest("empty", 0.0, 0.0))

        total_scores = [entry.start_logit + entry.end_logit for entry in nbest]
        best_non_null_entry = next((entry for entry in nbest if entry.text), None)
        probs = compute_softmax(total_scores)
        nbest_json = []
        for i, entry in enumerate(nbest):
            output = collections.OrderedDict()
            output["text"] = entry.text
            output["probability"] = probs[i]
            output["start_logit"] = entry.start_logit
            output["end_logit"] = entry.end_logit
            nbest_json.append(output)

        if not version_2_with_negative:
            all_predictions[example.qas_id] = nbest_json[0]["text"]
        else:
            score_diff = (score_null - best_non_null_entry.start_logit
                          - best_non_null_entry.end_logit)
            scores_diff_json[example.qas_id] = score_diff
            if score_diff > null_score_diff_threshold:
                all_predictions[example.qas_id] = ""
            else:
                all_predictions[example.qas_id] = best_non_null_entry.text
        all_nbest_json[example.qas_id] = nbest_json
    return all_predictions, all_nbest_json, scores_diff_json


def _write_text_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` through a temporary file renamed into place."""
    tmp = f"{path}.tmp-{os.getpid()}"
    if "://" in path:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  (gs:// etc.)
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(text)
        tf.io.gfile.rename(tmp, path, overwrite=True)
        return
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_predictions(all_examples, all_features, all_results: Sequence[RawResult],
                      n_best_size: int, max_answer_length: int, do_lower_case: bool,
                      output_prediction_file: str, output_nbest_file: str,
                      output_null_log_odds_file: Optional[str],
                      version_2_with_negative: bool = False,
                      null_score_diff_threshold: float = 0.0, verbose_logging: bool = False,
                      detokenize: Optional[Callable[[Sequence[str]], str]] = None,
                      decodes_original: bool = False
                      ) -> Tuple[Dict[str, str], Dict[str, List[Dict]], Dict[str, float]]:
    """Google's `write_predictions`: computes (`compute_predictions`) and writes the files.

    `output_null_log_odds_file` is written for SQuAD v2.0 only. Returns what
    `compute_predictions` returns (`detokenize`, `decodes_original`: as there).
    """
    if version_2_with_negative and not output_null_log_odds_file:
        raise ValueError("SQuAD v2.0 predictions need a null_odds.json path")
    logging.info("Writing predictions to: %s", output_prediction_file)
    logging.info("Writing nbest to: %s", output_nbest_file)
    predictions, nbest, null_odds = compute_predictions(
        all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
        version_2_with_negative, null_score_diff_threshold, verbose_logging, detokenize,
        decodes_original)
    _write_text_atomic(output_prediction_file, json.dumps(predictions, indent=4) + "\n")
    _write_text_atomic(output_nbest_file, json.dumps(nbest, indent=4) + "\n")
    if version_2_with_negative:
        _write_text_atomic(output_null_log_odds_file, json.dumps(null_odds, indent=4) + "\n")
    return predictions, nbest, null_odds
