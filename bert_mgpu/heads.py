"""Output heads with Google's variable scopes: masked LM, next sentence, classifier.

- `MaskedLMHead`: `cls/predictions/transform/dense/{kernel,bias}`,
  `cls/predictions/transform/LayerNorm/{beta,gamma}`, `cls/predictions/output_bias`; the output
  projection is the transposed word-embedding table (tied weights). Computed only at the masked
  positions.
- `NextSentenceHead`: `cls/seq_relationship/output_weights` [2, hidden],
  `cls/seq_relationship/output_bias` [2].
- `ClassifierHead`: root-level `output_weights` [num_labels, hidden] and `output_bias`, as
  Google's `run_classifier.create_model`.

Losses are returned with their parts (sum of weighted per-example losses and the weight total) so
that a multi-tower trainer can normalise by the *global* count of masked tokens, which keeps
N towers equal to one device on the same global batch.
"""

from typing import Dict

import tensorflow as tf

from bert_mgpu import modeling

# Google adds this to the masked-LM weight total so a batch without masked tokens is not 0/0.
MASKED_LM_DENOMINATOR_EPSILON = 1e-5
# run_classifier.create_model hard-codes keep_prob=0.9 on the pooled output in training.
CLASSIFIER_DROPOUT_PROB = 0.1


