"""Input and output files of the data modules: local paths, or remote ones through tf.io.gfile.

A path is remote when it has a scheme (`gs://`, `hdfs://`, ...). TensorFlow is imported only for
remote paths: the data jobs (create_pretraining_data.py, create_vocab.py) never import it for
local files (its start-up time and memory: docs/benchmarks.md).
"""

import gzip
import hashlib
import os
from typing import IO, Iterable, Iterator, Optional


def is_remote(path: str) -> bool:
    return "://" in path


def gfile():
    """`tf.io.gfile`, imported on first use."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (remote paths only)
    return tf.io.gfile


def open_file(path: str, mode: str = "rb") -> IO:
    """`open(path, mode)`, or a `GFile` for a remote path. No decompression."""
    return gfile().GFile(path, mode) if is_remote(path) else open(path, mode)


def open_input(path: str) -> IO:
    """A binary reader of `path`'s content, decompressed when the name ends in `.gz`."""
    if not path.endswith(".gz"):
        return open_file(path)
    if is_remote(path):
        return gzip.GzipFile(fileobj=open_file(path))
    return gzip.open(path, "rb")


def file_size(path: str) -> int:
    """Bytes on disk (compressed size for `.gz`)."""
    return gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def file_stats(path: str) -> list:
    """[path, size in bytes, modification time in ns] (None, None when missing): what a
    feature cache's key takes of an input file."""
    if is_remote(path):
        tf_gfile = gfile()
        if not tf_gfile.exists(path):
            return [path, None, None]
        stat = tf_gfile.stat(path)
        return [path, stat.length, stat.mtime_nsec]
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return [path, None, None]
    return [path, stat.st_size, stat.st_mtime_ns]


def rename(src: str, dst: str) -> None:
    """Replaces `dst` by `src` (atomic on a local file system)."""
    if is_remote(dst):
        gfile().rename(src, dst, overwrite=True)
    else:
        os.replace(src, dst)


def file_sha256(path: Optional[str]) -> Optional[str]:
    """Hex SHA-256 of the file's bytes; None for no path."""
    if not path:
        return None
    digest = hashlib.sha256()
    with open_file(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def whole_line_blocks(reads: Iterable[bytes]) -> Iterator[bytes]:
    """Regroups consecutive reads of a file into blocks of whole lines.

    A line ends at b"\\n" only (as the line reader Google's scripts use); the last line may lack
    it. The blocks, joined, are the reads joined; every block but the last ends with b"\\n".
    A read without a newline is carried into the next block, so a block may hold several reads.

    Args:
      reads: non-empty `bytes` in file order (an empty one ends the file, as `f.read` does).
    """
    carry = b""
    for data in reads:
        if not data:
            break
        data = carry + data
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield data[:cut]
    if carry:
        yield carry
