"""absl flags (Google's names, defaults and help) in groups, and flags -> run configs.

The only module that imports `absl.flags`. Every flag is declared once, in `_SPECS`, with one
help text; a script defines the groups it uses (`define_*_flags()`, as Model Garden's
`define_flags`), then in `main` builds its config from `config.py` with the matching
`*_config()`: fields are filled from the flags of the same name (`from_flags`), subtrees
(`model`, `train`, `cluster`) likewise, and the config validates itself. Nothing below this layer
reads FLAGS.
"""

import dataclasses
import glob
import os
import re
import sys
import tempfile
from typing import List, Optional

from absl import flags, logging

from bert_mgpu.configs.base import (
    LR_SCHEDULES,
    OPTIMIZERS,
    PRECISIONS,
    TRUNCATIONS,
    ModelFiles,
    TrainOptions,
    resolve_cluster,
    split_tasks,
)
from bert_mgpu.configs.classifier import (
    CLASSIFIER_INPUTS,
    TASK_SAMPLINGS,
    TASK_TYPE_OF,
    TASK_TYPES,
    WINDOW_POOLINGS,
    ClassifierConfig,
)
from bert_mgpu.configs.features import ExtractFeaturesConfig
from bert_mgpu.configs.ner import TAG_SCHEMES, NerConfig
from bert_mgpu.configs.pretraining import CreatePretrainingDataConfig, PretrainingConfig
from bert_mgpu.configs.serving import (
    DEFAULT_LENGTH_CHUNKS,
    ConvertHfConfig,
    ConvertToHfConfig,
    ExportConfig,
)
from bert_mgpu.configs.squad import SquadAnswerOptions, SquadConfig
from bert_mgpu.configs.vocab import VOCAB_ALGORITHMS, CreateVocabConfig
from bert_mgpu.model.bert_config import read_bert_config

FLAGS = flags.FLAGS

# The flags are defined here but belong to the script that asks for them: absl attributes a flag
# to the module that called DEFINE_*, and `--help` lists the main module's flags only. Disclaimed,
# this module's definitions are attributed to its caller (the script), so `--help` lists each
# script's own flags.
flags.disclaim_key_flags()


class FlagError(ValueError):
    """A flag value that cannot work; the message names the flag."""


# ---------------------------------------------------------------------------------------------
# Every flag, once: name -> (kind, default, help[, enum values]).

_BERT_CONFIG_HELP = ("The config json file corresponding to the pre-trained BERT model. This "
                     "specifies the model architecture.")
