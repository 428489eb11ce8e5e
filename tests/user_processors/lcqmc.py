# Provenance (header written by the research helper; everything below the
# "VERBATIM" markers is copied byte-for-byte from the original file):
#   repository : ChineseGLUE/ChineseGLUE  (Chinese GLUE benchmark baselines; BERT baseline
#                is a modified copy of google-research/bert run_classifier.py)
#   URL        : https://github.com/ChineseGLUE/ChineseGLUE/blob/1591b85cf5427c2ff60f718d359ecb71d2b44879/baselines/models/bert/run_classifier.py
#   file       : baselines/models/bert/run_classifier.py
#   commit     : 1591b85cf5427c2ff60f718d359ecb71d2b44879 (branch HEAD, 2021-12-01).
#                The file last changed in 7a1c029d4e68e66595f8e1ad38372b8be07e95f9
#                (2019-11-20); LCQMCProcessor was added in 98ea94856043716003e99d23da8c4c1125173e1d
#                ("add lcqmc coedes", 2019-10-12) and touched again in 7a1c029.
#   licence    : no repository-level LICENSE file.  baselines/models/bert/LICENSE is the
#                Apache License 2.0 (same blob as Google BERT's LICENSE) and the file
#                header carries Google's Apache-2.0 notice.
#   module imports used (original lines 26-32):
#     import collections / import csv / import os / import modeling / import optimization
#     import tokenization / import tensorflow as tf
#
# The processor is registered in main() as:   "lcqmc": LCQMCProcessor,
# InputExample in this file is Google's unmodified version.

# JDCOMMENTProcessor (same file, lines 643-688; provenance below) needs this file's modified
# base class, so both processors are in this one fixture. Google's InputExample is imported.
import csv
import os

import tensorflow as tf

import tokenization
from run_classifier import InputExample

# ===== VERBATIM: module-level helper DataProcessor base class (original lines 182-219) =====
# NOTE: modified vs Google's: _read_tsv gained a 'delimiter' parameter, and _read_txt was added.
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
    def _read_tsv(cls, input_file, delimiter="\t", quotechar=None):
        """Reads a tab separated value file."""
        with tf.gfile.Open(input_file, "r") as f:
            reader = csv.reader(f, delimiter=delimiter, quotechar=quotechar)
            lines = []
            for line in reader:
                lines.append(line)
            return lines

    @classmethod
    def _read_txt(cls, input_file):
        """Reads a tab separated value file."""
        with tf.gfile.Open(input_file, "r") as f:
            reader = f.readlines()
            lines = []
            for line in reader:
                lines.append(line.strip().split("_!_"))
            return lines

# ===== VERBATIM: LCQMCProcessor (original lines 597-641) =====
class LCQMCProcessor(DataProcessor):
    """Processor for the internal data set. sentence pair classification"""

    def __init__(self):
        self.language = "zh"

    def get_train_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "train.txt")), "train")
        # dev_0827.tsv

    def get_dev_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "dev.txt")), "dev")

    def get_test_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "test.txt")), "test")

    def get_labels(self):
        """See base class."""
        return ["0", "1"]
        # return ["-1","0", "1"]

    def _create_examples(self, lines, set_type):
        """Creates examples for the training and dev sets."""
        examples = []
        print("length of lines:", len(lines))
        for (i, line) in enumerate(lines):
            # print('#i:',i,line)
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, i)
            try:
                label = tokenization.convert_to_unicode(line[2])
                text_a = tokenization.convert_to_unicode(line[0])
                text_b = tokenization.convert_to_unicode(line[1])
                examples.append(
                    InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
            except Exception:
                print('###error.i:', i, line)
        return examples

# Provenance (header written by the research helper; everything below the
# "VERBATIM" markers is copied byte-for-byte from the original file):
#   repository : ChineseGLUE/ChineseGLUE
#   URL        : https://github.com/ChineseGLUE/ChineseGLUE/blob/1591b85cf5427c2ff60f718d359ecb71d2b44879/baselines/models/bert/run_classifier.py
#   file       : baselines/models/bert/run_classifier.py
#   commit     : 1591b85cf5427c2ff60f718d359ecb71d2b44879 (branch HEAD, 2021-12-01;
#                file last changed in 7a1c029d4e68e66595f8e1ad38372b8be07e95f9, 2019-11-20)
#   licence    : no repository-level LICENSE; baselines/models/bert/LICENSE is Apache 2.0.
#   registered in main() as:   "jdcomment": JDCOMMENTProcessor,
#   The base class it needs (with the modified _read_tsv) is reproduced verbatim in
#   LCQMCProcessor.py in this directory (original lines 182-219).

# ===== VERBATIM: JDCOMMENTProcessor (original lines 643-688) =====
class JDCOMMENTProcessor(DataProcessor):
    """Processor for the internal data set. sentence pair classification"""

    def __init__(self):
        self.language = "zh"

    def get_train_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "jd_train.csv"),",", "\""), "train")
        # dev_0827.tsv

    def get_dev_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "jd_dev.csv"),",", "\""), "dev")

    def get_test_examples(self, data_dir):
        """See base class."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "jd_test.csv"),",", "\""), "test")

    def get_labels(self):
        """See base class."""
        return ["1", "2", "3", "4", "5"]
        # return ["-1","0", "1"]

    def _create_examples(self, lines, set_type):
        """Creates examples for the training and dev sets."""
        examples = []
        print("length of lines:", len(lines))
        for (i, line) in enumerate(lines):
            #print('#i:',i,line)
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, i)
            try:
                label = tokenization.convert_to_unicode(line[0])
                text_a = tokenization.convert_to_unicode(line[1])
                text_b = tokenization.convert_to_unicode(line[2])
                examples.append(
                    InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
            except Exception:
                print('###error.i:', i, line)
        return examples