class MaskedLMHead(tf.Module):
    """Google's `get_masked_lm_output`: transform, LayerNorm, tied decoder, output bias."""

    def __init__(self, config, scope="cls/predictions"):
        super().__init__(name=None)
        self.config = config
        self._store = modeling.ParameterStore()
        # The transform maps to the width of the word embeddings (ALBERT's embedding_size; the
        # hidden size in BERT), so the tied decoder is a plain product with the table.
        h, e = config.hidden_size, config.embedding_size
        self.transform = modeling.Dense(
            self._store, f"{scope}/transform/dense", h, e, config.initializer_range,
            activation=modeling.get_activation(config.hidden_act))
        self.layer_norm = modeling.LayerNorm(self._store, f"{scope}/transform", e)
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
          dict with `log_probs` (float32 [B*P, vocab_size]) and, when labels are given,
          `per_example_loss` ([B*P]), `numerator` (scalar, sum of weighted losses),
          `denominator` (scalar, sum of weights) and `loss` = numerator / (denominator + 1e-5),
          Google's per-batch normalisation.
        """
        input_tensor = modeling.gather_indexes(sequence_output, positions)  # [B*P, H]
        input_tensor = self.transform(input_tensor)  # [B*P, E]
        input_tensor = self.layer_norm(input_tensor)
        logits = tf.matmul(input_tensor, tf.cast(embedding_table, input_tensor.dtype),
                           transpose_b=True)  # [B*P, V]
        logits = tf.nn.bias_add(logits, tf.cast(modeling.param(self.output_bias), logits.dtype))
        logits = tf.cast(logits, tf.float32)
        # Only computed where used (eval, predictions): a traced train step prunes it.
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        result = {"log_probs": log_probs}
        if label_ids is None:
            return result
        label_ids = tf.reshape(label_ids, [-1])
        label_weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
        # -log p(label), Google's -sum(one_hot * log_probs), by the fused op: no [B*P, V] one-hot,
        # and the gradient (softmax - one_hot) is one pass instead of a scatter into a
        # [B*P, V] zero matrix (a measured 2-4% of a CPU pretraining step).
        per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=label_ids, logits=logits)
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
        return _softmax_classifier(pooled_output, modeling.param(self.output_weights),
                                   modeling.param(self.output_bias), labels)


class ClassifierHead(tf.Module):
    """Google's `run_classifier.create_model` head: dropout, then a linear layer, on the pooled
    output; variables at the root: `output_weights` [num_labels, H], `output_bias` [num_labels]."""

    def __init__(self, config, num_labels, dropout_prob=CLASSIFIER_DROPOUT_PROB):
        super().__init__(name=None)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.num_labels = num_labels
        self.dropout_prob = dropout_prob
        self._store = modeling.ParameterStore()
        self.output_weights = self._store.add(
            "output_weights", [num_labels, config.hidden_size],
            modeling.truncated_normal_initializer(0.02))  # Google: stddev=0.02, not the config's
        self.output_bias = self._store.add("output_bias", [num_labels],
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
        return _softmax_classifier(output_layer, modeling.param(self.output_weights),
                                   modeling.param(self.output_bias), labels)


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


class BertPretrainer(tf.Module):
    """Google's pretraining model: `BertModel` + masked LM + next sentence, as a trainer task.

    The trainer (training.py) splits a global batch over towers (and accumulation micro-steps)
    and sums the towers' contributions; for that to equal one device on the whole batch, every
    normaliser comes from the *global* batch (`context`): the masked-LM loss is divided by the
    global sum of `masked_lm_weights` (+1e-5, Google's epsilon), the next-sentence loss by the
    global number of examples.

    With `next_sentence=False` (masked-LM-only data: `create_pretraining_data.py
    --no_next_sentence` or `--pack_sequences`, as Cramming and RoBERTa train) there is no
    next-sentence head, no `cls/seq_relationship` variables, and the loss is the masked-LM loss;
    `next_sentence_labels` is then ignored. ALBERT's sentence-order prediction is trained by the
    next-sentence head unchanged (same variables, label 1 = swapped).
    """

    def __init__(self, config, compute_dtype=tf.float32, next_sentence=True):
        super().__init__(name=None)
        self.config = config
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.masked_lm = MaskedLMHead(config)
        self.next_sentence = NextSentenceHead(config) if next_sentence else None

    def named_variables(self):
        heads = [self.masked_lm] + ([self.next_sentence] if self.next_sentence else [])
        return modeling.merge_named_variables(self.bert, *heads)

    @staticmethod
    def context(features) -> Dict[str, tf.Tensor]:
        """Normalisers of a global batch (additive: summed over workers by the cluster code)."""
        return {
            "masked_lm_weight_sum": tf.reduce_sum(tf.cast(features["masked_lm_weights"],
                                                          tf.float32)),
            "num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32),
        }

    def _forward(self, features, training):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        mlm = self.masked_lm(out.sequence_output, out.embedding_table,
                             features["masked_lm_positions"], features["masked_lm_ids"],
                             features["masked_lm_weights"])
        if self.next_sentence is None:
            return mlm, None
        nsp = self.next_sentence(out.pooled_output, features["next_sentence_labels"])
        return mlm, nsp

    def tower_loss(self, features, context, scale, training=True) -> Dict:
        """One tower's share of the global loss, times `scale` (the number of towers).

        Args:
          features: the tower's slice of the batch (Google's pretraining features).
          context: `context()` of the global batch.
          scale: float, the number of towers the trainer averages over (so the average of the
            towers' `loss` is this slice's share of the global loss).
          training: Python bool (dropout).

        Returns:
          dict: `loss` (scalar float32) and `sums` (additive statistics for logging).
        """
        mlm, nsp = self._forward(features, training)
        mlm_share = mlm["numerator"] / (context["masked_lm_weight_sum"]
                                        + MASKED_LM_DENOMINATOR_EPSILON)
        sums = {"masked_lm_numerator": mlm["numerator"]}
        if nsp is None:
            return {"loss": scale * mlm_share, "sums": sums}
        nsp_sum = tf.reduce_sum(nsp["per_example_loss"])
        nsp_share = nsp_sum / context["num_examples"]
        sums["next_sentence_loss_sum"] = nsp_sum
        return {"loss": scale * (mlm_share + nsp_share), "sums": sums}

    @staticmethod
    def metrics(sums, context) -> Dict[str, tf.Tensor]:
        """Losses of the global batch from the summed tower statistics (what is logged)."""
        mlm = sums["masked_lm_numerator"] / (context["masked_lm_weight_sum"]
                                             + MASKED_LM_DENOMINATOR_EPSILON)
        if "next_sentence_loss_sum" not in sums:
            return {"loss": mlm, "masked_lm_loss": mlm}
        nsp = sums["next_sentence_loss_sum"] / context["num_examples"]
        return {"loss": mlm + nsp, "masked_lm_loss": mlm, "next_sentence_loss": nsp}

    def eval_sums(self, features) -> Dict[str, tf.Tensor]:
        """Additive statistics of one eval batch for Google's eval metrics (no dropout)."""
        mlm, nsp = self._forward(features, training=False)
        weights = tf.reshape(tf.cast(features["masked_lm_weights"], tf.float32), [-1])
        mlm_pred = tf.argmax(mlm["log_probs"], axis=-1, output_type=tf.int32)
        mlm_correct = tf.cast(tf.equal(mlm_pred, tf.reshape(features["masked_lm_ids"], [-1])),
                              tf.float32)
        sums = {
            "masked_lm_weighted_loss": tf.reduce_sum(weights * mlm["per_example_loss"]),
            "masked_lm_weighted_correct": tf.reduce_sum(weights * mlm_correct),
            "masked_lm_weight": tf.reduce_sum(weights),
            "batch_loss_sum": mlm["loss"],
            "num_batches": tf.constant(1.0),
        }
        if nsp is None:
            return sums
        nsp_labels = tf.reshape(features["next_sentence_labels"], [-1])
        nsp_pred = tf.argmax(nsp["log_probs"], axis=-1, output_type=tf.int32)
        sums.update(
            next_sentence_loss_sum=tf.reduce_sum(nsp["per_example_loss"]),
            next_sentence_correct=tf.reduce_sum(
                tf.cast(tf.equal(nsp_pred, nsp_labels), tf.float32)),
            num_examples=tf.cast(tf.shape(nsp_labels)[0], tf.float32),
            batch_loss_sum=mlm["loss"] + nsp["loss"])
        return sums

    @staticmethod
    def eval_metrics(sums) -> Dict[str, float]:
        """Google's eval keys from summed `eval_sums` (tf.metrics semantics); without the
        next-sentence head, no `next_sentence_*` keys."""
        def div(a, b):
            return float(a) / float(b) if float(b) else 0.0
        result = {
            "masked_lm_accuracy": div(sums["masked_lm_weighted_correct"],
                                      sums["masked_lm_weight"]),
            "masked_lm_loss": div(sums["masked_lm_weighted_loss"], sums["masked_lm_weight"]),
            # The Estimator's `loss`: the mean over eval batches of each batch's total loss.
            "loss": div(sums["batch_loss_sum"], sums["num_batches"]),
        }
        if "next_sentence_correct" in sums:
            result.update(
                next_sentence_accuracy=div(sums["next_sentence_correct"], sums["num_examples"]),
                next_sentence_loss=div(sums["next_sentence_loss_sum"], sums["num_examples"]))
        return result