_SPECS = {
    # Model files (the `model` subtree).
    "bert_config_file": ("string", None, _BERT_CONFIG_HELP),
    "init_checkpoint": ("string", None, "Initial checkpoint (usually from a pre-trained BERT "
                                        "model)."),
    "vocab_file": ("string", None, "The vocabulary file that the BERT model was trained on."),
    "spm_model_file": ("string", None, "A SentencePiece model to use instead of --vocab_file "
                                       "(ALBERT style)."),
    "do_lower_case": ("bool", True, "Whether to lower case the input text. Should be True for "
                                    "uncased models and False for cased models."),
    "max_seq_length": ("integer", 128, "The maximum total input sequence length after "
                                       "WordPiece tokenization. Longer sequences are "
                                       "truncated, shorter padded."),
    # Google's common training flags.
    "output_dir": ("string", None, "The output directory where the model checkpoints will be "
                                   "written."),
    "do_train": ("bool", False, "Whether to run training."),
    "do_eval": ("bool", False, "Whether to run eval on the dev set."),
    "do_predict": ("bool", False, "Whether to run the model in inference mode on the test set "
                                  "(writes test_results.tsv and predict.txt)."),
    "train_batch_size": ("integer", 32, "Batch size for training, per tower (--n_gpus)."),
    "eval_batch_size": ("integer", 8, "Total batch size for eval."),
    "predict_batch_size": ("integer", 8, "Total batch size for predict."),
    "learning_rate": ("float", 5e-5, "The initial learning rate for Adam."),
    "save_checkpoints_steps": ("integer", 1000, "How often to save the model checkpoint."),
    "num_train_steps": ("integer", 100000, "Number of training steps (updates)."),
    "num_warmup_steps": ("integer", 10000, "Number of warmup steps."),
    "num_train_epochs": ("float", 3.0, "Total number of training epochs to perform."),
    "warmup_proportion": ("float", 0.1, "Proportion of training to perform linear learning "
                                        "rate warmup for. E.g., 0.1 = 10% of training."),
    "allow_random_weights": ("bool", False, "Allow --do_eval/--do_predict without --do_train, "
                                            "a checkpoint in --output_dir or --init_checkpoint "
                                            "(an untrained model: normally a mistake)."),
    # TPU flags of Google's scripts: accepted so old launch scripts keep working, then ignored.
    "use_tpu": ("bool", False, "Accepted for compatibility; ignored (no TPU support)."),
    "tpu_name": ("string", None, "Accepted for compatibility; ignored."),
    "tpu_zone": ("string", None, "Accepted for compatibility; ignored."),
    "gcp_project": ("string", None, "Accepted for compatibility; ignored."),
    "master": ("string", None, "Accepted for compatibility; ignored."),
    "num_tpu_cores": ("integer", 8, "Accepted for compatibility; ignored."),
    "iterations_per_loop": ("integer", 1000, "Accepted for compatibility; ignored."),
    "use_one_hot_embeddings": ("bool", False, "Accepted for compatibility; ignored."),
    # The multi-GPU fork's and this project's trainer flags (the `train` subtree).
    "n_gpus": ("integer", 1, "Number of towers (model replicas in one graph). Tower i runs on "
                             "visible GPU i % (number of GPUs); more towers than GPUs is "
                             "allowed. train_batch_size is per tower. Without a GPU the CPU is "
                             "split into n_gpus logical devices."),
    "num_accumulation_steps": ("integer", 1, "Micro-batches (each train_batch_size x n_gpus) "
                                             "whose gradients are summed before one update."),
    "use_xla": ("bool", False, "Compile each tower's forward and backward pass with XLA."),
    "xla_layers": ("bool", False, "Compile each encoder layer's forward and backward pass "
                                  "with XLA (its element-wise work fused between the "
                                  "matmuls), the rest of the step as without; the same "
                                  "gradients, dropout masks included."),
    "gradient_checkpointing": ("bool", False, "Recompute each encoder layer's activations in "
                                              "the backward pass instead of keeping them: "
                                              "less memory for more compute, the same "
                                              "gradients (dropout masks included)."),
    "precision": ("enum", "fp32", "Activation precision: fp16 uses dynamic loss scaling "
                                  "(non-finite steps are skipped), bf16 none; variables stay "
                                  "fp32.", PRECISIONS),
    "optimizer": ("enum", "adamw", "adamw = Google's AdamWeightDecay; lamb = layer-wise "
                                   "adaptive (large batches).", OPTIMIZERS),
    "adam_bias_correction": ("bool", False, "With --optimizer=adamw: bias-corrected Adam "
                             "moments, as PyTorch's AdamW; false = Google's AdamWeightDecay "
                             "exactly. Default true in the fine-tuning scripts, false in "
                             "run_pretraining.py (README: deliberate differences)."),
    "clip_norm": ("float", 1.0, "Gradients are clipped to this global norm (Google: 1.0; "
                                "Cramming: 0.5)."),
    "indexed_slices_norm": ("enum", "dense", "The word-embedding gradient in the clipped "
                            "global norm: dense = the summed gradient's norm (the same for any "
                            "--n_gpus); values = Google's TF1 clipping (a repeated token's rows "
                            "counted apart; one worker, no accumulation).", ("dense", "values")),
    "lr_schedule": ("enum", "linear", "linear = Google's warmup then linear decay; one_cycle = "
                                      "Cramming's triangle: 0 -> learning_rate at half of "
                                      "num_train_steps -> 0 (num_warmup_steps unused).",
                    LR_SCHEDULES),
    "batch_ramp_steps": ("integer", 0, "Cramming's batch ramp: over the first N updates the "
                                       "accumulated micro-batches grow linearly from 1 to "
                                       "num_accumulation_steps. 0 = off."),
    "keep_checkpoint_max": ("integer", 5, "Checkpoints kept in output_dir (0 = all)."),
    "random_seed": ("integer", 12345, "Seed of the input order, of dropout and of the "
                                      "initialisation of variables not loaded from a "
                                      "checkpoint."),
    "log_every_n_steps": ("integer", 100, "Log and write summaries every N updates."),
    "shuffle_buffer_size": ("integer", 100, "0 = the whole training set, held in memory, in a "
                                            "fresh seeded permutation every epoch "
                                            "(run_classifier_mgpu.py's default: a file sorted "
                                            "by label still trains); N >= 1 = Google's record "
                                            "shuffle buffer (run_pretraining.py's default 100; "
                                            "1 = records in file order)."),
    # Several machines (the `cluster` subtree).
    "worker_hosts": ("string", None, "Multi-machine training: comma-separated host:port of "
                                     "every worker (the same list on each); worker 0 is the "
                                     "chief. Without it, TF_CONFIG is used if set."),
    "task_index": ("integer", None, "Multi-machine training: this worker's index in "
                                    "--worker_hosts."),
    "collective_timeout_seconds": ("float", 300.0, "Multi-machine training: a worker that does "
                                                   "not answer an all-reduce within this time "
                                                   "is taken as dead and the others stop."),
    # run_pretraining.py
    "input_file": ("string", None, "Input TF example files (can be a glob or comma "
                                   "separated)."),
    "max_predictions_per_seq": ("integer", 20, "Maximum number of masked LM predictions per "
                                               "sequence. Must match data generation."),
    "max_eval_steps": ("integer", 100, "Maximum number of eval steps."),
    "no_next_sentence": ("bool", False, "Masked LM only (data made with "
                                        "create_pretraining_data.py --no_next_sentence or "
                                        "--pack_sequences): no next-sentence head, no "
                                        "cls/seq_relationship variables."),
    # run_classifier_mgpu.py
    "data_dir": ("string", None, "The input data dir. Should contain the .tsv files (or other "
                                 "data files) for the task. Several tasks: one dir per task, "
                                 "comma-separated."),
    "task_name": ("string", None, "The name of the task to train: cola, mnli, mrpc, xnli, stsb "
                                  "(GLUE's STS-B, a regression), or tsv (your own "
                                  "train/dev/test.tsv with a header row; see --task_type). "
                                  "Comma-separated names train several tasks at once on one "
                                  "encoder (multi-task; --data_dir one dir per task)."),
    "label_list": ("list", None, "tsv task: the labels in id order (default: the sorted set of "
                                 "labels in train.tsv). Several tasks: one list per task, "
                                 "separated by ';' (empty: that task's default)."),
    "processors_file": ("string", None, "A Python file with your own DataProcessor classes, "
                                        "written as for Google's run_classifier.py (import "
                                        "tokenization, from run_classifier import "
                                        "DataProcessor, InputExample, tf.gfile): "
                                        "--task_name=high_level or =HighLevelProcessor picks "
                                        "class HighLevelProcessor."),
    "text_columns": ("list", None, "tsv task: the text column(s) by name (text_a[,text_b]); "
                                   "other columns are ignored. Default: the columns named "
                                   "text_a/text/sentence/... and text_b/sentence2/..., any "
                                   "other column besides 'label' being an error."),
    "column_names": ("list", None, "tsv task: the files have no header row; these are their "
                                   "columns' names, e.g. id,text,label."),
    "data_format": ("enum", "tsv", "tsv task: 'tsv' (train.tsv ..., tab-separated, no quoting, "
                                   "as Google's) or 'csv' (train.csv ..., comma-separated, "
                                   "quoted fields may hold commas and newlines).",
                    ("tsv", "csv")),
    "truncation": ("enum", "head", "How to shorten a long single text: 'head' keeps the "
                                   "beginning (Google); 'head_tail' keeps --head_tokens from "
                                   "the start and the rest from the end (Sun et al. 2019).",
                   TRUNCATIONS),
    "head_tokens": ("integer", 128, "With --truncation=head_tail: tokens kept from the start "
                                    "of the text."),
    "layerwise_lr_decay": ("float", 1.0, "Layer-wise LR decay: encoder layer l of L gets "
                                         "learning_rate * RATE^(L - l), the embeddings RATE^L, "
                                         "the classifier the full rate. 1.0 = off."),
    # run_classifier_mgpu.py task types and head input (tasks.py).
    "task_type": ("string", "classification",
                  "tsv task: classification (one label per row, softmax), regression (a number, "
                  "mean squared error) or multilabel (comma-separated labels, sigmoid). "
                  "--task_name=stsb is regression. Several tasks: one type per task, "
                  "comma-separated, or one for all."),
    "task_sampling": ("enum", "proportional",
                      "Several tasks: how the task of each global batch is drawn (a function "
                      "of --random_seed and the step): proportional to its training examples, "
                      "sqrt (to their square root), uniform.", TASK_SAMPLINGS),
    "multilabel_threshold": ("float", 0.5, "--task_type=multilabel: a label is predicted when "
                                           "its probability is above this."),
    "classifier_input": ("enum", "pooled", "What the output layer reads: pooled (Google: "
                                           "tanh(dense([CLS]))), cls (the last layer's [CLS] "
                                           "vector, no pooler), mean (the masked mean of the "
                                           "last layer), cls_last4 (the [CLS] vectors of the "
                                           "last 4 layers concatenated: width 4H).",
                         CLASSIFIER_INPUTS),
    # Length-aware batching (run_classifier_mgpu.py, run_ner.py, run_squad.py).
    "pad_to_longest": ("bool", True, "Pad each batch only to its longest example (rounded up to "
                                     "--pad_to_multiple_of), not to --max_seq_length; "
                                     "evaluation and prediction sorted by length, written in "
                                     "file order. Results equal the fully padded run's."),
    "pad_to_multiple_of": ("integer", 16, "With --pad_to_longest: batch lengths are multiples "
                                          "of this (bounds the shapes, hence the traces and XLA "
                                          "compilations, to max_seq_length / N)."),
    "group_by_length": ("bool", False, "Hugging Face's group_by_length: each epoch's shuffled "
                                       "order is cut into mega-batches of 50 global batches, "
                                       "each sorted by length, and the resulting batches are "
                                       "shuffled; seeded per epoch. Faster with "
                                       "--pad_to_longest, but changes the batches examples "
                                       "are seen in."),
    # Evaluation during training (fine-tuning scripts).
    "eval_every_n_steps": ("integer", 0, "Evaluate the dev set every N updates (and at the "
                                         "last): eval_history.tsv, TensorBoard run 'eval', "
                                         "eval_curve.png (with matplotlib). 0 = only at the end "
                                         "(Google)."),
    "keep_best_checkpoint": ("bool", False, "With --eval_every_n_steps: keep the model at the "
                                            "best --best_metric in OUTPUT_DIR/best (survives "
                                            "--keep_checkpoint_max); --do_predict uses it."),
    "best_metric": ("string", "eval_accuracy", "The eval_results key that decides the best "
                                               "checkpoint and early stopping (losses: lower "
                                               "is better; others: higher). Several tasks: "
                                               "one per task, comma-separated, or one for all; "
                                               "their mean decides."),
    "early_stopping_patience": ("integer", 0, "Stop training after this many evaluations "
                                              "without improvement of --best_metric (0 = "
                                              "never)."),
    # extract_features.py
    "output_file": ("string", None, "Output JSON-lines file."),
    "layers": ("string", "-1,-2,-3,-4", "Indexes of the encoder layers to output."),
    "batch_size": ("integer", 32, "Batch size for predictions."),
    # create_pretraining_data.py: Google's flags, then the new ones (defaults keep Google's
    # output).
    "do_whole_word_mask": ("bool", False, "Whether to use whole word masking rather than "
                                          "per-WordPiece masking."),
    "dupe_factor": ("integer", 10, "Number of times to duplicate the input data (with "
                                   "different masks)."),
    "masked_lm_prob": ("float", 0.15, "Masked LM probability."),
    "short_seq_prob": ("float", 0.1, "Probability of creating sequences which are shorter "
                                     "than the maximum length."),
    "num_workers": ("integer", 0, "0: Google's mode, the whole input in memory, output "
                                  "identical to Google's script. N>=1: sharded mode for large "
                                  "corpora: shards of --shard_size_mb made by N processes, "
                                  "each with a seed derived from --random_seed; memory bounded "
                                  "by the shard size."),
    "shard_size_mb": ("float", 8.0, "Sharded mode: input MB per shard (cut at document "
                                    "boundaries). The output depends on it, not on "
                                    "--num_workers."),
    "sentence_order_prediction": ("bool", False, "ALBERT's sentence-order prediction: segment "
                                                 "B always follows A in the document; label 1 "
                                                 "means they were swapped."),
    "pack_sequences": ("bool", False, "Cramming's packed masked-LM-only instances: the "
                                      "documents, each followed by [SEP], are one token stream "
                                      "cut into full-length [CLS] ... [SEP] instances (only the "
                                      "last one is shorter)."),
    "span_masking": ("bool", False, "Mask one contiguous span of whole words per instance "
                                    "instead of scattered tokens."),
    "span_length": ("integer", 0, "With --span_masking: words per span; 0 fills the usual "
                                  "masking budget min(max_predictions_per_seq, round(length * "
                                  "masked_lm_prob))."),
    "word_segmented_input": ("bool", False, "Input words are separated by whitespace (e.g. "
                                            "Chinese run through a word segmenter): mask whole "
                                            "words, as Chinese-BERT-wwm."),
    "progress_interval": ("float", 10.0, "Seconds between progress lines."),
    # Dynamic masking (create_pretraining_data.py and run_pretraining.py).
    "dynamic_masking": ("bool", False, "RoBERTa's dynamic masking, deterministic: "
                                       "create_pretraining_data.py writes unmasked records "
                                       "(with word_starts); run_pretraining.py masks each "
                                       "example anew every time it is read, from (random_seed, "
                                       "the example's index in the input stream)."),
    # run_squad.py (Google's flags; do_train, do_predict, max_seq_length etc. are above)
    "train_file": ("string", None, "SQuAD json for training. E.g., train-v1.1.json"),
    "predict_file": ("string", None, "SQuAD json for predictions. E.g., dev-v1.1.json or "
                                     "test-v1.1.json"),
    "doc_stride": ("integer", 128, "When splitting up a long document into chunks, how much "
                                   "stride to take between chunks."),
    "max_query_length": ("integer", 64, "The maximum number of tokens for the question. "
                                        "Questions longer than this will be truncated to this "
                                        "length."),
    "n_best_size": ("integer", 20, "The total number of n-best predictions to generate in the "
                                   "nbest_predictions.json output file."),
    "max_answer_length": ("integer", 30, "The maximum length of an answer that can be "
                                         "generated. This is needed because the start and end "
                                         "predictions are not conditioned on one another."),
    "verbose_logging": ("bool", False, "If true, all of the warnings related to data "
                                       "processing will be printed. A number of warnings are "
                                       "expected for a normal SQuAD evaluation."),
    "version_2_with_negative": ("bool", False, "If true, the SQuAD examples contain some that "
                                               "do not have an answer."),
    "null_score_diff_threshold": ("float", 0.0, "If null_score - best_non_null is greater than "
                                                "the threshold predict null."),
    # create_vocab.py (besides --input_file, --output_file, --do_lower_case, --num_workers,
    # --random_seed and --progress_interval above).
    "vocab_size": ("integer", 30522, "Entries of the vocabulary, exactly (special tokens and "
                                     "[unused] slots included)."),
    "algorithm": ("enum", "bpe", "How pieces are learned from the word counts: bpe "
                                 "(SentencePiece BPE, the lowest fertility measured), unigram "
                                 "(SentencePiece unigram LM) or wordpiece (likelihood-scored "
                                 "merges, pure Python, slower).", VOCAB_ALGORITHMS),
    "num_unused": ("integer", 99, "[unusedN] slots. The first 99 come before [UNK], so [UNK], "
                                  "[CLS], [SEP], [MASK] get ids 100-103 as in Google's English "
                                  "vocabularies; the rest follow [MASK] (Google's uncased has "
                                  "994)."),
    "reserved_tokens": ("list", [], "Comma-separated extra special tokens placed right after "
                                    "[MASK] (where Google's Chinese vocabulary has <S>,<T>)."),
    "spm_model_prefix": ("string", None, "Also keep the SentencePiece model the pieces come "
                                         "from (PREFIX.model, PREFIX.vocab; --algorithm=bpe or "
                                         "unigram), for --spm_model_file users: ALBERT's ids "
                                         "(<pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4); its "
                                         "size is SentencePiece's, above --vocab_size."),
    "min_char_count": ("integer", 1, "Characters seen fewer times are left out of the alphabet "
                                     "(their words become [UNK]); raise it on web-scale "
                                     "corpora."),
    "max_sentences": ("integer", 0, "0: count every line. N: a seeded uniform sample of N lines "
                                    "(SentencePiece's input_sentence_size)."),
    # convert_hf_checkpoint.py
    "hf_model_dir": ("string", None, "Hugging Face BERT folder: config.json, model.safetensors "
                                     "or pytorch_model.bin, vocab.txt."),
    "gelu": ("enum", "exact", "How to write Hugging Face's erf 'gelu': 'exact' keeps its "
                              "numerics (hidden_act 'gelu_exact'); 'tanh' writes Google's "
                              "'gelu' (the tanh approximation Google's code computes).",
             ("exact", "tanh")),
}

