"""Output heads with Google's variable scopes: masked LM, next sentence, classifier.

Heads only: the trainer tasks that combine `BertModel` with them live in `tasks/`.

- `MaskedLMHead`: `cls/predictions/transform/dense/{kernel,bias}`,
  `cls/predictions/transform/LayerNorm/{beta,gamma}`, `cls/predictions/output_bias`; the output
  projection is the transposed word-embedding table (tied weights). Computed only at the masked
  positions.
- `NextSentenceHead`: `cls/seq_relationship/output_weights` [2, hidden],
  `cls/seq_relationship/output_bias` [2].
- `ClassifierHead`: root-level `output_weights` [num_labels, hidden] and `output_bias`, as
  Google's `run_classifier.create_model`.
- `TokenTaggingHead` (run_ner.py): `cls/ner/output_weights` [num_tags, hidden] and
  `cls/ner/output_bias` [num_tags], the classifier's layout under a scope of its own, so a
  tagging checkpoint never collides with (or is mistaken for) a classifier's root-level head.

Losses are returned with their parts (sum of weighted per-example losses and the weight total) so
that a task can normalise by the *global* count of masked tokens, which keeps N towers equal to
one device on the same global batch.
"""

from typing import Dict

import tensorflow as tf

from bert_mgpu.model import execution, modeling

# Google adds this to the masked-LM weight total so a batch without masked tokens is not 0/0.
MASKED_LM_DENOMINATOR_EPSILON = 1e-5
# run_classifier.create_model hard-codes keep_prob=0.9 on the pooled output in training.
CLASSIFIER_DROPOUT_PROB = 0.1


@tf.function(jit_compile=True, autograph=False)
def _xent_forward(products, bias):
    """Per row of logits = products + bias, in float32: the largest logit and the sum of
    exp(logit - largest); one XLA computation."""
    logits = tf.cast(products, tf.float32) + bias
    top = tf.reduce_max(logits, axis=-1)
    return top, tf.reduce_sum(tf.exp(logits - top[:, None]), axis=-1)  # >= 1: exp(0) is in it


@tf.function(jit_compile=True, autograph=False)
def _xent_backward(dy, products, bias, label_ids, top, total):
    """The gradients of the loss for products and bias, recomputing the logits:
    (softmax(logits) - one_hot(label)) * dy, and its column sum; one XLA computation. The
    softmax is exp(logit - largest) / sum, as the forward: logit - largest is exact in float32,
    where logit - logsumexp loses digits when the logits are large."""
    logits = tf.cast(products, tf.float32) + bias
    one_hot = tf.one_hot(label_ids, tf.shape(logits)[1], dtype=tf.float32)
    grad = tf.exp(logits - top[:, None]) * (dy / total)[:, None] - one_hot * dy[:, None]
    return tf.cast(grad, products.dtype), tf.reduce_sum(grad, axis=0)


def vocabulary_cross_entropy(products, bias, label_ids):
    """-log softmax(products + bias)[label] per row: Google's -sum(one_hot * log_probs), and its
    gradient (softmax - one_hot) * dloss for the products and the bias, in two XLA computations.

    Args:
      products: float Tensor [N, V], the decoder's matmul (any compute dtype).
      bias: float32 Tensor [V], the output bias.
      label_ids: int Tensor [N], each in [0, V).

    Returns:
      float32 Tensor [N].

    TensorFlow runs the same as ~8 passes over the [N, V] logits (bias add, max, subtract, exp,
    sum, the gradient's multiply, the one-hot's subtraction, the bias gradient's column sum);
    compiled, the forward reads the products twice (max, then the exponentials' sum) and writes
    nothing of their size, and the backward is one pass writing the gradient and its column sum.
    Used in the trainer's towers (`execution.current().in_trainer_towers`), where fewer passes
    over the large [N, V] logits speed up the loss's forward and backward and the pretraining
    update (docs/benchmarks.md, "The masked-LM loss fused by XLA"). The values are Google's
    formula's to float32 rounding (tests/test_modeling.py).
    """
    label_ids = tf.cast(label_ids, tf.int32)
    bias = tf.cast(bias, tf.float32)

    @tf.custom_gradient
    def xent(products, bias):
        top, total = _xent_forward(products, bias)
        # The label's logit by TensorFlow's gather (N values), which on CPU rejects a label
        # outside the vocabulary where XLA's would clamp it.
        picked = tf.cast(tf.gather(products, label_ids, batch_dims=1), tf.float32) \
            + tf.gather(bias, label_ids)
        loss = top + tf.math.log(total) - picked

        def grad(dy):
            return _xent_backward(dy, products, bias, label_ids, top, total)

        return loss, grad

    return xent(products, bias)


