# Provenance: every line below the "VERBATIM" markers is copied byte-for-byte from the original.
#   repository : ncbi-nlp/bluebert (BlueBERT, NCBI; a modified copy of google-research/bert)
#   commit     : f4b8af9db9f8c4503d62d0c205de7256f38c5890 (branch HEAD, 2022-04-10); the file last changed in
#                ebb36ef0bdffa5bd20f92f8c3643e16d5cfef102 (2019-12-03)
#   file       : bluebert/run_bluebert_multi_labels.py
#   URL        : https://github.com/ncbi-nlp/bluebert/blob/f4b8af9db9f8c4503d62d0c205de7256f38c5890/bluebert/run_bluebert_multi_labels.py
#   licence    : public domain (LICENSE.txt: "PUBLIC DOMAIN NOTICE ... a United States Government
#                Work ... freely available to the public for use"); the file header also carries
#                Google's Apache-2.0 notice.
#   launch     : README.md, "Document multilabel classification":
#                python bluebert/run_bluebert_multi_labels.py --task_name="hoc" --do_train=true
#                --do_eval=true --do_predict=true --vocab_file=$BlueBERT_DIR/vocab.txt
#                --bert_config_file=$BlueBERT_DIR/bert_config.json
#                --init_checkpoint=$BlueBERT_DIR/bert_model.ckpt --max_seq_length=128
#                --train_batch_size=4 --learning_rate=2e-5 --num_train_epochs=3
#                --num_classes=20 --num_aspects=10 --aspect_value_list="0,1"
#                --data_dir=$DATASET_DIR --output_dir=$OUTPUT_DIR
#   What it shows: the processor's own flags (num_classes, num_aspects, aspect_value_list) read
#   through FLAGS in get_labels(), and multi-label examples (the labels of a line joined by
#   commas, "0_1,1_0,..."; the file's convert_single_example makes them multi-hot).

# ===== VERBATIM: lines 17-33 (imports, flags) =====
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import csv
import os

import tensorflow as tf

from bert import modeling
from bert import optimization
from bert import tokenization

flags = tf.flags

FLAGS = flags.FLAGS

# ===== VERBATIM: lines 128-132 (the task's own flags) =====
# task specific parameter( sentiment analysis)
flags.DEFINE_integer("num_classes", 80, "Total number of labels for sentiment analysis")
flags.DEFINE_integer("num_aspects", 20, "Total number of aspect")

flags.DEFINE_list("aspect_value_list", [-2, -1, 0, 1], "Values that a aspect can have")


# ===== VERBATIM: lines 135-154 (InputExample) =====
class InputExample(object):
    """A single training/test example for simple sequence classification."""

    def __init__(self, guid, text_a, text_b=None, label=None):
        """Constructs a InputExample.

        Args:
          guid: Unique id for the example.
          text_a: string. The untokenized text of the first sequence. For single
            sequence tasks, only this sequence must be specified.
          text_b: (Optional) string. The untokenized text of the second sequence.
            Only must be specified for sequence pair tasks.
          label: (Optional) string. The label of the example. This should be
            specified for train and dev examples, but not for test examples.
        """
        self.guid = guid
        self.text_a = text_a
        self.text_b = text_b
        self.label = label



# ===== VERBATIM: lines 185-262 (DataProcessor, HoCProcessor) =====
class DataProcessor(object):
    """Base class for data converters for sequence classification data sets."""

    def get_train_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the train set."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the dev set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """Gets a collection of `InputExample`s for prediction."""
        raise NotImplementedError()

    def get_labels(self):
        """Gets the list of labels for this data set."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Reads a tab separated value file."""
        with tf.gfile.Open(input_file, "r") as f:
            reader = csv.reader(f, delimiter="\t", quotechar=quotechar)
            lines = []
            for line in reader:
                lines.append(line)
            return lines


class HoCProcessor(DataProcessor):
    """Processor for the CoLA data set (GLUE version)."""

    def get_train_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

    def get_dev_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

    def get_test_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

    def get_labels(self):
        """See base class."""
        label_list = []
        # num_aspect=FLAGS.num_aspects
        aspect_value_list = FLAGS.aspect_value_list  # [-2,-1,0,1]
        for i in range(FLAGS.num_aspects):
            for value in aspect_value_list:
                label_list.append(str(i) + "_" + str(value))
        return label_list  # [ {'0_-2': 0, '0_-1': 1, '0_0': 2, '0_1': 3,....'19_-2': 76, '19_-1': 77, '19_0': 78, '19_1': 79}]

    def _create_examples(self, lines, set_type):
        """Creates examples for the training and dev sets."""
        examples = []
        for (i, line) in enumerate(lines):
            # Only the test set has a header
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, i)
            # if set_type == "test":
            #  text_a = tokenization.convert_to_unicode(line[1])
            #  label = "0"
            # else:
            #  text_a = tokenization.convert_to_unicode(line[3])
            #  label = tokenization.convert_to_unicode(line[1])
            label = tokenization.convert_to_unicode(line[0])
            text_a = tokenization.convert_to_unicode(line[1])

            examples.append(
                InputExample(guid=guid, text_a=text_a, text_b=None, label=label))
        return examples


# ===== VERBATIM: lines 726-731 (the start of main() with its processors mapping) =====
def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)

    processors = {
        "hoc": HoCProcessor,
    }