# Groups: the flags a kind of script shares.
MODEL_FLAGS = ("bert_config_file", "init_checkpoint", "vocab_file", "spm_model_file",
               "do_lower_case", "max_seq_length")
TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores",
             "iterations_per_loop", "use_one_hot_embeddings")
TRAINER_FLAGS = tuple(f.name for f in dataclasses.fields(TrainOptions))
CLUSTER_FLAGS = ("worker_hosts", "task_index", "collective_timeout_seconds")
GOOGLE_TRAINING_FLAGS = ("output_dir", "do_train", "do_eval", "eval_batch_size",
                         "learning_rate", "save_checkpoints_steps", "allow_random_weights")
LENGTH_BATCHING_FLAGS = ("pad_to_longest", "pad_to_multiple_of", "group_by_length")
EVAL_DURING_TRAINING_FLAGS = ("eval_every_n_steps", "keep_best_checkpoint", "best_metric",
                              "early_stopping_patience")
# Every training script: Google's common flags, the trainer's, the cluster's, TPU compatibility.
TRAINING_SCRIPT_FLAGS = GOOGLE_TRAINING_FLAGS + TRAINER_FLAGS + CLUSTER_FLAGS + TPU_FLAGS

_DEFINERS = {"string": flags.DEFINE_string, "bool": flags.DEFINE_bool,
             "integer": flags.DEFINE_integer, "float": flags.DEFINE_float,
             "list": flags.DEFINE_list}


