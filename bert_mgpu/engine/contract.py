"""What the engine needs of a task: every member the trainer calls, declared here.

The engine knows no feature name: what a batch holds (its sequence axis, its padding) is the
task's to say.

The engine (`engine/training.py`) imports nothing from `tasks/` (the layers point down), so the
contract it trains by lives beside it. `tasks/base.py` builds on it: its `Task` adds what only
jobs use and its `BertTask` gives the optional members their defaults (no route; BERT's
sequence axis and padding), so the engine calls every member unconditionally and never probes a
task with `hasattr`/`getattr`.

Every method may be traced several times in one graph (once per tower); none creates variables,
sets devices or reads flags.

The execution context. How the trainer runs the model a task traces is one declared object,
`ExecutionContext` (`model/execution.py`), which the model reads while it is traced (through
`execution.current()`, nowhere else) and the engine enters (`execution.entered`):

* what the model reads: the dropout stream (position-keyed masks; while it is set the model is
  in the trainer's towers and fuses its GELU and masked-LM loss), substituted parameter values,
  dropout's random words drawn outside a compiled tower, whether encoder layers are recomputed
  in the backward pass, whether they are XLA-compiled, how a RoPE model's attention keeps its
  probabilities for the backward pass (chunked global layers, recomputed bands); and one field
  a task reads:
  `real_tokens`, whether training may skip the padding (`tasks/base.training_options`);
* who sets it and when: `training.UpdateStep`'s tower function, around each tower's
  `tower_loss`: the stream, `recompute_layers` = `TrainConfig.gradient_checkpointing`,
  `compile_layers` = `TrainConfig.xla_layers`, `attention_chunk` = `TrainConfig.attention_chunk`
  and `real_tokens` = neither XLA option;
  `training.Trainer`, around tracing `eval_sums` and `predict`: the same layer fields (no
  stream); `towers.make_tower_grad_fn`, around an XLA-compiled tower: the weight copies
  (`parameters`) and the outside draws.

So `tower_loss` runs under `TowerContext` (an `ExecutionContext` with a `stream`), and
`eval_sums` and `predict` under one without. A task never enters or replaces it.
"""

from typing import Dict, Mapping, Optional, Protocol, Sequence, runtime_checkable

import numpy as np
import tensorflow as tf

from bert_mgpu.model.execution import ExecutionContext

Tensors = Dict[str, tf.Tensor]
# What a tower function (`tower_loss`) runs under: the trainer's execution context, with the
# towers' dropout stream set (`execution.current()` while it is traced).
TowerContext = ExecutionContext


@runtime_checkable
class TrainingLoss(Protocol):
    """The loss of one update: what a task, or one route of a routed task, trains by.

    For the split of a global batch over towers, micro-batches and workers not to matter, a
    task never normalises by its own slice: `context` computes the normalisers of the *global*
    batch once, and `tower_loss` returns the slice's share of the global loss, so the shares add
    up to the global loss and their gradients add up to its gradient.
    """

    def context(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Normalisers of a global batch: float32 scalars, additive (a multi-worker job sums
        them over the workers before any tower runs)."""

    def tower_loss(self, features: Mapping[str, tf.Tensor], context: Tensors,
                   training: bool = True) -> Dict:
        """One slice's share of the global loss, traced under a `TowerContext` (the module
        docstring).

        Returns:
          dict: `loss`, a float32 scalar such that the sum over the slices of a global batch is
          the global batch's loss; `sums`, additive float32 statistics for `metrics`.
        """

    def metrics(self, sums: Tensors, context: Tensors) -> Tensors:
        """What the training log shows for a global batch (at least `loss`), from the summed
        `sums` of its slices."""


@runtime_checkable
class Task(TrainingLoss, Protocol):
    """Everything the trainer calls on the task it trains, evaluates and predicts."""

    # The losses a routed task trains by, one per route (`route`); () when it has none.
    routes: Sequence[TrainingLoss]

    def named_variables(self) -> Dict[str, tf.Variable]:
        """Google's variable name -> variable, every variable the task trains or restores."""

    def route(self, features: Mapping[str, tf.Tensor]) -> Optional[int]:
        """Which of `routes` trains a global batch (called eagerly: it selects the traced
        update, so the variables other routes own get no gradient), or None: the task's own
        loss does."""

    def sequence_length(self, features: Mapping[str, tf.Tensor]):
        """The length of a batch's sequence axis, which dropout lays its masks out along
        (`execution.DropoutStream`): a Python int when the shape is static, an int32 scalar Tensor
        when the trace leaves it unknown (batches cut to different lengths share one trace),
        or None when the batch has none."""

    def trim_padding(self, features: Mapping[str, tf.Tensor], multiple: int) -> Tensors:
        """The batch without the padding past its longest example, rounded up to `multiple`
        (a Python int >= 1), cut along the sequence axis only; called eagerly."""

    def eval_sums(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Additive statistics of one evaluation batch (no dropout)."""

    def eval_metrics(self, sums: Mapping[str, np.ndarray]) -> Dict[str, float]:
        """The evaluation results (what eval_results.txt holds) from summed `eval_sums`."""

    def predict(self, features: Mapping[str, tf.Tensor]) -> Tensors:
        """Named outputs of one batch, each with the batch as its first dimension."""
