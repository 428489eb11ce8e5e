"""Google's `optimization.py` API (google-research/bert): `create_optimizer` and
`AdamWeightDecayOptimizer`, for TF1 graph mode (`tf.compat.v1`, v2 behaviour off).

`create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu)` returns Google's
train op: the learning rate of `engine/optimization.learning_rate_at` (Google's linear warmup,
then polynomial decay with power 1 to 0 at `num_train_steps`) read at `global_step`, gradients of
`loss` with respect to every trainable variable, clipped by global norm 1.0, one
AdamWeightDecay update (no bias correction, weight decay 0.01 except LayerNorm/layer_norm/bias)
and then `global_step += 1`. The slots are `<variable>/adam_m`, `<variable>/adam_v` in TF1's
variable store, as Google's, so a `Saver` writes the names Google's checkpoints have.
"""

import re
import sys

import tensorflow as tf

from bert_mgpu.compat import modeling
from bert_mgpu.engine.optimization import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, learning_rate_at

tf1 = tf.compat.v1


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu):
    """Creates Google's BERT train op (graph mode).

    Args:
      loss: float32 scalar Tensor.
      init_lr: float, the peak learning rate.
      num_train_steps: int, the step at which the rate reaches 0.
      num_warmup_steps: int or None, the linear warmup length.
      use_tpu: bool; there are no TPUs here: True is warned about and ignored.

    Returns:
      The train op (an `Operation`): one update of every trainable variable and global_step+1.
    """
    if tf.executing_eagerly():
        raise RuntimeError("optimization.create_optimizer builds a TF1 graph train op; in TF2 "
                           "eager code use bert_mgpu.engine.optimization.AdamWeightDecay")
    if use_tpu:
        sys.stderr.write("optimization.create_optimizer: use_tpu=True ignored (no TPU here; "
                         "Google's CrossShardOptimizer is not used)\n")
    global_step = tf1.train.get_or_create_global_step()
    learning_rate = learning_rate_at(global_step, init_lr, num_train_steps,
                                     num_warmup_steps or 0)
    optimizer = AdamWeightDecayOptimizer(
        learning_rate=learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
        epsilon=1e-6, exclude_from_weight_decay=list(DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY))
    tvars = tf1.trainable_variables()
    grads = tf1.gradients(loss, tvars)
    # TF1's clip_by_global_norm counts an IndexedSlices gradient's rows apart (a repeated word's
    # rows each, as Google's word embeddings); the token-type table's is dense in Google's model.
    dense = tf1.get_collection(modeling.DENSE_GRADIENTS)
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) and
             any(v is d for d in dense) else g for g, v in zip(grads, tvars)]
    # Google clips after computing all gradients, before the update (global norm 1.0).
    grads, _ = tf1.clip_by_global_norm(grads, clip_norm=1.0)
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
    # Google increments global_step here (its optimizer does not). Google groups the two with
    # no order, so whether an update reads the rate of step t or t + 1 was up to the executor;
    # here the increment runs after the update: update t uses the rate of step t, as Google's
    # comments state.
    with tf1.control_dependencies([train_op]):
        return tf1.group(train_op, global_step.assign(global_step + 1))


class AdamWeightDecayOptimizer(tf1.train.Optimizer):
    """Google's Adam with decoupled weight decay ("AdamW" without bias correction).

    Per variable, with float32 slots m, v: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    update = m / (sqrt(v) + epsilon) (+ weight_decay_rate * param unless excluded);
    param -= learning_rate * update.
    """

    def __init__(self, learning_rate, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=None, name="AdamWeightDecayOptimizer"):
        super().__init__(False, name)
        self.learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = exclude_from_weight_decay

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """One update of every (gradient, variable) pair; None gradients are skipped.

        `global_step` is not incremented (Google's contract: `create_optimizer` does it)."""
        del global_step
        assignments = []
        for grad, param in grads_and_vars:
            if grad is None or param is None:
                continue
            param_name = self._get_variable_name(param.name)
            m = tf1.get_variable(name=param_name + "/adam_m", shape=param.shape.as_list(),
                                 dtype=tf.float32, trainable=False,
                                 initializer=tf1.zeros_initializer())
            v = tf1.get_variable(name=param_name + "/adam_v", shape=param.shape.as_list(),
                                 dtype=tf.float32, trainable=False,
                                 initializer=tf1.zeros_initializer())
            # tf.multiply, not `*`: it takes the embeddings' IndexedSlices gradient (densified,
            # as in Google's code).
            next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
            next_v = tf.multiply(self.beta_2, v) + tf.multiply(1.0 - self.beta_2,
                                                               tf.square(grad))
            update = next_m / (tf.sqrt(next_v) + self.epsilon)
            if self._do_use_weight_decay(param_name):
                update += self.weight_decay_rate * param
            next_param = param - self.learning_rate * update
            assignments.extend([param.assign(next_param), m.assign(next_m), v.assign(next_v)])
        return tf.group(*assignments, name=name)

    def _do_use_weight_decay(self, param_name):
        """Whether to decay `param_name` (no pattern of the exclusions re.search-matches)."""
        if not self.weight_decay_rate:
            return False
        return not any(re.search(r, param_name) for r in self.exclude_from_weight_decay or ())

    @staticmethod
    def _get_variable_name(param_name):
        """The variable's name without the ':0' output suffix."""
        m = re.match("^(.*):\\d+$", param_name)
        return m.group(1) if m is not None else param_name