def define_flags(*groups, helps=None, defaults=None) -> None:
    """Defines the flags of `groups` (tuples of names from `_SPECS`), each once.

    Args:
      groups: tuples of flag names; a name in several groups is defined once.
      helps: optional name -> help text, for a flag whose meaning a script narrows (e.g. what
        --input_file holds).
      defaults: optional name -> default, where a script's default differs (as Google's
        run_squad.py --max_seq_length=384).
    """
    helps, defaults = helps or {}, defaults or {}
    for name in dict.fromkeys(n for group in groups for n in group):
        if name in FLAGS:
            continue
        kind, default, help_text, *enum = _SPECS[name]
        help_text = helps.get(name, help_text)
        default = defaults.get(name, default)
        if kind == "enum":
            flags.DEFINE_enum(name, default, list(enum[0]), help_text)
        else:
            _DEFINERS[kind](name, default, help_text)


def parse_flags(argv: List[str]) -> List[str]:
    """absl's flag parsing for `app.run(..., flags_parser=parse_flags)`: a bad flag (unknown
    name, a value of the wrong type or outside its enum) is one line `SCRIPT: ERROR: ...` and
    exit code 1, as every other bad input."""
    script = os.path.basename(argv[0]) if argv else "bert_mgpu"
    try:
        rest = FLAGS(argv)
    except flags.Error as e:
        message = " ".join(str(e).split())
        sys.stderr.write(f"{script}: ERROR: {message} (--help lists the flags)\n")
        sys.exit(1)
    try:
        check_remote_paths()
    except FlagError as e:
        sys.stderr.write(f"{script}: ERROR: {e}\n")
        sys.exit(1)
    return rest


def check_remote_paths() -> None:
    """Raises FlagError naming the flag and the path when a remote path (gs://, s3://,
    hdfs://, ...) of any flag cannot be reached (a file system TensorFlow does not have, no
    credentials, no network): before any work, not as a traceback from deep in the run. Only
    loads TensorFlow when a flag holds such a path."""
    remote = [(name, part.strip()) for name in _declared_names()
              if isinstance(FLAGS[name].value, str)
              for part in FLAGS[name].value.split(",") if _is_remote(part)]
    if not remote:
        return
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (only for remote paths)

    for name, path in remote:
        probe = path
        for wildcard in "*?[":  # a pattern: the directory it lists
            if wildcard in probe:
                probe = os.path.dirname(probe[:probe.index(wildcard)])
        try:
            tf.io.gfile.exists(probe)
        except Exception as e:  # pylint: disable=broad-except  (tf.errors.OpError and others)
            message = " ".join(str(e).split()) or type(e).__name__
            raise FlagError(f"--{name}={path}: cannot be reached: {message}") from None


def _declared_names() -> List[str]:
    return [name for name in _SPECS if name in FLAGS]


def flag_values_dict() -> dict:
    """name -> value of every flag this module defined for the running script (run_config.json).
    """
    return {name: FLAGS[name].value for name in _declared_names()}


def from_flags(cls, **explicit):
    """`cls` (a config dataclass) with every field taken from the flag of the same name, except
    those given in `explicit` (subtrees and derived values)."""
    values = {f.name: getattr(FLAGS, f.name) for f in dataclasses.fields(cls)
              if f.name not in explicit and f.name in FLAGS}
    return cls(**values, **explicit)


def validated(cfg):
    """`cfg` after its own `validate()`; a ValueError becomes a FlagError (one line)."""
    try:
        cfg.validate()
    except ValueError as e:
        raise FlagError(str(e)) from None
    return cfg


def require(*names):
    """Raises FlagError for the first required flag that is not set."""
    for name in names:
        if getattr(FLAGS, name) in (None, ""):
            raise FlagError(f"--{name} is required")


def _is_remote(path: str) -> bool:
    return "://" in path


def _nearest_existing(path: str) -> str:
    """`path` itself or its nearest ancestor that exists."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _writable_directory(directory: str) -> bool:
    """Whether a file can be created in `directory`, tried for real: permission bits do not
    say it for root, nor for a read-only mount."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=".bert_mgpu-write-test-", dir=directory)
    except OSError:
        return False
    os.close(fd)
    os.remove(probe)
    return True


def _check_can_create_in(flag: str, path: str, what: str) -> None:
    """The missing `path` (a `what`) can be created: its nearest existing ancestor is a
    writable directory."""
    ancestor = _nearest_existing(path)
    if not os.path.isdir(ancestor):
        raise FlagError(f"--{flag}={path}: cannot create the {what}, {ancestor} is a file")
    if not _writable_directory(ancestor):
        raise FlagError(f"--{flag}={path}: cannot create the {what}, {ancestor} is not "
                        f"writable")


def check_output_dir(flag: str = "output_dir", path: Optional[str] = None) -> None:
    """Raises FlagError unless `--flag` names a writable directory or one that can be created.

    Every script's config builder calls it (or `check_output_files`) before any work, so a bad
    output path fails in one line, not after hours or with a traceback. Remote paths (gs://...)
    are left to the file system.
    """
    path = getattr(FLAGS, flag) if path is None else path
    if not path or _is_remote(path):
        return
    if os.path.lexists(path):
        if not os.path.isdir(path):
            raise FlagError(f"--{flag}={path} is a file, not a directory")
        if not _writable_directory(path):
            raise FlagError(f"--{flag}={path} is not writable")
    else:
        _check_can_create_in(flag, path, "directory")


