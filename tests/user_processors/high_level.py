# Provenance (header written by the research helper; everything below the
# "VERBATIM" markers is copied byte-for-byte from the original file):
#   repository : zhp510730568/bert-1   (GitHub fork of google-research/bert)
#   URL        : https://github.com/zhp510730568/bert-1/blob/0d5d1d780f009b75dd43a6483dc0b8f381fc74c2/run_classifier_mgpu.py
#   file       : run_classifier_mgpu.py
#   commit     : 0d5d1d780f009b75dd43a6483dc0b8f381fc74c2 (branch master HEAD, 2020-01-22)
#                The file was added in 018cac787a5f19913beae3784cd28a397f9b3c3e
#                ("Create run_classifier_mgpu.py", 2020-01-22, author zhp510730568)
#                and is unchanged since (blob 7e3bcec0e01fde0c07a1eb1e89e02df61a27fccf).
#   licence    : Apache License 2.0 (repository LICENSE file; the file header also
#                carries Google's Apache-2.0 notice, "Copyright 2018 The Google AI
#                Language Team Authors").
#   module imports used by the file (lines 17-28 of the original):
#     import collections / import csv / import os,json, random / import numpy as np
#     import modeling / import optimization / import tokenization / import tensorflow as tf
#
# The processor is registered in main() as:   "high_level": HighLevelProcessor,

# The file's imports, as at the top of the fork's run_classifier_mgpu.py (this test fixture is
# what a user pastes into --processors_file: those imports, then the classes unchanged).
import collections
import csv
import os,json, random
import numpy as np
import modeling
import optimization
import tokenization
import tensorflow as tf

# ===== VERBATIM: module-level helper InputExample (original lines 127-145) =====
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


# ===== VERBATIM: module-level helper DataProcessor base class (original lines 158-202) =====
# NOTE: this fork's base class has NO get_test_examples(); it adds _read_tab_txt/_read_json.
class DataProcessor(object):
  """Base class for data converters for sequence classification data sets."""

  def get_train_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the train set."""
    raise NotImplementedError()

  def get_dev_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the dev set."""
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

  def _read_tab_txt(cls, input_file, split_count=2):
    """Reads a tab separated value file."""
    with tf.gfile.Open(input_file, "r") as f:
      lines=[]
      for line in f:
        line=line.strip()
        if line:
          row=line.split('\t', split_count)
          lines.append(row)
      return lines

  @classmethod
  def _read_json(cls, input_file):
    """Read json file"""
    with tf.gfile.Open(input_file, "r") as f:
      lines = []
      for line in f:
        if line.strip() is not None:
          lines.append(json.loads(line))
      return lines


# ===== VERBATIM: HighLevelProcessor (original lines 539-568) =====
class HighLevelProcessor(DataProcessor):
  """Processor for the Sentiment data set (GLUE version)."""

  def get_train_examples(self, data_dir):
    """See base class."""
    return self._create_examples(
      self._read_tsv(os.path.join(data_dir, "train_without_content_0515.txt")), "train")

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._create_examples(
      self._read_tsv(os.path.join(data_dir, "test_without_content_0515.txt")), "dev")

  def get_labels(self):
    """See base class."""
    return ["0", "1"]

  def _create_examples(self, lines, set_type):
    """Creates examples for the training and dev sets."""
    examples = []

    for (i, line) in enumerate(lines):
      guid = "%s-%s" % (set_type, i)
      category = tokenization.convert_to_unicode(line[1])
      title = tokenization.convert_to_unicode(line[3].lower())
      label = line[2]
      examples.append(
        InputExample(guid=guid, text_a=title, text_b=None, label=label))

    return examples
