"""What a registered task (configs/registry.py) gives the SavedModel export: its head, its
outputs and its signatures. Each task's serving module (the registry entry's `serving`) defines
one `TaskServing`, as `SERVING`; serving/export.py builds every export through it and never asks
which task it is.
"""

from typing import Any, Dict, List, Optional

import tensorflow as tf


class ExportError(ValueError):
    """An export that cannot be made; the message names the flag or file."""


class TaskServing:
    """How one task turns encoder outputs into serving outputs (defaults: no head, the
    encoder's outputs unchanged, the raw-text signatures of one or two texts).

    Attributes:
      first_token_only: the outputs read the last layer at [CLS] only (the pooler).
      per_position: the outputs have a sequence dimension (`serve_ids` keeps its length).
      windows: a run's --doc_stride is served (each text read in windows, pooled by the head's
        `pool`).
      token_level: the head reads every token through the encoder's `token_head` (ModernBERT's
        head on every token, as its token and QA models; the last layer itself for BERT):
        `outputs` is given `sequence_output` after it.
      int8_outputs: the outputs (of `outputs`) the int8 export's LiteRT model returns
        (serving/int8.py); empty: the task has no int8 export.
    """
    first_token_only = False
    per_position = True
    windows = False
    token_level = False
    int8_outputs = ()

    def resolve(self, cfg, run: Dict[str, Any], checkpoint_prefix: str, option) -> Dict[str, Any]:
        """The `ResolvedExport` fields of this task from the export's config `cfg`, the run's
        run_config.json `run` and its checkpoint; `option(name, value)`: a flag's value unless
        the run recorded it and the flag was not given. Raises ExportError."""
        del cfg, run, checkpoint_prefix, option
        return {}

    def check(self, spec) -> None:
        """Raises ExportError for a resolved export (`spec`) this task cannot serve."""
        del spec

    def check_int8(self, spec) -> None:
        """Raises ExportError for a resolved export (`spec`) of this task that the int8 export
        cannot make (one line naming the flag)."""
        del spec

    def int8_signatures(self, side, model) -> Dict[str, Any]:
        """The signatures of the SavedModel beside the int8 export's LiteRT model: `side` is
        what it holds (serving/int8.py's `SideModule`: the tokenizer, `task_module`,
        `label_names`), `model` the `ServingModel` exported (read for Python values only)."""
        del side, model
        return {}

    def build(self, bert_config, shapes: Dict[str, Any], spec) -> Optional[tf.Module]:
        """The head (its variables under Google's names), from the checkpoint's variable
        `shapes`; None: the encoder alone."""
        del bert_config, shapes, spec
        return None

    def labels(self, head, spec) -> Optional[List[str]]:
        """The label names the outputs are given (a `label` output), or None."""
        del head, spec
        return None

    def outputs(self, head, bert_out, input_mask) -> Dict[str, tf.Tensor]:
        """The serving outputs of the encoder's `bert_out` (input_mask int32 [B, S])."""
        raise NotImplementedError()

    def module(self, tokenizer, spec) -> Optional[tf.Module]:
        """A module the task's signatures need besides the encoder and head (kept in the
        SavedModel), or None."""
        del tokenizer, spec
        return None

    def signatures(self, model, serve_ids) -> Dict[str, Any]:
        """The SavedModel's signatures of `model` (a `ServingModel`) besides `serve_ids`: the
        raw-text ones of one or two texts (see serving/export.py)."""
        text = tf.TensorSpec([None], tf.string, name="text_a")
        text_b = tf.TensorSpec([None], tf.string, name="text_b")
        return {
            "serving_default": tf.function(lambda text_a: model.serve_text(text_a),
                                           input_signature=[text], autograph=False),
            "serving_pair": tf.function(lambda text_a, text_b: model.serve_text(text_a, text_b),
                                        input_signature=[text, text_b], autograph=False),
            "tokenize": tf.function(lambda text_a: model.tokenize(text_a),
                                    input_signature=[text], autograph=False),
            "tokenize_pair": tf.function(lambda text_a, text_b: model.tokenize(text_a, text_b),
                                         input_signature=[text, text_b], autograph=False),
            "serve_ids": serve_ids,
        }
