"""Users' files from public repositories that the tests run: read at test time, never committed.

The project keeps no third-party code in its repository. A test that runs a user's file (a
processors file, a TF1-era script, a notebook) takes it, when it runs, from a snapshot of the
file's public repository at a pinned commit, checks its SHA-256 and writes it into the test's
temporary directory. Why each file, its licence and what the tests do with it:
tests/PROVENANCE.md.

Snapshots are git repositories under `$BERT_MGPU_THIRD_PARTY` (default /work/.mirror), one folder
per repository named OWNER+NAME (`buckhx+gobert`): a plain `git clone` into that folder, or a
mirror holding the repository in `repo/` (bare or with `repo/.git`). Without the snapshot, or
without the pinned commit and with other bytes at the snapshot's HEAD, the test skips with one
line saying which.
"""

import dataclasses
import hashlib
import os
import subprocess

import pytest

ROOT = os.environ.get("BERT_MGPU_THIRD_PARTY") or "/work/.mirror"


@dataclasses.dataclass(frozen=True)
class Source:
    """One file of a public repository at a pinned commit.

    Attributes:
      repo: str, `owner/name` on GitHub.
      commit: str, 40 hex digits: the commit the tests were written against.
      path: str, the file's path in the repository.
      sha256: str, the SHA-256 of the file's bytes at `commit`.
    """

    repo: str
    commit: str
    path: str
    sha256: str


_GOBERT = ("buckhx/gobert", "265756fed2325c8b5e5d4824c6748ca270449872")
_CLUE = ("CLUEbenchmark/CLUE", "9d232934e74c3ddd1f7b25d8e9711900aef5b8fe")

# The table of files (tests/PROVENANCE.md has the same rows with their licences).
SOURCES = {
    "gobert/export_embedding.py": Source(
        *_GOBERT, "export/export_embedding.py",
        "48107cf42fdc1d2fd8df31add788d216123c5953bed226f65102ffc4a09781f9"),
    "gobert/export_classifier.py": Source(
        *_GOBERT, "export/export_classifier.py",
        "1ad9debd3c305b6b4ecc3c1d38d0aa6c4dae6065c99aa51814745187422deae8"),
    "gobert/util.py": Source(
        *_GOBERT, "export/util.py",
        "b51b873611c4d72f231734cb79c965ba7febd6c469b849dc906fe252652d826a"),
    "gobert/download_pretrained.py": Source(
        *_GOBERT, "export/download_pretrained.py",
        "fcfeb8be5a6d0aafbe275b8e5efda8a4bc618a03ab9ae722c5688bf9964ba118"),
    "text_classification/run_classifier_predict_online.py": Source(
        "brightmart/text_classification", "091ff9910839ba5053302383af99762c0c91a992",
        "a00_Bert/run_classifier_predict_online.py",
        "a8b155fbffb31ba4c3aa6443672706cd71b8247e30a624c5b665751e64585f00"),
    "nlp_models/5.bert-base-cross-entropy.ipynb": Source(
        "huseinzol05/NLP-Models-Tensorflow", "0741216aa8235e1228b3de7903cc36d73f8f2b45",
        "text-similarity/5.bert-base-cross-entropy.ipynb",
        "01a7adfccc8ff2b54924015204a2dec0c7f5e88a4b65139a9eb54267c59fa5c8"),
    "nlp_models/4.bert-base.ipynb": Source(
        "huseinzol05/NLP-Models-Tensorflow", "0741216aa8235e1228b3de7903cc36d73f8f2b45",
        "extractive-summarization/4.bert-base.ipynb",
        "a18973c45f105fe04f51462e1e1f56963bce95bf1e342b82a7a266030048a7ae"),
    "bluebert/run_bluebert_multi_labels.py": Source(
        "ncbi-nlp/bluebert", "f4b8af9db9f8c4503d62d0c205de7256f38c5890",
        "bluebert/run_bluebert_multi_labels.py",
        "f1d22204f26777c57359100a7de58c33f74b0bba5b3892bcdb8cc77ffecd09a3"),
    "clue/classifier_utils.py": Source(
        *_CLUE, "baselines/models/classifier_utils.py",
        "e86a8e288e174b792c192b2a8f38af316e7b1ceee0016506cad69efa8a448651"),
    "clue/run_classifier.py": Source(
        *_CLUE, "baselines/models/bert/run_classifier.py",
        "08b5a2b6c688837e191afb1de2b2ca27907251681a371098ea21b3c232ff9dea"),
    "emotion/run_classifier.py": Source(
        "wangjiwu/BERT-emotion-classification", "a17af5c900774d1e1d8ef9d245d7aaefe51f34a4",
        "run_classifier.py", "6b64c0c638b9802ee93dcc4164daf698201c36e70229d38a9cd9249be4af8876"),
    "fork/run_classifier_mgpu.py": Source(
        "zhp510730568/bert-1", "0d5d1d780f009b75dd43a6483dc0b8f381fc74c2",
        "run_classifier_mgpu.py",
        "2746f8751230c533c96a36647c90e5eb7383d6ee07525ac291b899159d208509"),
    "chineseglue/run_classifier.py": Source(
        "ChineseGLUE/ChineseGLUE", "1591b85cf5427c2ff60f718d359ecb71d2b44879",
        "baselines/models/bert/run_classifier.py",
        "366495fa2e251202e1e27727f53d9dc57efd5120b049eeff22d90cf3c8abcea7"),
}

