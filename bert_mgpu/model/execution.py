"""How the trainer runs the model: the one execution context the model reads while it is traced.

The model (`model/modeling.py`, `model/heads.py`) computes the same function however it is run;
*how* it runs is the trainer's choice, and the trainer states it in one object, an
`ExecutionContext`, that it enters around the code it traces. The model reads it, and only it,
through `current()`. Its fields, what the model does with each, and who enters it when:

* `stream`: `dropout` draws position-keyed masks from this `DropoutStream` (None:
  `tf.nn.dropout`). Entered by the trainer's tower function (`engine/training.py`) around each
  tower's loss. While it is set the model is `in_trainer_towers`: the GELU and the masked-LM
  loss run fused by XLA.
* `parameters`: the model reads these tensors for its variables (`ExecutionContext.value`).
  Entered by `engine/towers.py` around an XLA-compiled tower (weight copies made on its device),
  and by `CompiledLayer` inside a compiled layer.
* `drawn_outside`: dropout's random words are recorded, or supplied instead of drawn
  (`OutsideDraws`). Entered by `engine/towers.py` around a compiled CPU tower and around the
  trace that draws its words.
* `recompute_layers`: training recomputes each encoder layer's activations in the backward
  pass (`recomputed`). Entered by the trainer from `TrainConfig.gradient_checkpointing`.
* `compile_layers`: each encoder layer runs as one XLA computation (`CompiledLayer`). Entered by
  the trainer from `TrainConfig.xla_layers`, around training, evaluation and prediction.
* `real_tokens`: training may run the dense layers on the real tokens' rows only (the model's
  `drop_padding`, its dropout drawing the padded run's masks there): the tasks whose loss
  ignores the padding ask for it in training when this is set. Entered by the trainer when
  nothing is XLA-compiled (a compiled tower cannot trace the rows' dynamic count; compiled
  layers are per shape).
* `inference_kernels`: the attention's head transposes move the activations' bits as integers
  of their width and its two batched products run as `BatchMatMulV3` (`modeling.transpose`,
  `modeling.batch_matmul`): the same products, without TensorFlow's oneDNN rewrites of float
  `Transpose` and `BatchMatMulV2`, whose fixed cost per call is most of these small ops' time
  at serving's shapes. Inference only (a bitcast has no gradient). Entered by the fp32/bf16
  SavedModel export around its encoder (serving/export.py), not under XLA, which fuses these.
* `frozen_tables`: embedding tables are read from constants of their float32 bits
  (`ExecutionContext.gather`, made by `frozen_table`). Entered by the int8 export
  (serving/int8.py) around the encoder LiteRT converts, for the token-type table: LiteRT's
  dynamic-range quantization stores every float constant of 1,024 values or more as int8 with
  one scale for the whole tensor, and the token-type row added to every position holds one large
  value among small ones (at hidden size 512 its 2 x 512 table is quantized: on a Chinese
  classifier that moved probabilities by up to 0.19, docs/benchmarks.md).
* `attention_chunk`: a RoPE model's global attention layers take their queries this many rows
  at a time and keep none of the [B, N, S, S] probabilities for the backward pass
  (`rotary_attention.chunked_attention`: memory O(S x chunk), the same values), on sequences
  longer than the chunk (every dynamic length) where no attention dropout is drawn (not
  training, or `attention_probs_dropout_prob` 0: a chunk cannot draw its rows of the
  position-keyed [N, S, S] masks); 0: the full probabilities. 256 outside the trainer; the
  trainer enters `TrainConfig.attention_chunk` (--attention_chunk).
* `recompute_band`: training computes a RoPE local layer's band scores and probabilities again
  in the backward pass instead of keeping them (`recomputed`, the same dropout masks; not
  when whole layers are recomputed). On by default; off only to measure the difference.

Outside any entered block the context is `ExecutionContext()`: Google's model run op by op, the
variables read as they are, `tf.nn.dropout` (evaluation and prediction outside the trainer, the
export, the converters). Entering is `entered(**changes)`: the current context with `changes`
applied, for the block (nested blocks stack, the previous context comes back after). The
context lives in a `contextvars.ContextVar`, so it follows the thread and task that traces.
"""

import contextlib
import contextvars
import dataclasses
from typing import Callable, Iterator, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

