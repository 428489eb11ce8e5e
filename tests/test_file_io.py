"""bert_mgpu.data.file_io, and the two line readers built on it (create_pretraining_data.py's
byte ranges, create_vocab.py's counted reads), with reads far smaller than a line."""

import gzip
import hashlib
import os
import random

import pytest

from bert_mgpu.data import file_io, pretraining_data, vocab_builder


def text_bytes(seed, n_lines=200):
    """Lines of 0-60 bytes (some empty, some non-ASCII), the last one without a newline."""
    rng = random.Random(seed)
    alphabet = "ab c\r\t\u00e9\u4e2d"
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
             for _ in range(n_lines)]
    return "\n".join(lines).encode("utf-8")


def random_reads(data, rng, largest):
    reads, i = [], 0
    while i < len(data):
        n = rng.randrange(1, largest + 1)
        reads.append(data[i:i + n])
        i += n
    return reads


def assert_whole_lines(blocks, data):
    """The blocks are `data`, cut only after newlines."""
    assert b"".join(blocks) == data
    assert all(blocks)
    assert all(b.endswith(b"\n") for b in blocks[:-1])


@pytest.mark.parametrize("largest", [1, 3, 7, 50, 10000])
def test_whole_line_blocks_cut_only_after_newlines(largest):
    rng = random.Random(largest)
    for seed in range(20):
        data = text_bytes(seed)
        reads = random_reads(data, rng, largest)
        blocks = list(file_io.whole_line_blocks(reads))
        assert_whole_lines(blocks, data)
        # Nothing is held back: after each read, everything up to its last newline is out.
        read_ends = [sum(map(len, reads[:i + 1])) for i in range(len(reads))]
        expected_cuts = sorted({data.rfind(b"\n", 0, e) + 1 for e in read_ends} - {0})
        block_ends = [sum(map(len, blocks[:i + 1])) for i in range(len(blocks))]
        assert [e for e in block_ends if e != len(data) or data.endswith(b"\n")] == expected_cuts


@pytest.mark.parametrize("data", [b"", b"\n", b"\n\n\n", b"no newline", b"one\n", b"a\nb"])
def test_whole_line_blocks_edge_cases(data):
    for size in (1, 2, 100):
        blocks = list(file_io.whole_line_blocks(random_reads(data, random.Random(0), size)))
        assert_whole_lines(blocks, data)


def test_whole_line_blocks_stop_at_an_empty_read():
    assert list(file_io.whole_line_blocks([b"a\nb", b"", b"never\n"])) == [b"a\n", b"b"]


def test_open_input_size_sha256_and_rename(tmp_path):
    data = text_bytes(1)
    plain, packed = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes(data)
    packed.write_bytes(gzip.compress(data))
    for path in (plain, packed):
        with file_io.open_input(str(path)) as f:
            assert f.read() == data
    assert file_io.file_size(str(packed)) == packed.stat().st_size
    assert file_io.file_sha256(str(packed)) == hashlib.sha256(packed.read_bytes()).hexdigest()
    assert file_io.file_sha256("") is None
    os.utime(packed, ns=(5, 1_000_000_007))  # nanoseconds count (not whole seconds)
    assert file_io.file_stats(str(packed)) == [str(packed), packed.stat().st_size, 1_000_000_007]
    assert file_io.file_stats(str(tmp_path / "none")) == [str(tmp_path / "none"), None, None]
    file_io.rename(str(plain), str(packed))
    assert packed.read_bytes() == data and not plain.exists()


def test_pretraining_reader_ranges_with_tiny_reads(tmp_path, monkeypatch):
    """Every byte range, read 3 bytes at a time, gives exactly its bytes in whole-line blocks
    (create_pretraining_data.py's shards are ranges that start and end after a newline)."""
    data = text_bytes(2)
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    monkeypatch.setattr(pretraining_data, "_READ_BLOCK", 3)
    cuts = [0] + [i + 1 for i, c in enumerate(data) if c == ord("\n")][::7] + [len(data)]
    for start, end in zip(cuts, cuts[1:]):
        blocks = list(pretraining_data._read_line_blocks(str(path), start, end))
        assert_whole_lines(blocks, data[start:end])
    assert_whole_lines(list(pretraining_data._read_line_blocks(str(path))), data)


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
def test_vocab_reader_counts_raw_bytes_with_tiny_reads(tmp_path, name):
    """create_vocab.py's progress counts the file's own bytes (compressed ones for .gz)."""
    data = text_bytes(3)
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    counted = []
    blocks = list(vocab_builder._line_blocks(str(path), counted.append, block_bytes=5))
    assert_whole_lines(blocks, data)
    assert sum(counted) == path.stat().st_size