def check_output_files(flag: str = "output_file", paths: Optional[str] = None) -> None:
    """Raises FlagError unless every comma-separated path of `--flag` can be written (replaced
    at the end of the run: the file itself stays untouched until then)."""
    paths = getattr(FLAGS, flag) if paths is None else paths
    for path in (p.strip() for p in (paths or "").split(",")):
        if not path or _is_remote(path):
            continue
        if os.path.isdir(path):
            raise FlagError(f"--{flag}={path} is a directory, not a file")
        if os.path.lexists(path):
            # Written next to it and renamed over it: the directory must be writable, and
            # a read-only file is not silently replaced.
            if not os.access(path, os.W_OK):
                raise FlagError(f"--{flag}={path} is not writable")
            if not _writable_directory(os.path.dirname(os.path.abspath(path))):
                raise FlagError(f"--{flag}={path}: its directory is not writable")
        else:
            _check_can_create_in(flag, path, "file")


def check_input_text_file(flag: str) -> None:
    """Raises FlagError unless the local file of `--flag` exists and is not empty (checked
    before the model is built; remote paths are checked when read)."""
    path = getattr(FLAGS, flag)
    if not path or _is_remote(path):
        return
    if not os.path.exists(path):
        raise FlagError(f"--{flag}: {path} not found")
    if os.path.isdir(path):
        raise FlagError(f"--{flag}: {path} is a directory, not a text file")
    if os.path.getsize(path) == 0:
        raise FlagError(f"--{flag}: {path} is empty (one example per line expected)")


def check_model_files(model: ModelFiles) -> None:
    """Reads --bert_config_file (and checks --max_seq_length against it), checks that the
    vocabulary exists, fits the model's vocab_size and suits --do_lower_case: at start, before
    TensorFlow is loaded, so a mistyped path costs a second, not the start-up. The job reads
    them again for real."""
    from bert_mgpu import tokenization

    bert_config = read_bert_config(model) if model.bert_config_file else None
    for flag in ("vocab_file", "spm_model_file"):
        path = getattr(model, flag)
        if path and not _is_remote(path) and not os.path.isfile(path):
            raise FlagError(f"--{flag}: {path} not found")
    flag = "spm_model_file" if model.spm_model_file else "vocab_file"
    path = getattr(model, flag)
    if bert_config is not None and path and not _is_remote(path):
        if model.spm_model_file:
            import sentencepiece  # pylint: disable=import-outside-toplevel
            size = sentencepiece.SentencePieceProcessor(model_file=path).GetPieceSize()
        else:
            size = len(tokenization.load_vocab(path))
        if size > bert_config.vocab_size:
            raise FlagError(f"--{flag}: {path} has {size} tokens, more than vocab_size "
                            f"{bert_config.vocab_size} in {model.bert_config_file} (ids past "
                            f"the embedding table)")
    # Google's casing check, for the scripts that tokenize text (they define --do_lower_case,
    # the flag its error tells the user to set). run_pretraining.py reads ids: its --vocab_file
    # (dynamic masking) only names the special tokens, whatever the checkpoint's casing.
    if (model.vocab_file or model.spm_model_file) and "do_lower_case" in FLAGS:
        tokenization.validate_case_matches_checkpoint(model.do_lower_case,
                                                      model.init_checkpoint)
    check_init_checkpoint(model.init_checkpoint)


def check_init_checkpoint(path: Optional[str]) -> None:
    """Raises FlagError when the local --init_checkpoint names no checkpoint: a prefix without
    its `.index`, a bundle file or a directory that does not exist (at start, before features
    are written; a directory's content and remote paths are read by the job)."""
    if not path or _is_remote(path) or os.path.isdir(path):
        return
    match = re.match(r"^(.*)\.(index|meta|data-\d{5}-of-\d{5})$", path)
    prefix = match.group(1) if match else path
    if not os.path.exists(prefix + ".index"):
        raise FlagError(f"--init_checkpoint: {path}: no checkpoint there (expected "
                        f"{prefix}.index and {prefix}.data-*)")


def _has_checkpoint(output_dir: str) -> bool:
    """Whether the trainer would resume from `output_dir` (remote: assumed, checked later)."""
    if _is_remote(output_dir):
        return True
    return os.path.isfile(os.path.join(output_dir, "checkpoint")) or \
        bool(glob.glob(os.path.join(glob.escape(output_dir), "model.ckpt-*.index")))


def check_weights_to_evaluate(cfg, do_predict: bool = False) -> None:
    """--do_eval/--do_predict without --do_train evaluate the checkpoint in --output_dir, else
    --init_checkpoint: with neither, the model would be random weights (a plausible-looking
    result of nothing). Refused in one line."""
    if cfg.do_train or cfg.model.init_checkpoint or cfg.allow_random_weights or \
            _has_checkpoint(cfg.output_dir):
        return
    what = "/".join(f"--{name}" for name, on in (("do_eval", cfg.do_eval),
                                                 ("do_predict", do_predict)) if on)
    raise FlagError(f"{what} without --do_train: no checkpoint in --output_dir={cfg.output_dir} "
                    f"and no --init_checkpoint, so the model would have random weights; train "
                    f"first (--do_train), give --init_checkpoint, or pass "
                    f"--allow_random_weights to run an untrained model on purpose")


def warn_ignored_tpu_flags():
    """Logs a warning for every TPU flag set on the command line."""
    for name in TPU_FLAGS:
        if name in FLAGS and FLAGS[name].present:
            logging.warning("--%s is accepted for compatibility with Google's scripts and "
                            "ignored (this implementation runs on GPUs/CPU).", name)


