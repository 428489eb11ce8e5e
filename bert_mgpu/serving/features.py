"""The encoder's features as a SavedModel (export_saved_model.py --task=features): no head;
`pooled_output`, `sequence_output`, `input_mask` and `sentence_embedding` (see
serving/export.py)."""

import tensorflow as tf

from bert_mgpu.serving.task import TaskServing


class FeaturesServing(TaskServing):
    """The encoder alone: its pooled and sequence outputs, and the mean of the real tokens'."""

    def outputs(self, head, bert_out, input_mask):
        del head
        sequence = tf.cast(bert_out.sequence_output, tf.float32)  # [B, S, H]
        mask = tf.cast(input_mask, tf.float32)[:, :, None]        # [B, S, 1]
        count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)     # [B, 1]
        return {"pooled_output": tf.cast(bert_out.pooled_output, tf.float32),
                "sequence_output": sequence,
                "input_mask": tf.cast(input_mask, tf.int32),
                "sentence_embedding": tf.reduce_sum(sequence * mask, axis=1) / count}


SERVING = FeaturesServing()