# Marks a sequence axis in a `dropout(..., seq_view=...)` layout.
SEQ = "S"
# Marks a sequence axis of which only the first position is there (a last layer computed for
# [CLS] only, `BertModel`'s `first_token_only`): its values get the masks of that position.
FIRST = "F"


class DropoutStream:
    """Dropout masks that are a pure function of (seed, step, global example position).

    Under a context whose `stream` is one, every `dropout` call draws its mask from a
    counter-based generator (Philox, TensorFlow's `StatelessRandomUniformFullIntV2`, one 16-bit
    draw per value): the key is derived from the seed and the call's index in the model (the
    same in every trace), the counter's high word is the global step and its low word the
    position of the tower's first value in the global batch.
    Example j of a global batch therefore gets the same mask whichever tower, accumulation
    micro-batch or worker computes it, and a run resumed after a kill draws exactly the masks the
    uninterrupted run drew: no hidden RNG state. XLA-compiled towers draw the same values: on
    CPU with TensorFlow's kernel before the compiled function (`OutsideDraws`), and inside
    it (GPUs, `--xla_layers`) XLA's Philox equals TensorFlow's kernel (tests/test_training.py:
    XLA runs with dropout equal non-XLA ones to float rounding); on GPUs that is not measured
    here.

    Each value is dropped when its 16-bit draw is below round(rate x 2**16): the keep
    probability is 1 - rate to 2**-16 (the generator is most of dropout's cost on CPU; why and
    how much: docs/benchmarks.md). Masks drawn by versions that drew float32 uniforms differ: a
    run started on such a version and resumed on this one draws other (equally valid) masks from
    the resumed step on.

    Batches trimmed to their longest example (--pad_to_longest): given `full_length` (the
    layout length L: the records' padded length, or for fine-tuning the training file's
    longest example rounded up, see `data/input_pipeline.py`'s `dropout_layout_length`) and the
    batch's `seq_length` S, a call that names its layout (`seq_view`) draws the values of the
    L-long layout ([B, N, L, L], [B, L, H]) and keeps those of the S real positions, so a
    trimmed batch gets, on its tokens, exactly the masks of the padded batch: the update is the
    padded run's up to float rounding, whatever the trimming, the split over towers or workers,
    or the grouping of examples by length. A batch longer than L (padded to max_seq_length)
    gets the layout's masks and keeps every value past L: padding in every example of the file,
    which no real token attends to. The random values of the whole L-long layout are drawn, not
    only the trimmed ones (the cost, and the alternatives measured: docs/benchmarks.md,
    "Dropout's random numbers").

    Args (of the constructor):
      seed: Python int (`--random_seed`).
      step: int Tensor, the global step of the update.
      example_offset: int Tensor, the position in the global batch of the first example of
        the tensors the model computes under the stream (a tower's slice).
      num_examples: int Tensor, the examples in that batch.
      seq_length, full_length: Python ints, the batch's sequence length and the layout length
        when the batch was trimmed (then the masks on the real positions are the padded
        batch's); None: not trimmed. `seq_length` may be an int32 scalar Tensor (a trace shared
        by every cut length), which is then at most `full_length`.
    """

    def __init__(self, seed: int, step, example_offset, num_examples,
                 seq_length: Optional[int] = None, full_length: Optional[int] = None):
        self.seed = int(seed)
        self.step = tf.cast(step, tf.int64)
        self.example_offset = tf.cast(example_offset, tf.int64)
        self.num_examples = tf.cast(num_examples, tf.int64)
        self.seq_length, self.full_length = seq_length, full_length
        self.calls = 0

    # A compiled layer's stream (`inside`) takes its keys from here: a uint64 Tensor [K] whose
    # entry i is the key of the outer stream's call `calls + i` (None: computed from the seed).
    keys: Optional[tf.Tensor] = None

    def key_value(self, call: int) -> int:
        """splitmix64 of (seed, call index): a distinct Philox key per dropout call."""
        z = (self.seed * 0x9E3779B97F4A7C15 + (call + 1) * 0xBF58476D1CE4E5B9) % 2 ** 64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
        return z ^ (z >> 31)

    def _key(self) -> tf.Tensor:
        call, self.calls = self.calls, self.calls + 1
        if self.keys is not None:
            if call >= self.keys.shape[0]:
                raise ValueError(f"a compiled layer draws more than {self.keys.shape[0]} "
                                 f"dropout masks")
            return self.keys[call:call + 1]
        return tf.constant([self.key_value(call)], tf.uint64)

    def state(self, keys: int):
        """(Tensors, statics) that `inside` rebuilds this stream from in a compiled function,
        with the keys of this stream's next `keys` calls."""
        tensors = [self.step, self.example_offset, self.num_examples,
                   tf.constant(np.array([self.key_value(self.calls + i) for i in range(keys)],
                                        np.uint64))]
        dynamic = isinstance(self.seq_length, tf.Tensor)
        if dynamic:
            tensors.append(self.seq_length)
        return tensors, (self.seed, None if dynamic else self.seq_length, self.full_length)

    @classmethod
    def inside(cls, tensors, statics) -> "DropoutStream":
        """The stream `state` describes, drawing the outer stream's masks call for call."""
        seed, seq_length, full_length = statics
        step, offset, num, keys = tensors[:4]
        stream = cls(seed, step, offset, num,
                     tensors[4] if len(tensors) > 4 else seq_length, full_length)
        stream.keys = keys
        return stream

    def dropout(self, x: tf.Tensor, rate: float, seq_view=None, rows=None,
                seq_length=None) -> tf.Tensor:
        """x: float Tensor whose values are example-major (e.g. [B, ...] or [B*S, H] with B the
        tower's examples); `seq_view`: optional per-example layout of x, Python ints and `SEQ`
        for a sequence axis (e.g. (SEQ, H), (N, SEQ, SEQ)), or `FIRST` for a sequence axis of
        which x holds the first position only (e.g. (FIRST, H) for [B, H], (N, FIRST, SEQ) for
        [B, N, 1, S]). Keeps each value with probability 1 - rate (to 2**-16), scaled by
        1/(1 - rate), as `tf.nn.dropout`.

        `rows`: optional (token_rows, padded_rows): x [N, ...] is the rows `token_rows` (int64
        [N]) of an example-major [padded_rows, ...] Tensor (the real tokens of [B*S, H], the
        model's `drop_padding`); the masks are drawn for that padded Tensor and its rows
        `token_rows` kept, so each real value gets the mask it gets in the padded run.

        `seq_length`: the batch's sequence length S (int or int32 scalar Tensor), needed with
        `FIRST` when this stream has no layout (`full_length` None): the masks are drawn for
        the [S]-long view and their first position kept, so x's values get the masks they get
        in the run that computes every position."""
        key = self._key()
        size = tf.size(x, out_type=tf.int64)
        if rows is not None:
            size = tf.cast(rows[1], tf.int64) * tf.cast(tf.reduce_prod(tf.shape(x)[1:]),
                                                         tf.int64)
        full_view, per_example = self._view(seq_view, size, seq_length)
        # One 16-bit draw per value: Philox yields 4 32-bit words (8 draws) per counter
        # increment, and each example takes a whole number of increments, so an example's draws
        # start at counter offset * increments. 16 bits instead of a float32 uniform's 32 halve
        # the generator's work (its cost dominates dropout on CPU, docs/benchmarks.md).
        increments = (per_example + 7) // 8

        def draw():
            counter = tf.stack([tf.cast(self.example_offset * increments, tf.uint64),
                                tf.cast(self.step, tf.uint64)])
            return tf.raw_ops.StatelessRandomUniformFullIntV2(
                shape=tf.stack([self.num_examples, tf.cast(increments * 4, tf.int64)]),
                key=key, counter=counter, alg=1, dtype=tf.uint32)  # Philox

        drawn_outside = current().drawn_outside
        words = draw() if drawn_outside is None else drawn_outside.words(draw)
        draws = tf.reshape(tf.bitcast(words, tf.uint16), tf.stack([self.num_examples, -1]))
        draws = draws[:, :per_example]
        if full_view is not None:
            draws = self._in_layout(draws, full_view, seq_view)
        if rows is not None:
            padded_shape = tf.concat([tf.reshape(tf.cast(rows[1], tf.int32), [1]),
                                      tf.shape(x)[1:]], 0)
            draws = tf.gather(tf.reshape(draws, padded_shape), rows[0])
        keep = tf.reshape(draws, tf.shape(x)) >= _drop_threshold(rate)
        scale = tf.cast(1.0 / (1.0 - rate), x.dtype)
        return tf.where(keep, x * scale, tf.zeros([], x.dtype))

    def _view(self, seq_view, size, seq_length):
        """(the per-example view the masks are drawn in, or None; its number of values): the
        layout's (SEQ and FIRST axes `full_length` long) or, for a FIRST view without a
        layout, the batch's (`seq_length`); else `size` values split evenly over the
        examples."""
        if seq_view is None or (self.full_length is None and FIRST not in seq_view):
            return None, size // self.num_examples
        length = self.full_length if self.full_length is not None else seq_length
        if length is None:
            raise ValueError("dropout: a FIRST view without a layout needs seq_length")
        full_view = [length if d in (SEQ, FIRST) else d for d in seq_view]
        per_example = 1
        for d in full_view:
            per_example *= tf.cast(d, tf.int64) if isinstance(d, tf.Tensor) else d
        return full_view, per_example

    def _in_layout(self, draws, full_view, seq_view):
        """The draws of the L-long layout [E, *full_view] cut (or padded) to the batch's
        sequence length along the `SEQ` axes, and to the first position along `FIRST` ones."""
        draws = tf.reshape(draws, [-1] + full_view)
        # A length unknown in the trace (one trace for every cut) is a cut of the layout:
        # a longer batch would not reshape to x, a loud error.
        # A FIRST axis keeps the layout's first position.
        cuts = [slice(0, 1) if d == FIRST else slice(None) for d in seq_view]
        if self.full_length is None or not isinstance(self.seq_length, int) or \
                self.seq_length <= self.full_length:
            real = tuple([slice(None)] + [slice(0, self.seq_length) if d == SEQ else cut
                                          for d, cut in zip(seq_view, cuts)])
            return draws[real]
        # Positions past the layout are padding in every example: kept.
        past = self.seq_length - self.full_length
        draws = draws[tuple([slice(None)] + cuts)]
        return tf.pad(draws, [[0, 0]] + [[0, past] if d == SEQ else [0, 0] for d in seq_view],
                      constant_values=np.uint16(0xFFFF))