class MaskedLMHead(tf.Module):
    """Google's `get_masked_lm_output`: transform, LayerNorm, tied decoder, output bias."""

    def __init__(self, config, scope="cls/predictions"):
        super().__init__(name=None)
        self.config = config
        self._store = modeling.ParameterStore()
        # The transform maps to the width of the word embeddings (ALBERT's embedding_size; the
        # hidden size in BERT), so the tied decoder is a plain product with the table.
        h, e = config.hidden_size, config.embedding_size
        # ModernBERT's head: no transform bias (`head_bias`), its LayerNorm options.
        self.transform = modeling.Dense(
            self._store, f"{scope}/transform/dense", h, e, config.initializer_range,
            activation=modeling.get_activation(config.hidden_act), use_bias=config.head_bias)
        self.layer_norm = modeling.LayerNorm.for_config(self._store, f"{scope}/transform", e,
                                                         config)
        # One bias per vocabulary entry; the weights are the word embeddings.
        self.output_bias = self._store.add(f"{scope}/output_bias", [config.vocab_size],
                                           modeling.zeros_initializer)

    def named_variables(self):
        return self._store.as_dict()

    def __call__(self, sequence_output, embedding_table, positions, label_ids=None,
                 label_weights=None) -> Dict[str, tf.Tensor]:
        """Log-probabilities at the masked positions and, given labels, the loss.

        Args:
          sequence_output: float Tensor [B, S, H].
          embedding_table: float Variable [vocab_size, E] (the model's word embeddings; E is
            the hidden size H unless the config factorizes the embeddings).
          positions: int32 Tensor [B, P], the masked positions (padding entries are 0).
          label_ids: optional int32 Tensor [B, P], the original token ids.
          label_weights: optional float Tensor [B, P], 1.0 for real predictions, 0.0 for padding.

        Returns:
          dict with `log_probs` (float32 [B*P, vocab_size]), `logits` (the same before the
          softmax, compute dtype) and, when labels are given,
          `per_example_loss` ([B*P]), `numerator` (scalar, sum of weighted losses),
          `denominator` (scalar, sum of weights) and `loss` = numerator / (denominator + 1e-5),
          Google's per-batch normalisation.
        """
        input_tensor = modeling.gather_indexes(sequence_output, positions)  # [B*P, H]
        input_tensor = self.transform(input_tensor)  # [B*P, E]
        input_tensor = self.layer_norm(input_tensor)
        products = tf.matmul(input_tensor, tf.cast(embedding_table, input_tensor.dtype),
                             transpose_b=True)  # [B*P, V]
        bias = execution.current().value(self.output_bias)
        logits = tf.nn.bias_add(products, tf.cast(bias, products.dtype))
        # Only computed where used (eval, predictions): a traced train step prunes it.
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        result = {"log_probs": log_probs, "logits": logits}
        if label_ids is None:
            return result
        label_ids = tf.reshape(label_ids, [-1])
        label_weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
        if execution.current().in_trainer_towers:
            per_example_loss = vocabulary_cross_entropy(products, bias, label_ids)
        else:  # evaluation: Google's formula, nothing compiled
            per_example_loss = -tf.gather(log_probs, tf.cast(label_ids, tf.int32), batch_dims=1)
        numerator = tf.reduce_sum(label_weights * per_example_loss)
        denominator = tf.reduce_sum(label_weights)
        result.update(
            per_example_loss=per_example_loss,
            numerator=numerator,
            denominator=denominator,
            loss=numerator / (denominator + MASKED_LM_DENOMINATOR_EPSILON))
        return result


class NextSentenceHead(tf.Module):
    """Google's `get_next_sentence_output`: a 2-way classifier on the pooled output."""

    def __init__(self, config, scope="cls/seq_relationship"):
        super().__init__(name=None)
        self._store = modeling.ParameterStore()
        # Stored [2, H] and applied transposed, as Google does.
        self.output_weights = self._store.add(
            f"{scope}/output_weights", [2, config.hidden_size],
            modeling.truncated_normal_initializer(config.initializer_range))
        self.output_bias = self._store.add(f"{scope}/output_bias", [2],
                                           modeling.zeros_initializer)

    def named_variables(self):
        return self._store.as_dict()

    def __call__(self, pooled_output, labels=None) -> Dict[str, tf.Tensor]:
        """Args: pooled_output float [B, H]; labels optional int32 [B] (0 = IsNext, 1 = random).

        Returns:
          dict with `log_probs` float32 [B, 2] and, given labels, `per_example_loss` [B] and
          `loss` (the mean over the batch).
        """
        context = execution.current()
        return _softmax_classifier(pooled_output, context.value(self.output_weights),
                                   context.value(self.output_bias), labels)


