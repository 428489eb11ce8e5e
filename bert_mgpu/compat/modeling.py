"""Google's `modeling.py` API (google-research/bert) over the project's model.

Code written against Google's module (`import modeling` or `from bert import modeling`) calls
`BertConfig.from_json_file`, `BertModel(config=, is_training=, input_ids=, input_mask=,
token_type_ids=, use_one_hot_embeddings=, scope=)`, the getters, and
`get_assignment_map_from_checkpoint` + `tf.train.init_from_checkpoint`. This module gives those
names Google's signatures and behaviour, computed by `bert_mgpu.model.modeling.BertModel` (same
numerics, same variable names):

* TF1 graph mode (`tf.compat.v1`, v2 behaviour off: placeholders, `Session`, `Saver`): the
  model's variables are created through TF1's variable store (`tf.compat.v1.get_variable`, under
  the caller's variable scope), so they are in the GLOBAL/TRAINABLE_VARIABLES collections with
  Google's names, a name -> name assignment map finds them, `reuse=True`/`AUTO_REUSE` scopes
  share them, and `convert_variables_to_constants` freezes them.
* TF2 eager: the variables are the model's own `tf.Variable`s (`BertModel.named_variables()`);
  each getter (and attribute) runs the model on the constructor's inputs with the weights as
  they are then, so weights loaded after construction are the ones used. There is no TF1
  variable store, so `get_assignment_map_from_checkpoint` maps checkpoint names to the variables
  themselves, which `tf.compat.v1.train.init_from_checkpoint` loads at once.

`use_one_hot_embeddings` is accepted and ignored: a gather and Google's one-hot matmul give the
same values. Dropout follows `is_training` (Google: the config's dropout set to 0 otherwise).
"""

import collections
import contextlib
import re

import tensorflow as tf

from bert_mgpu.compat.google_layers import (
    attention_layer,
    dropout,
    embedding_lookup,
    embedding_postprocessor,
    layer_norm,
    transformer_model,
)
from bert_mgpu.model import modeling as _model
from bert_mgpu.model.bert_config import BertConfig

tf1 = tf.compat.v1

# Graph collection of the variables whose gradient Google's model computes dense where the
# project's is an IndexedSlices (see BertModel).
DENSE_GRADIENTS = "bert_mgpu_compat_dense_gradients"

# Google's helpers whose contract the project's model keeps unchanged.
gelu = _model.gelu
get_activation = _model.get_activation
get_shape_list = _model.get_shape_list
reshape_to_matrix = _model.reshape_to_matrix
reshape_from_matrix = _model.reshape_from_matrix
create_attention_mask_from_input_mask = _model.create_attention_mask_from_input_mask

__all__ = ["BertConfig", "BertModel", "gelu", "get_activation",
           "get_assignment_map_from_checkpoint", "dropout", "layer_norm",
           "layer_norm_and_dropout", "create_initializer",
           "get_shape_list", "reshape_to_matrix", "reshape_from_matrix", "assert_rank",
           "create_attention_mask_from_input_mask", "embedding_lookup",
           "embedding_postprocessor", "attention_layer", "transformer_model"]


@contextlib.contextmanager
def _through_variable_store():
    """Inside: a `tf.Variable(initial_value, name=...)` the model makes is created (or, under a
    reusing scope, found) by `tf.compat.v1.get_variable(name, initializer=initial_value)`.

    Only in graph mode; TF1's store is what `init_from_checkpoint`'s name maps, `AUTO_REUSE` and
    Google's users' code look variables up in. The store's own `tf.Variable` call passes through.
    """
    busy = []

    def creator(next_creator, **kwargs):
        if busy:
            return next_creator(**kwargs)
        busy.append(True)
        try:
            initial = kwargs["initial_value"]
            initial = initial() if callable(initial) else initial
            return tf1.get_variable(kwargs["name"], initializer=initial,
                                    trainable=kwargs.get("trainable", True))
        finally:
            busy.pop()

    with tf1.variable_creator_scope(creator):
        yield


