"""distill.py's losses on the inside of the models: TinyBERT's hidden-state and attention-score
mean squared errors (Jiao et al. 2020, eq. 7-9) and MiniLM's last-layer self-attention
distribution and value-relation KL divergences (Wang et al. 2020, eq. 5-7; relation heads as
MiniLMv2, Wang et al. 2021), each per example so that towers, accumulation and workers add up
to the global batch's mean as the soft-target loss does.

Every loss is over the example's real tokens only (`input_mask` 1): a mean over real tokens
(and pairs of real tokens) where the papers' code takes the mean over the padded tensor, so
the loss of an example does not depend on how much padding its batch has (the trainer trims
each slice's padding on its own).

The projections and hidden states come from `BertModel` (`BertOutputs.all_encoder_layers`,
`embedding_output`, `BertModel.attention_projections`); nothing here reads a checkpoint.
"""

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import tensorflow as tf

from bert_mgpu.model import modeling


@dataclasses.dataclass(frozen=True)
class InnerLosses:
    """The weights of the losses on the models' insides (0 = off) and what they compare.

    Attributes:
      hidden: TinyBERT's hidden-state MSE (the embeddings' and each student layer's output
        against its teacher layer's, `layer_targets`).
      attention_scores: TinyBERT's attention-score MSE (each student layer's against its
        teacher layer's; the same number of heads).
      attention_kl: MiniLM's self-attention distribution KL (the last layers).
      value_kl: MiniLM's value-relation KL (the last layers).
      relation_heads: MiniLM's heads: 0 = the models' attention heads (MiniLM: the same
        number in both), else the queries, keys and values split into this many relation
        heads whatever the models' heads (MiniLMv2).
      layer_targets: the teacher layer (0-based) whose output and attention student layer i
        learns, one per student layer.
    """
    hidden: float = 0.0
    attention_scores: float = 0.0
    attention_kl: float = 0.0
    value_kl: float = 0.0
    relation_heads: int = 0
    layer_targets: Tuple[int, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.hidden or self.attention_scores or self.attention_kl or self.value_kl)


def layer_targets(teacher_layers: int, layer_map: Sequence[int]) -> Tuple[int, ...]:
    """The teacher layer whose output student layer i learns: the last of the teacher layers
    its block stands for, up to the layer the next student layer starts from, and the teacher's
    last for the student's last. With --student_layers=spread this is TinyBERT's uniform map
    g(m) = m * L / k (1-based; 12 -> 4: layers 3, 6, 9, 12), with first = i but the last.

    Args:
      teacher_layers: L.
      layer_map: the teacher layer each of the student's k layers starts from (increasing).
    """
    ends = [layer_map[i + 1] - 1 for i in range(len(layer_map) - 1)]
    return tuple(max(end, start) for end, start in zip(ends, layer_map)) + (teacher_layers - 1,)


def _real(input_mask, dtype=tf.float32) -> tf.Tensor:
    """[B, S] 1.0 at real tokens, and [B] their number (at least 1)."""
    mask = tf.cast(input_mask, dtype)
    return mask, tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def hidden_mse(student, teacher, input_mask, projection: Optional[tf.Tensor] = None):
    """TinyBERT's MSE(H^S W, H^T) of one pair of layers, per example, over its real tokens.

    Args:
      student: float Tensor [B, S, d'] (a student layer's output or embeddings).
      teacher: float Tensor [B, S, d].
      input_mask: int32 Tensor [B, S], 1 = real token.
      projection: float32 Tensor [d', d] (W, learned), or None when d' == d.

    Returns:
      float32 Tensor [B]: sum over real tokens and d of the squared error / (tokens * d).
    """
    student, teacher = tf.cast(student, tf.float32), tf.cast(teacher, tf.float32)
    if projection is not None:
        student = tf.einsum("bsi,ij->bsj", student, projection)
    mask, count = _real(input_mask)
    squared = tf.reduce_sum(tf.square(student - teacher), axis=-1) * mask  # [B, S]
    return tf.reduce_sum(squared, axis=1) / (count * float(teacher.shape[-1]))


def relation_scores(left, right, heads: int) -> tf.Tensor:
    """Scaled dot products of `heads` relation heads: [B, R, S, S] = A_r B_r^T / sqrt(W / R),
    A_r the r-th of `heads` equal column blocks of `left` (Google's head order).

    Args:
      left, right: float Tensors [B, S, W] (e.g. queries and keys; values and values).
      heads: R, dividing W.
    """
    batch_size, seq_length, width = modeling.get_shape_list(left, expected_rank=3)

    def split(t):  # [B, S, W] -> [B, R, S, W / R]
        t = tf.reshape(tf.cast(t, tf.float32), [batch_size, seq_length, heads, width // heads])
        return tf.transpose(t, [0, 2, 1, 3])

    scores = tf.matmul(split(left), split(right), transpose_b=True)
    return scores / math.sqrt(float(width // heads))


def attention_score_mse(student_scores, teacher_scores, input_mask) -> tf.Tensor:
    """TinyBERT's attention loss of one pair of layers, (1/h) sum_i MSE(A_i^S, A_i^T), A_i the
    unnormalised scores Q K^T / sqrt(d_k) of head i, per example over its real (query, key)
    pairs (the papers' code sets the masked scores to 0 instead).

    Args:
      student_scores, teacher_scores: float32 Tensors [B, N, S, S] (`relation_scores` of
        queries and keys with the models' heads).
      input_mask: int32 Tensor [B, S].

    Returns:
      float32 Tensor [B].
    """
    mask, count = _real(input_mask)
    pairs = mask[:, None, :, None] * mask[:, None, None, :]  # [B, 1, S, S]
    squared = tf.square(student_scores - teacher_scores) * pairs
    heads = float(student_scores.shape[1])
    return tf.reduce_sum(squared, axis=[1, 2, 3]) / (heads * count * count)


def relation_kl(student_scores, teacher_scores, input_mask) -> tf.Tensor:
    """MiniLM's KL of one relation, (1 / (A_h |x|)) sum_a sum_t KL(T_{a,t} || S_{a,t}), the rows
    softmax(scores) over the real keys, per example, the mean over its heads and real query
    tokens.

    Args:
      student_scores, teacher_scores: float32 Tensors [B, R, S, S] (`relation_scores`).
      input_mask: int32 Tensor [B, S].

    Returns:
      float32 Tensor [B].
    """
    mask, count = _real(input_mask)
    adder = (1.0 - mask[:, None, None, :]) * modeling.ATTENTION_MASK_ADDER  # [B, 1, 1, S]
    teacher_log = tf.nn.log_softmax(teacher_scores + adder, axis=-1)
    student_log = tf.nn.log_softmax(student_scores + adder, axis=-1)
    kl = tf.reduce_sum(tf.exp(teacher_log) * (teacher_log - student_log), axis=-1)  # [B, R, S]
    kl = tf.reduce_sum(kl * mask[:, None, :], axis=[1, 2])
    return kl / (float(student_scores.shape[1]) * count)