class ClassifierHead(tf.Module):
    """Google's `run_classifier.create_model` head: dropout, then a linear layer, on the pooled
    output; variables at the root: `output_weights` [num_labels, H], `output_bias` [num_labels]
    (under `scope/` when a scope is given: one head per task of a multi-task run)."""

    def __init__(self, config, num_labels, dropout_prob=None, input_width=None,
                 scope: str = ""):
        """dropout_prob: None = the config's `classifier_dropout` (ModernBERT's), else
        Google's CLASSIFIER_DROPOUT_PROB. input_width: the width of the features it reads
        (default the hidden size H; `classifier_input_width` gives it per --classifier_input).
        scope: the variables' prefix ("" = Google's root-level names)."""
        super().__init__(name=None)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.num_labels = num_labels
        if dropout_prob is None:
            dropout_prob = config.classifier_dropout
        self.dropout_prob = CLASSIFIER_DROPOUT_PROB if dropout_prob is None else dropout_prob
        self._store = modeling.ParameterStore()
        prefix = f"{scope}/" if scope else ""
        self.output_weights = self._store.add(
            f"{prefix}output_weights", [num_labels, input_width or config.hidden_size],
            modeling.truncated_normal_initializer(0.02))  # Google: stddev=0.02, not the config's
        self.output_bias = self._store.add(f"{prefix}output_bias", [num_labels],
                                           modeling.zeros_initializer)

    def named_variables(self):
        return self._store.as_dict()

    def __call__(self, pooled_output, labels=None, training=False) -> Dict[str, tf.Tensor]:
        """Args: pooled_output float [B, H]; labels optional int32 [B]; training Python bool.

        Returns:
          dict with `logits` [B, num_labels], `probabilities`, `log_probs` and, given labels,
          `per_example_loss` [B] and `loss` (mean).
        """
        output_layer = modeling.dropout(pooled_output, self.dropout_prob, training)
        context = execution.current()
        return _softmax_classifier(output_layer, context.value(self.output_weights),
                                   context.value(self.output_bias), labels)

    def logits(self, features, training=False) -> tf.Tensor:
        """Dropout then the linear layer, as `__call__`, without the softmax (regression and
        multi-label heads). features float [B, W] -> float32 [B, num_labels]."""
        output_layer = modeling.dropout(features, self.dropout_prob, training)
        context = execution.current()
        weights = context.value(self.output_weights)
        logits = tf.matmul(output_layer, tf.cast(weights, output_layer.dtype), transpose_b=True)
        bias = context.value(self.output_bias)
        return tf.cast(tf.nn.bias_add(logits, tf.cast(bias, logits.dtype)), tf.float32)


