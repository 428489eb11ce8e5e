# Provenance (header written by the research helper; everything below the
# "VERBATIM" markers is copied byte-for-byte from the original file):
#   repository : wangjiwu/BERT-emotion-classification  (copy of google-research/bert
#                run_classifier.py with a user-added processor)
#   URL        : https://github.com/wangjiwu/BERT-emotion-classification/blob/a17af5c900774d1e1d8ef9d245d7aaefe51f34a4/run_classifier.py
#   file       : run_classifier.py
#   commit     : a17af5c900774d1e1d8ef9d245d7aaefe51f34a4 ("first update", 2019-05-17,
#                author wangjiwu).  NOTE: this CSV version exists only at this commit;
#                the next commit touching run_classifier.py (606ee8a, 2019-05-19) rewrote
#                EmloProcessor to read train.tsv/dev.tsv/test.tsv via _read_tsv, and the
#                branch HEAD (fab4aba0ba13d80dd8517298460cdcf1def3230c) has that TSV version.
#   licence    : Apache License 2.0 (repository LICENSE file, identical to Google BERT's;
#                file header carries Google's Apache-2.0 notice).
#   module imports used (original lines 21-27):
#     import collections / import csv / import os / import modeling / import optimization
#     import tokenization / import tensorflow as tf
#
# The processor is registered in main() as:   "emlo": EmloProcessor
# Base class and InputExample in this file are Google's unmodified versions
# (DataProcessor with get_test_examples and the @classmethod _read_tsv using
# tf.gfile.Open + csv.reader(delimiter="\t", quotechar=quotechar)).

# Google's unmodified DataProcessor and InputExample are imported from run_classifier, as a user
# of --processors_file writes them (the file's own copy of Google's base class is not pasted).
import csv
import os

import tensorflow as tf

import tokenization
from run_classifier import DataProcessor, InputExample

# ===== VERBATIM: EmloProcessor (original lines 975-1019) =====
class EmloProcessor(DataProcessor):
  """Processor for the WeiBo data set ."""

  def _read_csv(cls, input_file, quotechar=None):
    """Reads a tab separated value file."""
    with tf.gfile.Open(input_file, "r") as f:
      reader = csv.reader(f, delimiter=",", quotechar=quotechar)
      lines = []
      for line in reader:
        lines.append(line)
      return lines

  def get_train_examples(self, data_dir):
    """See base class."""
    return self._create_examples(
        self._read_csv(os.path.join(data_dir, "train.csv"), ), "train")

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._create_examples(
        self._read_csv(os.path.join(data_dir, "dev.csv")), "dev")

  def get_test_examples(self, data_dir):
    """See base class."""
    return self._create_examples(
        self._read_tsv(os.path.join(data_dir, "test.csv")), "test")

  def get_labels(self):
    """See base class."""
    return ["neutral", "positive", "negative"]

  def _create_examples(self, lines, set_type):
    """Creates examples for the training and dev sets."""
    examples = []
    for (i, line) in enumerate(lines):
      # All sets have a header
      if i == 0: continue
      guid = "%s-%s" % (set_type, i)
      #print(line, i)
      text_a = tokenization.convert_to_unicode(line[1])

      label = tokenization.convert_to_unicode(line[0])
      examples.append(
          InputExample(guid=guid, text_a=text_a, text_b=None, label=label))
    return examples