def parse_int_list(flag_name, text) -> List[int]:
    """'-1,-2' -> [-1, -2]; errors name the flag."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise FlagError(f"--{flag_name}: expected comma-separated integers, got {text!r}") \
            from None


def model_files() -> ModelFiles:
    """The `model` subtree from whichever model flags the script defined."""
    return from_flags(ModelFiles)


# The fine-tuning scripts' trainer defaults that differ from Google's (README, "Deliberate
# differences"): bias-corrected Adam, as Mosbach et al. and Zhang et al. (ICLR 2021) fine-tune;
# --adam_bias_correction=false is Google's AdamWeightDecay exactly.
FINE_TUNING_DEFAULTS = {"adam_bias_correction": True}


def train_options() -> TrainOptions:
    """The `train` subtree (the trainer's flags). --optimizer=lamb always corrects its
    moments: a fine-tuning script's default --adam_bias_correction=true does not apply to it
    (given explicitly, the config refuses it, naming the flag)."""
    explicit = {}
    if FLAGS.optimizer != "adamw" and not FLAGS["adam_bias_correction"].present:
        explicit["adam_bias_correction"] = False
    return validated(from_flags(TrainOptions, **explicit))


def cluster_config():
    """The `cluster` subtree: from --worker_hosts/--task_index or TF_CONFIG, or None."""
    if FLAGS.collective_timeout_seconds <= 0:
        raise FlagError("--collective_timeout_seconds must be > 0")
    if FLAGS.task_index is not None and not FLAGS.worker_hosts:
        raise FlagError("--task_index needs --worker_hosts")
    return resolve_cluster(FLAGS.worker_hosts, FLAGS.task_index,
                                  FLAGS.collective_timeout_seconds)


def _training_job_config(cls, **explicit):
    """A training job's config: its fields, the model/train/cluster subtrees, the flags."""
    warn_ignored_tpu_flags()
    cfg = validated(from_flags(cls, model=model_files(), train=train_options(),
                               cluster=cluster_config(), flags=flag_values_dict(), **explicit))
    check_model_files(cfg.model)
    return cfg


# ---------------------------------------------------------------------------------------------
# One define/config pair per script.

def define_pretraining_flags():
    define_flags(("bert_config_file", "init_checkpoint", "max_seq_length"),
                 TRAINING_SCRIPT_FLAGS,
                 ("train_batch_size", "input_file", "max_predictions_per_seq",
                  "num_train_steps", "num_warmup_steps", "max_eval_steps", "no_next_sentence"),
                 PRETRAINING_MASKING_FLAGS,
                 helps=PRETRAINING_MASKING_HELPS)


# run_pretraining.py --dynamic_masking: the masking flags of create_pretraining_data.py, applied
# in the input pipeline.
PRETRAINING_MASKING_FLAGS = ("dynamic_masking", "vocab_file", "masked_lm_prob",
                             "do_whole_word_mask", "span_masking", "span_length")
PRETRAINING_MASKING_HELPS = {
    "vocab_file": "With --dynamic_masking: the vocabulary the records were made with ([MASK], "
                  "[CLS], [SEP] ids; random words are drawn from it).",
    "masked_lm_prob": "With --dynamic_masking: masked LM probability (e.g. 0.15 Google, up "
                      "to 0.4 Wettig et al. 2022).",
    "do_whole_word_mask": "With --dynamic_masking: mask whole words (the records' "
                          "word_starts: ## pieces, or --word_segmented_input units).",
    "span_masking": "With --dynamic_masking: mask one contiguous span of whole words per "
                    "example (as create_pretraining_data.py --span_masking).",
}


def pretraining_config() -> PretrainingConfig:
    require("bert_config_file", "input_file", "output_dir")
    check_output_dir()
    cfg = _training_job_config(PretrainingConfig)
    check_weights_to_evaluate(cfg)
    from bert_mgpu.data import input_pipeline
    input_pipeline.expand_input_files(cfg.input_file)  # a pattern matching nothing: at start
    warn_warmup_longer_than_training(cfg)
    return cfg


def warn_warmup_longer_than_training(cfg: PretrainingConfig) -> None:
    """Logs a warning when the linear schedule's warmup outlasts the run: the learning rate
    would rise for every step and never reach --learning_rate."""
    train = cfg.train_config
    if cfg.do_train and train.lr_schedule == "linear" and \
            train.num_warmup_steps > train.num_train_steps:
        peak = train.learning_rate * train.num_train_steps / train.num_warmup_steps
        logging.warning("--num_warmup_steps=%d > --num_train_steps=%d: the learning rate rises "
                        "for the whole run and never reaches its peak --learning_rate=%g "
                        "(at most %g, at the last step)", train.num_warmup_steps,
                        train.num_train_steps, train.learning_rate, peak)


# Long documents in run_classifier_mgpu.py: `doc_stride` is run_squad.py's flag (defined once,
# above) with the classifier's default 0 and meaning; `window_pooling` is the classifier's own.
_SPECS.setdefault("window_pooling", (
    "enum", "mean", "With --doc_stride: how a document's windows are pooled into its "
                    "prediction in eval and predict: the mean or the max of the windows' "
                    "probabilities (regression: scores; multilabel: sigmoid probabilities). "
                    "Default mean.", WINDOW_POOLINGS))
CLASSIFIER_WINDOW_FLAGS = ("doc_stride", "window_pooling")
CLASSIFIER_WINDOW_HELPS = {
    "doc_stride": "0 (default): a text longer than max_seq_length is truncated (Google). N > 0: "
                  "it becomes windows of max_seq_length - 2 pieces starting N pieces apart "
                  "(the last one ending at the text's end; with a text_b, windows over text_a "
                  "with text_b in each); training sees every window with the document's label, "
                  "each document weighted once; eval and predict pool each document's windows "
                  "(--window_pooling), one output line per document."}


def define_classifier_flags():
    define_flags(MODEL_FLAGS, TRAINING_SCRIPT_FLAGS,
                 ("do_predict", "predict_batch_size", "num_train_epochs", "warmup_proportion",
                  "data_dir", "task_name", "processors_file", "label_list", "text_columns",
                  "column_names", "data_format", "truncation", "head_tokens",
                  "layerwise_lr_decay"), EVAL_DURING_TRAINING_FLAGS, CLASSIFIER_WINDOW_FLAGS,
                 ("task_type", "multilabel_threshold", "classifier_input", "task_sampling"),
                 LENGTH_BATCHING_FLAGS,
                 # Fine-tuning shuffles the whole training set every epoch (Google's buffer of
                 # 100 learns nothing from a file sorted by label).
                 defaults={"shuffle_buffer_size": 0, "doc_stride": 0, **FINE_TUNING_DEFAULTS},
                 helps=CLASSIFIER_WINDOW_HELPS)


def classifier_config() -> ClassifierConfig:
    require("data_dir", "task_name", "bert_config_file", "output_dir")
    check_output_dir()
    from bert_mgpu.data import user_processors

    label_list = tuple(FLAGS.label_list) if FLAGS.label_list else None
    names = split_tasks(FLAGS.task_name)
    # An unknown --task_name, a processors file that does not load or a class that does not
    # follow Google's API: at start (the file is run here; see data/user_processors.py).
    splits = [s for s, wanted in (("train", FLAGS.do_train), ("dev", FLAGS.do_eval),
                                  ("test", FLAGS.do_predict)) if wanted]
    tsv_options = {name: tuple(FLAGS[name].value) if FLAGS[name].value else None
                   for name in ("text_columns", "column_names")}
    for name in names:
        processor = user_processors.processor_for(
            name, label_list if len(names) == 1 else None,
            processors_file=FLAGS.processors_file,
            tsv_options=dict(tsv_options, data_format=FLAGS.data_format))
        processor.check_splits(splits)
    cfg = _training_job_config(ClassifierConfig, task_name=FLAGS.task_name.lower(),
                               label_list=label_list, **tsv_options,
                               **classifier_task_defaults())
    if cfg.num_tasks > 1:
        for task in cfg.task_configs():  # each task's --label_list
            user_processors.processor_for(task.task_name, task.label_list,
                                          processors_file=task.processors_file)
    check_weights_to_evaluate(cfg, cfg.do_predict)
    return cfg


def classifier_task_defaults() -> dict:
    """--task_type where the task fixes it (stsb: regression) and --best_metric's default per
    task type (eval_accuracy is a classification metric), unless given on the command line;
    per task of a multi-task run (comma-separated)."""
    out = {}
    if FLAGS["task_type"].present:
        task_types = split_tasks(FLAGS.task_type)
    else:
        task_types = [TASK_TYPE_OF.get(name.lower(), FLAGS.task_type)
                      for name in split_tasks(FLAGS.task_name)]
        out["task_type"] = ",".join(task_types)
    if not FLAGS["best_metric"].present:
        # An unknown type keeps the flag's default: validate() names it.
        out["best_metric"] = ",".join(
            TASK_TYPES[t].default_metric if t in TASK_TYPES else FLAGS.best_metric
            for t in task_types)
    return out


def define_extract_features_flags():
    define_flags(MODEL_FLAGS, ("input_file", "output_file", "layers", "batch_size"), TPU_FLAGS,
                 helps={"input_file": "Input text: one example per line, pairs as "
                                      "'text_a ||| text_b'."})


def extract_features_config() -> ExtractFeaturesConfig:
    require("input_file", "output_file", "bert_config_file", "init_checkpoint")
    check_input_text_file("input_file")
    check_output_files()
    warn_ignored_tpu_flags()
    cfg = validated(from_flags(ExtractFeaturesConfig, model=model_files(),
                               layers=tuple(parse_int_list("layers", FLAGS.layers))))
    check_model_files(cfg.model)
    return cfg


def define_create_pretraining_data_flags():
    define_flags(tuple(f.name for f in dataclasses.fields(CreatePretrainingDataConfig)),
                 helps={
                     "input_file": "Input raw text file (or comma-separated list of files; "
                                   "globs allowed). One sentence per line, a blank line "
                                   "between documents; '.gz' files are read decompressed.",
                     "output_file": "Output TF example file (or comma-separated list of "
                                    "files; instances are written round-robin across them).",
                     "max_seq_length": "Maximum sequence length.",
                     "max_predictions_per_seq": "Maximum number of masked LM predictions per "
                                                "sequence.",
                     "random_seed": "Random seed for data generation.",
                     "no_next_sentence": "Masked-LM-only single-segment instances ([CLS] text "
                                         "[SEP], segment_ids 0, next_sentence_labels 0)."})


def create_pretraining_data_config() -> CreatePretrainingDataConfig:
    require("input_file", "output_file", "vocab_file")
    check_output_files()
    return validated(from_flags(CreatePretrainingDataConfig))


def define_convert_hf_flags():
    define_flags(("hf_model_dir", "output_dir", "gelu"),
                 helps={"output_dir": "Where to write bert_config.json, "
                                      "bert_model.ckpt.{index,data-00000-of-00001} and "
                                      "vocab.txt."})


def convert_hf_config() -> ConvertHfConfig:
    require("hf_model_dir", "output_dir")
    check_output_dir()
    return from_flags(ConvertHfConfig)


# ---------------------------------------------------------------------------------------------
# export_saved_model.py and convert_to_hf.py (issue 14)

_SPECS.update({
    "export_dir": ("string", None, "Where the SavedModel goes, in TF Serving's layout: "
                                   "EXPORT_DIR/<version>/saved_model.pb, variables/, "
                                   "assets/vocab.txt."),
    "export_version": ("integer", 0, "The version directory under --export_dir (0: one more "
                                     "than the highest there, 1 for a new directory)."),
    "task": ("enum", "classifier", "What the SavedModel returns: 'classifier' (probabilities, "
                                   "label_id, label), 'features' (pooled_output, "
                                   "sequence_output, input_mask, sentence_embedding) or "
                                   "'squad' (a run_squad.py model: question + context -> "
                                   "answer, its character offsets and logits).",
             ("classifier", "features", "squad")),
    "jit_compile": ("bool", False, "Compile the exported encoder with XLA (jit_compile)."),
    "length_chunks": ("integer", DEFAULT_LENGTH_CHUNKS,
                      "--task=classifier: sort each batch by text length and run it in up to "
                      "this many chunks (at least 8 texts each), each cut to its own longest "
                      "text, so short texts are not padded to the batch's longest; 1 = off (one "
                      "piece, cut to the batch's longest). The outputs are the same."),
    "task_label": ("string", None, "A multi-task run of run_classifier_mgpu.py: the task whose "
                                   "head is exported (its label: the task name, or "
                                   "<name>_<i> for a name given twice, as OUTPUT_DIR/<label>/); "
                                   "required for such a run."),
})

EXPORT_FLAGS = ("export_dir", "export_version", "task", "precision", "jit_compile",
                "length_chunks", "task_label", "truncation", "head_tokens", "label_list",
                "output_dir", "doc_stride", "window_pooling", "max_query_length", "n_best_size",
                "max_answer_length", "version_2_with_negative", "null_score_diff_threshold")


def define_export_flags():
    define_flags(MODEL_FLAGS, EXPORT_FLAGS,
                 helps={"output_dir": "A run of run_classifier_mgpu.py, run_squad.py (or "
                                      "run_pretraining.py): its latest checkpoint, "
                                      "bert_config.json and run_config.json (vocabulary, "
                                      "casing, max_seq_length, truncation, labels, SQuAD's "
                                      "window and answer flags) are exported; explicit flags "
                                      "win.",
                        "precision": "The exported compute: fp32, bf16 or fp16 (variables "
                                     "stay float32; outputs are float32).",
                        "init_checkpoint": "The checkpoint to export (default: the latest of "
                                           "--output_dir).",
                        "label_list": "Label names in id order (default: the run's labels, "
                                      "else 0..N-1).",
                        "doc_stride": "--task=classifier: a text longer than max_seq_length - "
                                      "2 pieces is read in windows starting this many pieces "
                                      "apart, as run_classifier_mgpu.py --doc_stride (default: "
                                      "the run's; 0 = the first window only). --task=squad: "
                                      "run_squad.py's flag (default: the run's, else 128).",
                        "window_pooling": "--task=classifier with windows: how a text's "
                                          "windows are pooled, mean or max (default: the "
                                          "run's)."})


def export_config() -> ExportConfig:
    require("export_dir")
    check_output_dir("export_dir")
    given = frozenset(name for name in EXPORT_FLAGS + MODEL_FLAGS if FLAGS[name].present)
    return validated(from_flags(
        ExportConfig, model=model_files(), flags_given=given,
        # run_squad.py's flags are --task=squad's; --doc_stride is also the classifier's.
        squad=from_flags(SquadAnswerOptions) if FLAGS.task == "squad" else None,
        doc_stride=FLAGS.doc_stride if "doc_stride" in given else None,
        label_list=tuple(FLAGS.label_list) if FLAGS.label_list else None))


def define_convert_to_hf_flags():
    define_flags(("bert_config_file", "init_checkpoint", "vocab_file", "do_lower_case",
                  "output_dir", "label_list", "task_label"),
                 helps={"output_dir": "Where the Hugging Face folder goes: config.json, "
                                      "model.safetensors, vocab.txt, tokenizer_config.json.",
                        "label_list": "Label names of a classifier head in id order (written "
                                      "as id2label; default: the run's labels from the "
                                      "run_config.json next to the checkpoint, else "
                                      "LABEL_0..)."})


def convert_to_hf_config() -> ConvertToHfConfig:
    require("bert_config_file", "init_checkpoint", "vocab_file", "output_dir")
    check_output_dir()
    return from_flags(ConvertToHfConfig, model=model_files(),
                      label_list=tuple(FLAGS.label_list) if FLAGS.label_list else None)


# run_squad.py's --pad_to_longest is off by default: trimmed batches have no padding for
# Google's span softmax and n-best ranking to run over (configs/squad.py).
SQUAD_LENGTH_BATCHING_HELPS = {
    "pad_to_longest": "Pad each batch only to its longest window (rounded up to "
                      "--pad_to_multiple_of), not to --max_seq_length, in training and "
                      "prediction (sorted by length, written in file order). The span softmax "
                      "and the n-best ranking then leave the padding out (Google's run over "
                      "every position, padding included: off by default); the results equal "
                      "those of the same run with every batch padded."}


def define_squad_flags():
    define_flags(MODEL_FLAGS, tuple(n for n in TRAINING_SCRIPT_FLAGS if n != "eval_batch_size"),
                 ("do_predict", "predict_batch_size", "num_train_epochs", "warmup_proportion",
                  "train_file", "predict_file", "doc_stride", "max_query_length", "n_best_size",
                  "max_answer_length", "verbose_logging", "version_2_with_negative",
                  "null_score_diff_threshold"), LENGTH_BATCHING_FLAGS,
                 helps={**SQUAD_LENGTH_BATCHING_HELPS,
                        "do_predict": "Whether to run predictions on --predict_file (writes "
                                      "predictions.json, nbest_predictions.json and, with "
                                      "--version_2_with_negative, null_odds.json).",
                        "do_eval": "Predict on --predict_file (which holds the answers) and "
                                   "write the official EM/F1 to eval_results.txt.",
                        "train_batch_size": "Batch size for training, per tower (--n_gpus); "
                                            "Google: total batch size."},
                 # Google's run_squad.py length; fine-tuning shuffles the whole training set
                 # every epoch, as run_classifier_mgpu.py.
                 defaults={"max_seq_length": 384, "shuffle_buffer_size": 0,
                           "pad_to_longest": False, **FINE_TUNING_DEFAULTS})


def squad_config() -> SquadConfig:
    require("vocab_file", "bert_config_file", "output_dir")
    check_output_dir()
    cfg = _training_job_config(SquadConfig, answers=from_flags(SquadAnswerOptions))
    check_weights_to_evaluate(cfg, cfg.do_predict)
    # A mistyped SQuAD json path fails at start, before TensorFlow is loaded.
    for flag, path, used in (("train_file", cfg.train_file, cfg.do_train),
                             ("predict_file", cfg.predict_file, cfg.do_predict or cfg.do_eval)):
        if used and not _is_remote(path) and not os.path.isfile(path):
            raise FlagError(f"--{flag}: {path} not found")
    return cfg


def define_create_vocab_flags():
    define_flags(tuple(f.name for f in dataclasses.fields(CreateVocabConfig)), helps={
        "input_file": "Input raw text file (or comma-separated list of files; globs allowed), "
                      "in create_pretraining_data.py's format; '.gz' files are read "
                      "decompressed.",
        "output_file": "The vocab.txt to write (written to a temporary file and renamed: no "
                       "partial file on failure).",
        "do_lower_case": "Lower-case and strip accents, as BasicTokenizer with do_lower_case; "
                         "use the same value with the other scripts.",
        "num_workers": "Processes counting words and SentencePiece threads (0: one per core, "
                       "but inputs under 256 MB are counted in one process, which is faster "
                       "there).",
        "random_seed": "Seed of the --max_sentences sample."})


def create_vocab_config() -> CreateVocabConfig:
    require("input_file", "output_file")
    check_output_files()
    reserved = tuple(t.strip() for t in FLAGS.reserved_tokens if t.strip())
    return validated(from_flags(CreateVocabConfig, reserved_tokens=reserved))


# ---------------------------------------------------------------------------------------------
# run_ner.py. Its own flags are added here (not in `_SPECS` above) so that branches adding
# flags stay independent; `setdefault`: a flag another script declares too (doc_stride, with
# run_squad.py) keeps that declaration, run_ner.py narrows help and default below.

for _name, _spec in {
        "tag_scheme": ("enum", "bio", "Tags the model is trained on: bio = as written in the "
                                      "files (BIO, IOB1 or BIOES); bioes = converted to BIOES "
                                      "(S- single-word entities, E- last words); predictions "
                                      "are written back in the files' scheme.",
                       TAG_SCHEMES),
        "doc_stride": ("integer", None, "When splitting up a long document into chunks, how "
                                        "much stride to take between chunks."),
}.items():
    _SPECS.setdefault(_name, _spec)

NER_FLAGS = ("do_predict", "predict_batch_size", "num_train_epochs", "warmup_proportion",
             "data_dir", "label_list", "tag_scheme", "doc_stride", "layerwise_lr_decay")


def define_ner_flags():
    define_flags(MODEL_FLAGS, TRAINING_SCRIPT_FLAGS, NER_FLAGS, EVAL_DURING_TRAINING_FLAGS,
                 LENGTH_BATCHING_FLAGS,
                 defaults={"shuffle_buffer_size": 0, "best_metric": "eval_f1",
                           "doc_stride": None, **FINE_TUNING_DEFAULTS},
                 helps={
                     "data_dir": "Directory with train.txt, dev.txt and test.txt in CoNLL "
                                 "layout (token ... tag per line, a blank line between "
                                 "sentences, -DOCSTART- lines skipped).",
                     "label_list": "The tags in id order, 'O' first (default: 'O' and the "
                                   "sorted tags of train.txt, after --tag_scheme).",
                     "do_predict": "Whether to tag test.txt (writes predictions.txt: token, "
                                   "gold and predicted tag per line, every token).",
                     "doc_stride": "A sentence longer than max_seq_length - 2 pieces is split "
                                   "into windows starting this many pieces apart; each word is "
                                   "labelled and predicted in the window where it has the most "
                                   "context (default: half a window).",
                     "best_metric": "The eval_results key that decides the best checkpoint "
                                    "and early stopping (eval_f1: conlleval's entity F1; "
                                    "losses: lower is better; others: higher).",
                     "pad_to_longest": "Pad each batch only to its longest window (rounded up "
                                       "to --pad_to_multiple_of), not to --max_seq_length; "
                                       "evaluation and prediction batches in file order, each "
                                       "cut to its longest. Results equal the fully padded "
                                       "run's."})


def ner_config() -> NerConfig:
    require("data_dir", "bert_config_file", "output_dir")
    check_output_dir()
    if not _is_remote(FLAGS.data_dir) and not os.path.isdir(FLAGS.data_dir):
        raise FlagError(f"--data_dir={FLAGS.data_dir} is not a directory")
    label_list = tuple(FLAGS.label_list) if FLAGS.label_list else None
    if label_list is not None:
        from bert_mgpu.data import ner_data
        ner_data.get_labels([], label_list)  # a malformed --label_list: at start
    cfg = _training_job_config(NerConfig, label_list=label_list)
    check_weights_to_evaluate(cfg, cfg.do_predict)
    if not _is_remote(cfg.data_dir):
        for split, wanted in (("train.txt", cfg.do_train), ("dev.txt", cfg.do_eval),
                              ("test.txt", cfg.do_predict)):
            path = os.path.join(cfg.data_dir, split)
            if wanted and not os.path.isfile(path):
                raise FlagError(f"--data_dir={cfg.data_dir}: {split} not found")
    return cfg