def _softmax_classifier(features, output_weights, output_bias, labels):
    """logits = features @ output_weights^T + bias; log-softmax; mean cross-entropy."""
    logits = tf.matmul(features, tf.cast(output_weights, features.dtype), transpose_b=True)
    logits = tf.cast(tf.nn.bias_add(logits, tf.cast(output_bias, logits.dtype)), tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    result = {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
              "log_probs": log_probs}
    if labels is not None:
        labels = tf.reshape(labels, [-1])
        per_example_loss = -tf.gather(log_probs, labels, axis=1, batch_dims=1)
        result.update(per_example_loss=per_example_loss,
                      loss=tf.reduce_mean(per_example_loss))
    return result


# ---------------------------------------------------------------------------------------------
# SQuAD

# SpanHead's logit of a padding position when the padding is left out (as BERT's attention
# mask adder: exp of it underflows to 0 in float32 next to any real logit).
PADDING_SPAN_LOGIT = -10000.0


class SpanHead(tf.Module):
    """Google's `run_squad.create_model` head: one linear layer from every position's hidden
    state to a start and an end logit. Variables `cls/squad/output_weights` [2, H] (truncated
    normal, stddev 0.02 whatever the config says, as Google) and `cls/squad/output_bias` [2].
    Dropout before it only with the config's `classifier_dropout` (ModernBERT's
    `ModernBertForQuestionAnswering`); Google's head has none."""

    def __init__(self, config, scope="cls/squad"):
        super().__init__(name=None)
        self.dropout_prob = config.classifier_dropout or 0.0
        self._store = modeling.ParameterStore()
        self.output_weights = self._store.add(
            f"{scope}/output_weights", [2, config.hidden_size],
            modeling.truncated_normal_initializer(0.02))
        self.output_bias = self._store.add(f"{scope}/output_bias", [2],
                                           modeling.zeros_initializer)

    def named_variables(self):
        return self._store.as_dict()

    def __call__(self, sequence_output, start_positions=None, end_positions=None,
                 input_mask=None, training=False) -> Dict[str, tf.Tensor]:
        """Args:
          sequence_output: float Tensor [B, S, H] (the encoder's last layer).
          start_positions, end_positions: optional int32 Tensors [B] or [B, 1], the answer's
            first and last token (0, the [CLS] position, when the window has no answer).
          input_mask: optional int Tensor [B, S]: given, the logits of the padding (mask 0) are
            PADDING_SPAN_LOGIT, so the softmax runs over the real tokens only (exp underflows
            to 0) and they rank last; a batch cut after its longest window then gives the
            logits and loss of the padded one. None: Google's, over every position.
          training: Python bool (the dropout of `classifier_dropout`, if any).

        Returns:
          dict with `start_logits`, `end_logits` (float32 [B, S]) and, given positions,
          `per_example_loss` [B] = (start cross-entropy + end cross-entropy) / 2 and `loss`, its
          mean over the batch (Google's `(start_loss + end_loss) / 2.0`).
        """
        sequence_output = modeling.dropout(sequence_output, self.dropout_prob, training,
                                           seq_view=(modeling.SEQ, sequence_output.shape[-1]))
        context = execution.current()
        weights = context.value(self.output_weights)
        logits = tf.einsum("bsh,kh->bsk", sequence_output,
                           tf.cast(weights, sequence_output.dtype))  # [B, S, 2]
        logits = tf.nn.bias_add(logits, tf.cast(context.value(self.output_bias), logits.dtype))
        logits = tf.cast(logits, tf.float32)
        if input_mask is not None:
            logits = tf.where(tf.equal(input_mask, 0)[:, :, None], PADDING_SPAN_LOGIT, logits)
        result = {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
        if start_positions is None:
            return result
        per_example_loss = (_position_cross_entropy(result["start_logits"], start_positions)
                            + _position_cross_entropy(result["end_logits"], end_positions)) / 2.0
        result.update(per_example_loss=per_example_loss,
                      loss=tf.reduce_mean(per_example_loss))
        return result


def _position_cross_entropy(logits, positions):
    """-log softmax(logits)[position] per example, by Google's one-hot product (a position
    outside [0, S) contributes 0, as in Google's code, rather than failing).

    Args: logits float32 [B, S]; positions int [B] or [B, 1]. Returns float32 [B].
    """
    positions = tf.reshape(positions, [-1])
    one_hot = tf.one_hot(positions, depth=tf.shape(logits)[1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits, axis=-1), axis=-1)

# ---------------------------------------------------------------------------------------------
# What the classifier's output layer reads (--classifier_input; Sun et al. 2019, "How to
# Fine-Tune BERT for Text Classification", compare the same layer features).

CLASSIFIER_INPUTS = ("pooled", "cls", "mean", "cls_last4")


def classifier_input_width(config, classifier_input: str) -> int:
    """The width of `classifier_features(...)`: H, or 4H for cls_last4."""
    if classifier_input not in CLASSIFIER_INPUTS:
        raise ValueError(f"--classifier_input must be one of {', '.join(CLASSIFIER_INPUTS)}, "
                         f"got {classifier_input!r}")
    return config.hidden_size * (4 if classifier_input == "cls_last4" else 1)


def classifier_features(outputs, input_mask, classifier_input: str = "pooled") -> tf.Tensor:
    """The features the output layer reads.

    Args:
      outputs: `modeling.BertOutputs`.
      input_mask: int Tensor [B, S] (1 = real token).
      classifier_input: "pooled" (Google: the pooler's tanh(dense([CLS]))), "cls" (the last
        layer's [CLS] vector, no pooler), "mean" (the mean of the last layer over the real
        tokens), "cls_last4" (the [CLS] vectors of the last 4 layers, last layer first,
        concatenated).

    Returns:
      float Tensor [B, W], W = `classifier_input_width(config, classifier_input)`.
    """
    if classifier_input == "pooled":
        return outputs.pooled_output
    if classifier_input == "cls":
        return outputs.sequence_output[:, 0, :]
    if classifier_input == "mean":
        sequence = outputs.sequence_output  # [B, S, H]
        # Summed in float32 (a 512-token sum loses digits in fp16/bf16), returned in the
        # model's dtype. Every packed sequence has [CLS] and [SEP]: the count is never 0.
        mask = tf.cast(input_mask, tf.float32)[:, :, None]  # [B, S, 1]
        mean = tf.reduce_sum(tf.cast(sequence, tf.float32) * mask, axis=1) / \
            tf.reduce_sum(mask, axis=1)
        return tf.cast(mean, sequence.dtype)
    if classifier_input == "cls_last4":
        layers = outputs.all_encoder_layers
        if len(layers) < 4:
            raise ValueError(f"--classifier_input=cls_last4 needs at least 4 layers, the model "
                             f"has {len(layers)}")
        return tf.concat([layers[-i][:, 0, :] for i in range(1, 5)], axis=-1)
    raise ValueError(f"--classifier_input must be one of {', '.join(CLASSIFIER_INPUTS)}, got "
                     f"{classifier_input!r}")


# ---------------------------------------------------------------------------------------------
# Token tagging (run_ner.py)

class TokenTaggingHead(tf.Module):
    """A tag per position: dropout, then a linear layer, on the sequence output (the head of
    Hugging Face's `BertForTokenClassification` and of the BERT-NER ports of Google's code).

    Variables: `cls/ner/output_weights` [num_tags, H] (stored transposed, as the classifier's)
    and `cls/ner/output_bias` [num_tags]; the weights initialised as the classifier's
    (truncated normal, stddev 0.02), the bias to zeros.
    """

    def __init__(self, config, num_tags, dropout_prob=None, scope="cls/ner"):
        """Args: config `BertConfig`; num_tags int >= 1; dropout_prob float, None = the
        config's `classifier_dropout` (ModernBERT's head) or else its hidden_dropout_prob (as
        Hugging Face's `BertForTokenClassification`); scope the variables' prefix."""
        super().__init__(name=None)
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        self.num_tags = num_tags
        if dropout_prob is None:
            dropout_prob = config.classifier_dropout
        self.dropout_prob = config.hidden_dropout_prob if dropout_prob is None else dropout_prob
        self._store = modeling.ParameterStore()
        self.output_weights = self._store.add(
            f"{scope}/output_weights", [num_tags, config.hidden_size],
            modeling.truncated_normal_initializer(0.02))
        self.output_bias = self._store.add(f"{scope}/output_bias", [num_tags],
                                           modeling.zeros_initializer)

    def named_variables(self):
        return self._store.as_dict()

    def __call__(self, sequence_output, label_ids=None, label_weights=None,
                 training=False) -> Dict[str, tf.Tensor]:
        """Logits at every position and, given labels, the weighted cross-entropy parts.

        Args:
          sequence_output: float Tensor [B, S, H].
          label_ids: optional int32 Tensor [B, S], the tag id at each position.
          label_weights: optional float Tensor [B, S]: 1.0 where a position is labelled (a
            word's first piece), 0.0 elsewhere (later pieces, [CLS], [SEP], padding).
          training: Python bool (dropout).

        Returns:
          dict with `logits` float32 [B, S, num_tags], `log_probs` (the same shape) and, when
          labels are given, `per_token_loss` float32 [B, S] (-log p(label), whatever the
          weight), `numerator` (scalar: the weighted sum of `per_token_loss`) and `denominator`
          (scalar: the sum of the weights). The task divides by the global denominator.
        """
        output_layer = modeling.dropout(sequence_output, self.dropout_prob, training,
                                        seq_view=(modeling.SEQ, sequence_output.shape[-1]))
        context = execution.current()
        logits = tf.einsum("bsh,th->bst", output_layer,
                           tf.cast(context.value(self.output_weights), output_layer.dtype))
        logits = tf.cast(tf.nn.bias_add(
            logits, tf.cast(context.value(self.output_bias), logits.dtype)), tf.float32)
        result = {"logits": logits, "log_probs": tf.nn.log_softmax(logits, axis=-1)}
        if label_ids is None:
            return result
        weights = tf.cast(label_weights, tf.float32)
        per_token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label_ids,
                                                                         logits=logits)
        result.update(per_token_loss=per_token_loss,
                      numerator=tf.reduce_sum(weights * per_token_loss),
                      denominator=tf.reduce_sum(weights))
        return result