# The imports a pasted class needs where the original file's own import lines bring in more
# than a processors file has (Google's base class and InputExample come from `run_classifier`,
# as a user of --processors_file writes them). Written for the tests; not a user's lines.
_EMLO_IMPORTS = ("import csv\nimport os\n\nimport tensorflow as tf\n\nimport tokenization\n"
                 "from run_classifier import DataProcessor, InputExample\n")
_LCQMC_IMPORTS = ("import csv\nimport os\n\nimport tensorflow as tf\n\nimport tokenization\n"
                  "from run_classifier import InputExample\n")

# Processors files as users paste them from their copy of Google's run_classifier.py into
# --processors_file: line ranges of the original files, in order (last None: to the end), and
# the import lines above. The line ranges are the users' lines unchanged.
PROCESSORS_FILES = {
    # BlueBERT's HoC: imports and `flags = tf.flags; FLAGS = flags.FLAGS`, the task's own flags,
    # InputExample, DataProcessor and HoCProcessor, the start of main() with its mapping.
    "bluebert_hoc.py": [("bluebert/run_bluebert_multi_labels.py", a, b) for a, b in
                        ((17, 33), (128, 132), (135, 154), (185, 262), (726, 731))],
    # CLUE's processors module whole, and the start of the run_classifier.py main() that
    # imports it (`from classifier_utils import *`), with its processors mapping.
    "clue_iflytek.py": [("clue/classifier_utils.py", 1, None),
                        ("clue/run_classifier.py", 711, 724)],
    # EmloProcessor only (the file's other classes are Google's).
    "emlo.py": [_EMLO_IMPORTS, ("emotion/run_classifier.py", 975, 1019)],
    # The fork's imports, its InputExample, its DataProcessor (no get_test_examples) and
    # HighLevelProcessor.
    "high_level.py": [("fork/run_classifier_mgpu.py", a, b) for a, b in
                      ((21, 28), (127, 145), (158, 202), (539, 568))],
    # ChineseGLUE's modified DataProcessor (_read_tsv with a delimiter, _read_txt),
    # LCQMCProcessor and JDCOMMENTProcessor.
    "lcqmc.py": [_LCQMC_IMPORTS] + [("chineseglue/run_classifier.py", a, b) for a, b in
                                    ((182, 219), (597, 641), (643, 688))],
}


def _git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True,
                          timeout=60)


def _git_dir(repo):
    """The git directory of `repo`'s snapshot under ROOT, or None."""
    folder = os.path.join(ROOT, repo.replace("/", "+"))
    for path in (os.path.join(folder, "repo", ".git"), os.path.join(folder, "repo"),
                 os.path.join(folder, ".git"), folder):
        if os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(
                os.path.join(path, "objects")):
            return path
    return None


def _show(git_dir, revision, path):
    proc = _git(git_dir, "show", f"{revision}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def read(key):
    """The bytes of SOURCES[key] at its pinned commit.

    Skips the test (one line) when the snapshot is absent, or when it lacks the pinned commit and
    the file at its HEAD has other bytes (the same bytes are used). Fails when the pinned
    commit's file does not have the table's SHA-256 (the table is wrong).
    """
    source = SOURCES[key]
    where = f"{source.repo} {source.path}"
    git_dir = _git_dir(source.repo)
    if git_dir is None:
        pytest.skip(f"third-party file not available: {where}: no snapshot of {source.repo} "
                    f"in {ROOT} ($BERT_MGPU_THIRD_PARTY; docs/testing.md)")
    if _git(git_dir, "cat-file", "-e", f"{source.commit}^{{commit}}").returncode == 0:
        data = _show(git_dir, source.commit, source.path)
        digest = hashlib.sha256(data or b"").hexdigest()
        assert digest == source.sha256, (
            f"{where} at {source.commit}: sha256 {digest}, the table says {source.sha256}")
        return data
    head = _git(git_dir, "rev-parse", "HEAD").stdout.decode().strip()
    data = _show(git_dir, "HEAD", source.path)
    if data is None or hashlib.sha256(data).hexdigest() != source.sha256:
        pytest.skip(f"third-party file not available: {where}: the snapshot {git_dir} has no "
                    f"commit {source.commit} and its HEAD {head[:12]} has "
                    f"{'no such file' if data is None else 'other bytes'}")
    return data


def write(key, directory, name=None):
    """Writes SOURCES[key] (see `read`) to `directory`/`name` (default: the file's name in
    the repository); returns the path (str)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory), name or os.path.basename(SOURCES[key].path))
    with open(path, "wb") as f:
        f.write(read(key))
    return path


def processors_file(name, directory):
    """Writes the processors file PROCESSORS_FILES[name] to `directory`/`name` (once; a later
    call returns the same file) and returns its path (str). Skips as `read` does.

    Each part is preceded by a comment naming its origin (repository, commit, path, lines);
    the parts' lines are the originals' bytes.
    """
    path = os.path.join(str(directory), name)
    if os.path.exists(path):
        return path
    parts = []
    for part in PROCESSORS_FILES[name]:
        if isinstance(part, str):
            parts.append(b"# Added for the test: the imports the classes below need.\n"
                         + part.encode("utf-8"))
            continue
        key, first, last = part
        source = SOURCES[key]
        lines = read(key).splitlines(keepends=True)[first - 1:last]
        assert lines and lines[-1].endswith(b"\n"), (key, first, last)
        parts.append(f"# {source.repo}@{source.commit[:12]} {source.path} lines {first}-"
                     f"{last or first + len(lines) - 1}\n".encode("utf-8") + b"".join(lines))
    os.makedirs(directory, exist_ok=True)
    with open(path + ".part", "wb") as f:
        f.write(b"\n".join(parts))
    os.replace(path + ".part", path)
    return path