class BertModel:
    """BERT model ("Bidirectional Encoder Representations from Transformers"), Google's API.

    Example usage (Google's)::

      input_ids = tf.placeholder(tf.int32, [None, 128])
      config = modeling.BertConfig.from_json_file("bert_config.json")
      model = modeling.BertModel(config=config, is_training=False, input_ids=input_ids)
      pooled = model.get_pooled_output()  # float32 [batch_size, hidden_size]
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None):
        """Builds the model on the given inputs (Google's constructor).

        Args:
          config: `BertConfig`.
          is_training: bool; dropout is applied only when True.
          input_ids: int32 Tensor of shape [batch_size, seq_length].
          input_mask: optional int32 Tensor [batch_size, seq_length] (1 = token, 0 = padding).
          token_type_ids: optional int32 Tensor [batch_size, seq_length].
          use_one_hot_embeddings: accepted for Google's signature; the values are the same.
          scope: variable scope name; default "bert" (Google's).

        Raises:
          ValueError: the config is invalid or the sequence is longer than
            `max_position_embeddings`.
        """
        del use_one_hot_embeddings  # same values either way
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        name = scope or "bert"
        self.config = config
        self._graph_outputs = None
        self._inputs = (input_ids, input_mask, token_type_ids)
        self._training = bool(is_training)
        if tf.executing_eagerly():
            self._model = _model.BertModel(config, scope=name)
        else:
            with _through_variable_store():
                self._model = _model.BertModel(config, scope=name)
            # Google looks the token types up by a one-hot matmul (a dense gradient); the
            # project's model gathers (an IndexedSlices one). create_optimizer densifies the
            # gradients of this collection, so clipping counts them as Google's does.
            table = self._model.token_type_embeddings
            if not any(table is v for v in tf1.get_collection(DENSE_GRADIENTS)):
                tf1.add_to_collection(DENSE_GRADIENTS, table)
            with tf1.name_scope(name):
                self._graph_outputs = self._model(input_ids, input_mask, token_type_ids,
                                                  training=self._training)
        self.embedding_table = self._model.word_embeddings

    def _outputs(self):
        """The graph's outputs; in eager, a run with the current weights."""
        if self._graph_outputs is not None:
            return self._graph_outputs
        return self._model(*self._inputs, training=self._training)

    @property
    def embedding_output(self):
        return self._outputs().embedding_output

    @property
    def all_encoder_layers(self):
        return list(self._outputs().all_encoder_layers)

    @property
    def sequence_output(self):
        return self._outputs().sequence_output

    @property
    def pooled_output(self):
        return self._outputs().pooled_output

    def get_pooled_output(self):
        """float Tensor [batch_size, hidden_size]: tanh(dense(first token))."""
        return self.pooled_output

    def get_sequence_output(self):
        """float Tensor [batch_size, seq_length, hidden_size]: the last encoder layer."""
        return self.sequence_output

    def get_all_encoder_layers(self):
        """list of float Tensors [batch_size, seq_length, hidden_size], one per layer."""
        return self.all_encoder_layers

    def get_embedding_output(self):
        """float Tensor [batch_size, seq_length, hidden_size]: embeddings after LayerNorm and
        dropout (the encoder's input)."""
        return self.embedding_output

    def get_embedding_table(self):
        """The word embeddings variable [vocab_size, hidden_size]."""
        return self.embedding_table

    def named_variables(self):
        """Google's name -> variable (the project's addition; the same objects TF1's store
        lists in graph mode)."""
        return self._model.named_variables()


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """Google's: the variables of `tvars` whose names are in the checkpoint.

    Args:
      tvars: list of variables (e.g. `tf.trainable_variables()`).
      init_checkpoint: checkpoint prefix.

    Returns:
      (assignment_map, initialized_variable_names): OrderedDict checkpoint name -> the same
      name (in eager, -> the variable), and dict of `name` and `name:0` -> 1 for each one
      matched.
    """
    name_to_variable = collections.OrderedDict()
    for var in tvars:
        name = var.name
        m = re.match("^(.*):\\d+$", name)
        if m is not None:
            name = m.group(1)
        name_to_variable[name] = var
    assignment_map = collections.OrderedDict()
    initialized_variable_names = {}
    for name, _ in tf.train.list_variables(init_checkpoint):
        if name not in name_to_variable:
            continue
        # Eager code has no TF1 variable store to look a name up in: the variable itself.
        assignment_map[name] = name_to_variable[name] if tf.executing_eagerly() else name
        initialized_variable_names[name] = 1
        initialized_variable_names[name + ":0"] = 1
    return assignment_map, initialized_variable_names


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
    """Google's: `layer_norm` then `dropout`."""
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def create_initializer(initializer_range=0.02):
    """Google's: a truncated normal initializer with the given stddev."""
    return tf1.truncated_normal_initializer(stddev=initializer_range)


def assert_rank(tensor, expected_rank, name=None):
    """Google's: raises ValueError unless `tensor` has one of the expected ranks."""
    expected = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    actual = tensor.shape.ndims
    if actual not in expected:
        raise ValueError(f"For the tensor `{name or tensor.name}`, the actual rank `{actual}` "
                         f"is not equal to the expected rank `{sorted(expected)}`")