class BertClassifier(tf.Module):
    """Google's `run_classifier` model as a trainer task: `BertModel` + `ClassifierHead`.

    The loss of a global batch is the mean cross-entropy over its examples; towers divide their
    summed loss by the global example count (`context`), so N towers equal one device.
    """

    def __init__(self, config, num_labels, compute_dtype=tf.float32):
        super().__init__(name=None)
        self.config = config
        self.num_labels = num_labels
        self.bert = modeling.BertModel(config, compute_dtype=compute_dtype)
        self.classifier = ClassifierHead(config, num_labels)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, self.classifier)

    def _forward(self, features, training):
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=training)
        return self.classifier(out.pooled_output, features["label_ids"], training=training)

    @staticmethod
    def context(features) -> Dict[str, tf.Tensor]:
        return {"num_examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def tower_loss(self, features, context, scale, training=True) -> Dict:
        out = self._forward(features, training)
        loss_sum = tf.reduce_sum(out["per_example_loss"])
        return {"loss": scale * loss_sum / context["num_examples"],
                "sums": {"loss_sum": loss_sum}}

    @staticmethod
    def metrics(sums, context) -> Dict[str, tf.Tensor]:
        return {"loss": sums["loss_sum"] / context["num_examples"]}

    def eval_sums(self, features) -> Dict[str, tf.Tensor]:
        """Additive statistics of one eval batch: losses, and the confusion matrix
        [num_labels (true), num_labels (predicted)]."""
        out = self._forward(features, training=False)
        labels = tf.reshape(features["label_ids"], [-1])
        predictions = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
        return {
            "loss_sum": tf.reduce_sum(out["per_example_loss"]),
            "num_examples": tf.cast(tf.shape(labels)[0], tf.float32),
            "batch_loss_sum": out["loss"],
            "num_batches": tf.constant(1.0),
            "confusion": tf.math.confusion_matrix(labels, predictions, self.num_labels,
                                                  dtype=tf.float32),
        }

    def eval_metrics(self, sums, label_names=None) -> Dict[str, float]:
        """Google's keys (`eval_accuracy`, `eval_loss`, `loss`) plus macro-F1 and per-class
        precision/recall/F1 (`<metric>_<label>`) from summed `eval_sums`."""
        import numpy as np

        confusion = np.asarray(sums["confusion"], np.float64)
        n = float(sums["num_examples"])
        names = list(label_names) if label_names is not None else \
            [str(i) for i in range(self.num_labels)]
        result = {
            "eval_accuracy": float(np.trace(confusion) / n) if n else 0.0,
            "eval_loss": float(sums["loss_sum"]) / n if n else 0.0,
            # The Estimator's `loss`: the mean over eval batches of each batch's mean loss.
            "loss": float(sums["batch_loss_sum"]) / float(sums["num_batches"]),
        }
        f1s = []
        for i, name in enumerate(names):
            tp = confusion[i, i]
            predicted, actual = confusion[:, i].sum(), confusion[i, :].sum()
            precision = tp / predicted if predicted else 0.0
            recall = tp / actual if actual else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            result.update({f"eval_precision_{name}": float(precision),
                           f"eval_recall_{name}": float(recall), f"eval_f1_{name}": float(f1)})
            f1s.append(f1)
        result["eval_f1_macro"] = float(np.mean(f1s)) if f1s else 0.0
        return result

    def predict(self, features) -> tf.Tensor:
        """float32 [batch, num_labels] class probabilities (no dropout)."""
        out = self.bert(features["input_ids"], features["input_mask"], features["segment_ids"],
                        training=False)
        return self.classifier(out.pooled_output, training=False)["probabilities"]