def _drop_threshold(rate: float) -> tf.Tensor:
    """uint16 scalar t: a uniform 16-bit draw d is dropped when d < t, i.e. with probability
    t / 2**16 = `rate` rounded to the nearest multiple of 2**-16 (0.1 -> 0.1000061)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return tf.constant(min(int(round(rate * 65536)), 65535), tf.uint16)


class OutsideDraws:
    """Dropout's random words drawn by TensorFlow's kernels outside an XLA-compiled tower.

    On CPU, XLA's Philox (the same values as TensorFlow's kernel) takes several times the time
    of TensorFlow's `StatelessRandomUniformFullIntV2` for the same words (docs/benchmarks.md,
    "XLA's random numbers on CPU"). So the towers (`engine/towers.py`) trace the tower once
    under `recording()` outside the compiled function, where every stream call's words are
    real draws of the caller's graph (the rest of that trace is unused and pruned), and pass
    them into the compiled function, whose stream calls take them under `supplied(words)`
    instead of drawing: the same words, call for call, so the same masks.
    """

    def __init__(self, supplied: Optional[Sequence[tf.Tensor]] = None):
        self.supplying = supplied is not None
        self.drawn: List[tf.Tensor] = list(supplied) if self.supplying else []
        self.taken = 0

    @classmethod
    def recording(cls) -> "OutsideDraws":
        """Each stream call draws its words and appends them to `drawn`."""
        return cls(None)

    @classmethod
    def supplied(cls, words: Sequence[tf.Tensor]) -> "OutsideDraws":
        """Stream calls take `words` (a recording's `drawn`), in order, instead of drawing;
        `check_all_taken` after the traced block."""
        return cls(words)

    def words(self, draw: Callable[[], tf.Tensor]) -> tf.Tensor:
        """The next stream call's words: `draw()` (recorded), or the next supplied ones."""
        if not self.supplying:
            words = draw()
            self.drawn.append(words)
            return words
        if self.taken >= len(self.drawn):
            raise ValueError(f"the compiled tower draws more than the {len(self.drawn)} dropout "
                             f"masks drawn outside it")
        self.taken += 1
        return self.drawn[self.taken - 1]

    def check_all_taken(self) -> None:
        """Raises unless every supplied word was taken (the trace drew what the recording did)."""
        if self.supplying and self.taken != len(self.drawn):
            raise ValueError(f"the compiled tower drew {self.taken} dropout masks, "
                             f"{len(self.drawn)} were drawn outside it")


@dataclasses.dataclass(frozen=True)
class ExecutionContext:
    """How the model is run while it is traced (the module docstring's list).

    Attributes:
      stream: the `DropoutStream` dropout draws from, or None (`tf.nn.dropout`).
      parameters: `variable.ref()` -> the Tensor the model reads for that variable, or None
        (every variable is read as it is).
      drawn_outside: `OutsideDraws` recording or supplying dropout's random words, or None.
      recompute_layers: training recomputes each encoder layer's activations in the backward
        pass (gradient checkpointing, `recomputed`).
      compile_layers: each encoder layer runs as one XLA computation (`CompiledLayer`).
      real_tokens: training may skip the padding (`drop_padding`) where the loss ignores it.
      inference_kernels: the attention's transposes and batched products escape oneDNN's
        rewrites (inference only).
      frozen_tables: `variable.ref()` -> the `frozen_table` (int32 constant) an embedding
        table is read from, or None (tables read as they are).
      attention_chunk: query rows per chunk of a RoPE model's global attention (0: not
        chunked).
      recompute_band: training recomputes a RoPE local layer's band in the backward pass.
    """
    stream: Optional[DropoutStream] = None
    parameters: Optional[Mapping] = None
    drawn_outside: Optional[OutsideDraws] = None
    recompute_layers: bool = False
    compile_layers: bool = False
    real_tokens: bool = False
    inference_kernels: bool = False
    frozen_tables: Optional[Mapping] = None
    attention_chunk: int = 256
    recompute_band: bool = True

    @property
    def in_trainer_towers(self) -> bool:
        """Whether the model is traced in the trainer's towers (the only place that sets a
        `stream`): there the element-wise pieces run as XLA computations (the GELU, the
        masked-LM loss); elsewhere (evaluation, prediction, the export) TensorFlow's ops."""
        return self.stream is not None

    def value(self, var):
        """What the model reads for the `tf.Variable` `var`: the variable, or the Tensor
        `parameters` gives for it. Every read of a weight in the model and the heads goes
        through here, so the towers can run the model on per-device copies of the weights (an
        XLA-compiled tower cannot touch a variable that lives on another device) and
        differentiate with respect to those copies."""
        if self.parameters is None:
            return var
        return self.parameters.get(var.ref(), var)

    def gather(self, table, ids):
        """Rows `ids` of the embedding table `table` (a `tf.Variable`): a gather of the table
        read as a Tensor (not of the variable itself: see `BertModel.embed`), or of its
        `frozen_tables` constant."""
        bits = self.frozen_tables.get(table.ref()) if self.frozen_tables else None
        if bits is None:
            return tf.gather(tf.convert_to_tensor(self.value(table)), ids)
        return tf.bitcast(tf.gather(bits, ids), tf.float32)


_CURRENT: "contextvars.ContextVar[ExecutionContext]" = contextvars.ContextVar(
    "bert_mgpu_execution_context")
_PLAIN = ExecutionContext()


def current() -> ExecutionContext:
    """The context the model is traced under (`ExecutionContext()` outside any block)."""
    return _CURRENT.get(_PLAIN)


@contextlib.contextmanager
def entered(**changes) -> Iterator[ExecutionContext]:
    """Within the block, `current()` is the current context with `changes` (fields of
    `ExecutionContext`) applied; the previous one is current again after. Yields the new one."""
    context = dataclasses.replace(current(), **changes)
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def frozen_table(table: np.ndarray) -> tf.Tensor:
    """`table` (float32) as a constant for `frozen_tables`: its values' bits as int32, which a
    converter leaves as they are (`ExecutionContext.gather` reads them back exactly)."""
    return tf.constant(np.asarray(table, np.float32).view(np.int32))


def substituted(variables: Sequence[tf.Variable], values: Sequence[tf.Tensor]) -> Mapping:
    """`parameters` under which the model reads `values[i]` for `variables[i]`."""
    return {v.ref(): t for v, t in zip(variables, values)}


def recomputed(fn: Callable[[tf.Tensor], tf.Tensor], x: tf.Tensor,
               variables: Sequence[tf.Variable]) -> tf.Tensor:
    """fn(x), whose activations are not kept for the backward pass but computed again there
    (gradient checkpointing, `tf.recompute_grad`): the backward pass keeps `x` and the output
    only.

    The recomputation is exact: it runs in the forward pass's dropout stream with the same
    call indices (so the same position-keyed masks) and with the same `parameters`, and the
    weights' values under `parameters` (per-device copies) are explicit inputs, so their
    gradients flow as without checkpointing.

    Args:
      fn: float Tensor [M, H] -> float Tensor [M, H], reading only `variables` (through
        `ExecutionContext.value`) and drawing its dropout from the current stream.
      x: fn's input.
      variables: the `tf.Variable`s fn reads.
    """
    stream, overrides = current().stream, current().parameters
    first_call = stream.calls if stream is not None else 0
    copied = [v for v in variables if overrides is not None and v.ref() in overrides]
    state = {}

    @tf.recompute_grad
    def run(inputs, *copies):
        saved_calls = stream.calls if stream is not None else 0
        values = current().parameters if overrides is None else \
            {**overrides, **substituted(copied, copies)}
        if stream is not None:
            stream.calls = first_call  # the forward pass's masks, call for call
        try:
            with entered(stream=stream, parameters=values):
                out = fn(inputs)
            state["end_calls"] = stream.calls if stream is not None else 0
            return out
        finally:
            if stream is not None:
                stream.calls = saved_calls

    out = run(x, *[overrides[v.ref()] for v in copied])
    if stream is not None:
        stream.calls = state["end_calls"]  # the next dropout call continues after fn's
    return out


# The most dropout masks one encoder layer draws (attention probabilities, attention output,
# feed-forward output).
_LAYER_DROPOUTS = 3


class CompiledLayer:
    """Encoder layers run as one XLA computation each (`ExecutionContext.compile_layers`,
    --xla_layers): one `tf.function(jit_compile=True)` per `encode` call, traced once for all
    the stack's layers (whose shapes are the same) with their weights as arguments, so XLA fuses
    each layer's element-wise work (bias adds, GELU, dropout, residuals, LayerNorm, softmax)
    between the matmuls, forward and backward, and compiles once per batch shape.

    The layer computes what the uncompiled one does: its dropout draws, inside the computation,
    the masks of the current stream's next calls (the same Philox keys and counters: the keys are
    passed in, the counters derive from the same step and positions), and its weights are the
    values the context gives outside (a tower's copies or the variables' values), so towers,
    gradient accumulation and the position-keyed masks are unchanged (tests/test_modeling.py
    compares outputs and gradients with the uncompiled layers, dropout on).

    Args (of the constructor):
      template: one layer's blocks (each with `variables()`), whose shapes every layer shares.
      layer_for: attention_mask (float Tensor [B, F, T]) -> layer, where
        layer(*blocks, x, first_only) is one encoder layer for a batch of that mask's shape.
    """

    def __init__(self, template, layer_for):
        self.variables = [v for block in template for v in block.variables()]
        self.stream = current().stream
        self.statics = None
        self.calls = None  # the dropout calls one layer makes (known once traced)

        def run(x, attention_mask, stream_tensors, weights):
            layer = layer_for(attention_mask)
            inner = (DropoutStream.inside(stream_tensors, self.statics)
                     if self.stream is not None else None)
            with entered(stream=inner, parameters=substituted(self.variables, weights)):
                out = layer(*template, x, False)
            self.calls = inner.calls if inner is not None else 0
            return out

        self.run = tf.function(run, jit_compile=True, autograph=False)

    def __call__(self, blocks, x, attention_mask):
        """The layer of `blocks` (one layer's blocks, as `template`) on x [B*S, H]."""
        weights = [tf.convert_to_tensor(current().value(v))
                   for block in blocks for v in block.variables()]
        stream_tensors = []
        if self.stream is not None:
            stream_tensors, self.statics = self.stream.state(_LAYER_DROPOUTS)
        out = self.run(x, attention_mask, stream_tensors, weights)
        if self.stream is not None:
            self.stream.calls += self.calls
        return out
