"""TFRecord files of `tf.train.Example`s, written and read without TensorFlow.

Importing TensorFlow costs seconds and hundreds of MB (docs/benchmarks.md); a data tool that only
writes records does not need it.
Both formats are small and stable:

TFRecord framing (tensorflow/core/lib/io/record_writer.cc), per record:
    uint64 length, little-endian
    uint32 masked_crc32c(the 8 length bytes)
    bytes  data[length]
    uint32 masked_crc32c(data)
with masked_crc(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32), CRC-32C (Castagnoli).

tf.train.Example (tensorflow/core/example/{example,feature}.proto), protobuf wire format:
    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }
             map entry: { string key = 1; Feature value = 2; }
    Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                            Int64List int64_list = 3; } }
    FloatList { repeated float value = 1 [packed = true]; }   (little-endian float32)
    Int64List { repeated int64 value = 1 [packed = true]; }   (varints, two's complement)

Tests read files written here with `tf.data.TFRecordDataset` + `tf.io.parse_example`, and parse
files TensorFlow wrote with `read_records` + `decode_example`.
"""

import os
import struct
from typing import Dict, Iterable, Iterator, List, Mapping, Sequence, Tuple

import google_crc32c

from bert_mgpu.data import features

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_F32 = struct.Struct("<f")


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of `data` (masking guards against CRCs of CRCs)."""
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int (negative int64s use 10 bytes)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_tag: int, payload: bytes) -> bytes:
    return bytes((field_tag,)) + varint(len(payload)) + payload


class RecordFramer:
    """Frames serialized records as TFRecord bytes; caches the header of each record length.

    Records of one dataset have few distinct lengths, so the 12-byte header (length and its CRC)
    is computed once per length.
    """

    def __init__(self):
        self._headers: Dict[int, bytes] = {}

    def frame(self, data: bytes) -> bytes:
        header = self._headers.get(len(data))
        if header is None:
            length = _U64.pack(len(data))
            header = length + _U32.pack(masked_crc32c(length))
            self._headers[len(data)] = header
        return header + data + _U32.pack(masked_crc32c(data))


class RecordFileWriter:
    """Writes a TFRecord file atomically: records go to a temporary file (unique per process),
    renamed to `path` when the `with` block ends normally and deleted when it raises, so no
    truncated file is ever left under the final name. Remote paths (gs://...) go through
    `tf.io.gfile` (TensorFlow imported only then).

        with RecordFileWriter(path) as writer:
            writer.write(encode_example(values, FLOAT_FEATURES))
    """

    def __init__(self, path: str):
        self.path = path
        self.tmp = f"{path}.incomplete-{os.getpid()}"
        self._remote = "://" in path
        self._framer = RecordFramer()
        self._file = None

    def __enter__(self) -> "RecordFileWriter":
        if self._remote:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            self._file = tf.io.gfile.GFile(self.tmp, "wb")
        else:
            self._file = open(self.tmp, "wb")
        return self

    def write(self, serialized: bytes) -> None:
        self._file.write(self._framer.frame(serialized))

    def __exit__(self, exc_type, exc, tb) -> None:
        self._file.close()
        if self._remote:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            if exc_type is None:
                tf.io.gfile.rename(self.tmp, self.path, overwrite=True)
            elif tf.io.gfile.exists(self.tmp):
                tf.io.gfile.remove(self.tmp)
        elif exc_type is None:
            os.replace(self.tmp, self.path)
        elif os.path.exists(self.tmp):
            os.remove(self.tmp)


def read_records(path: str, verify: bool = True) -> Iterator[bytes]:
    """Yields the serialized records of a local TFRecord file (uncompressed).

    Raises:
      ValueError: on a truncated file or (with `verify`) a CRC mismatch, naming the file.
    """
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise ValueError(f"{path}: truncated TFRecord header")
            (length,) = _U64.unpack_from(header)
            if verify and _U32.unpack_from(header, 8)[0] != masked_crc32c(header[:8]):
                raise ValueError(f"{path}: corrupt TFRecord length")
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise ValueError(f"{path}: truncated TFRecord")
            if verify and _U32.unpack(footer)[0] != masked_crc32c(data):
                raise ValueError(f"{path}: TFRecord data CRC mismatch")
            yield data


def _feature_entry(name: str, feature: bytes) -> bytes:
    """One `Features.feature` map entry (key = 1, value = 2) as field 1 of Features."""
    key = name.encode("utf-8")
    return _length_delimited(0x0A, _length_delimited(0x0A, key) + _length_delimited(0x12, feature))


def int64_feature(values: Iterable[int]) -> bytes:
    """Serialized `Feature{int64_list}`."""
    packed = b"".join(varint(int(v)) for v in values)
    inner = _length_delimited(0x0A, packed) if packed else b""
    return _length_delimited(0x1A, inner)


def float_feature(values: Sequence[float]) -> bytes:
    """Serialized `Feature{float_list}` (values rounded to float32)."""
    packed = struct.pack(f"<{len(values)}f", *values)
    inner = _length_delimited(0x0A, packed) if packed else b""
    return _length_delimited(0x12, inner)


def int64_feature_entry(name: str, values: Iterable[int]) -> bytes:
    """One serialized `Features.feature` map entry of int64 `values` (see
    `with_feature_entry`)."""
    return _feature_entry(name, int64_feature(values))


def with_feature_entry(serialized: bytes, entry: bytes) -> bytes:
    """The serialized Example `serialized` with one more feature (`int64_feature_entry`): an
    Example is field 1 (Features) only, so the entry is appended inside it."""
    tag, pos = _read_varint(serialized, 0)
    if tag != 0x0A:
        raise ValueError("not a serialized tf.train.Example")
    length, pos = _read_varint(serialized, pos)
    body = serialized[pos:pos + length]
    return _length_delimited(0x0A, body + entry)


def encode_example(values: Mapping[str, Sequence],
                   float_features=features.FLOAT_FEATURES) -> bytes:
    """Serializes name -> list of ints (or floats for names in `float_features`, by default
    Google's float features) as an Example.

    The one general Example writer of the package (classifier and other task records, tests);
    `PretrainingRecordEncoder` writes the same bytes faster for the pretraining layout only.
    """
    entries = b"".join(
        _feature_entry(name, float_feature(vals) if name in float_features
                       else int64_feature(vals))
        for name, vals in values.items())
    return _length_delimited(0x0A, entries)


def _read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """(field number, wire type, value) of a message; value is int or bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _read_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            value = buf[pos:pos + length]
            pos += length
        elif wire == 5:
            value = buf[pos:pos + 4]
            pos += 4
        elif wire == 1:
            value = buf[pos:pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, value


def _decode_list(buf: bytes, kind: int) -> List:
    values: List = []
    for field, wire, value in _fields(buf):
        if field != 1:
            continue
        if kind == 3:  # Int64List: packed (wire 2) or one varint (wire 0)
            if wire == 2:
                pos = 0
                while pos < len(value):
                    v, pos = _read_varint(value, pos)
                    values.append(v - (1 << 64) if v >= 1 << 63 else v)
            else:
                values.append(value - (1 << 64) if value >= 1 << 63 else value)
        elif kind == 2:  # FloatList: packed or one fixed32
            values.extend(x for (x,) in _F32.iter_unpack(value))
        else:  # BytesList
            values.append(value)
    return values


def decode_example(serialized: bytes) -> Dict[str, List]:
    """Parses a serialized tf.train.Example into name -> list of values (ints, floats or bytes)."""
    out: Dict[str, List] = {}
    for field, _, message in _fields(serialized):
        if field != 1:
            continue
        for entry_field, _, entry in _fields(message):
            if entry_field != 1:
                continue
            name, feature = "", b""
            for f, _, v in _fields(entry):
                if f == 1:
                    name = v.decode("utf-8")
                elif f == 2:
                    feature = v
            values: List = []
            for kind, _, lst in _fields(feature):
                values = _decode_list(lst, kind)
            out[name] = values
    return out


class PretrainingRecordEncoder:
    """Serializes pretraining instances (Google's 7 features) fast, from precomputed pieces.

    Ids and lengths are looked up in a table of their varint bytes; the entries that depend only
    on lengths (input_mask, segment_ids, masked_lm_weights, next_sentence_labels) are built once
    per distinct value and cached. Feature order is Google's (`features.PRETRAINING_FEATURES`);
    parsers do not depend on it.
    """

    _ONE_F32 = _F32.pack(1.0)
    _ZERO_F32 = _F32.pack(0.0)

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int,
                 feature_names: Sequence[str]):
        (self._k_input_ids, self._k_input_mask, self._k_segment_ids, self._k_positions,
         self._k_lm_ids, self._k_lm_weights, self._k_labels) = (
            _length_delimited(0x0A, name.encode("utf-8")) for name in feature_names)
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        # Every id, position and length of a record: a varint is at most 10 bytes per value.
        longest_record = 10 * (3 * max_seq_length + 3 * max_predictions_per_seq + 1) + 512
        self._varints = [varint(i) for i in range(max(vocab_size, longest_record) + 1)]
        self._mask_entries: Dict[int, bytes] = {}
        self._segment_entries: Dict[Tuple[int, int], bytes] = {}
        self._weight_entries: Dict[int, bytes] = {}
        self._label_entries = [self._int_entry(self._k_labels, self._varints[label])
                               for label in (0, 1)]

    def _int_entry(self, key: bytes, packed: bytes) -> bytes:
        # entry{key, value=Feature{int64_list=Int64List{value: packed}}}
        varints = self._varints
        int64_list = b"\x0a" + varints[len(packed)] + packed
        feature = b"\x1a" + varints[len(int64_list)] + int64_list
        entry = key + b"\x12" + varints[len(feature)] + feature
        return b"\x0a" + varints[len(entry)] + entry

    def _mask_entry(self, n: int) -> bytes:
        entry = self._mask_entries.get(n)
        if entry is None:
            entry = self._int_entry(self._k_input_mask,
                                    b"\x01" * n + b"\x00" * (self.max_seq_length - n))
            self._mask_entries[n] = entry
        return entry

    def _segment_entry(self, len_a: int, len_b: int) -> bytes:
        entry = self._segment_entries.get((len_a, len_b))
        if entry is None:
            entry = self._int_entry(self._k_segment_ids, b"\x00" * len_a + b"\x01" * len_b +
                                    b"\x00" * (self.max_seq_length - len_a - len_b))
            self._segment_entries[(len_a, len_b)] = entry
        return entry

    def _weight_entry(self, k: int) -> bytes:
        entry = self._weight_entries.get(k)
        if entry is None:
            weights = self._ONE_F32 * k + self._ZERO_F32 * (self.max_predictions_per_seq - k)
            float_list = b"\x0a" + varint(len(weights)) + weights
            feature = b"\x12" + varint(len(float_list)) + float_list
            entry = self._k_lm_weights + b"\x12" + varint(len(feature)) + feature
            entry = b"\x0a" + varint(len(entry)) + entry
            self._weight_entries[k] = entry
        return entry

    def encode(self, input_ids: Sequence[int], len_a: int, len_b: int,
               masked_lm_positions: Sequence[int], masked_lm_ids: Sequence[int],
               next_sentence_label: int) -> bytes:
        """Serialized Example of one instance.

        Args:
          input_ids: ids of the real tokens after masking, `[CLS] A [SEP] (B [SEP])`, unpadded.
          len_a: tokens of segment A plus [CLS] and its [SEP] (segment id 0).
          len_b: tokens of segment B plus its [SEP] (segment id 1); 0 for single-segment.
          masked_lm_positions: sorted positions of the predictions.
          masked_lm_ids: original ids at those positions.
          next_sentence_label: 0 or 1.
        """
        varints = self._varints
        n = len(input_ids)
        k = len(masked_lm_positions)
        pad_k = b"\x00" * (self.max_predictions_per_seq - k)
        int_entry = self._int_entry
        features = b"".join((
            int_entry(self._k_input_ids, b"".join([varints[t] for t in input_ids]) +
                      b"\x00" * (self.max_seq_length - n)),
            self._mask_entry(n),
            self._segment_entry(len_a, len_b),
            int_entry(self._k_positions,
                      b"".join([varints[p] for p in masked_lm_positions]) + pad_k),
            int_entry(self._k_lm_ids, b"".join([varints[t] for t in masked_lm_ids]) + pad_k),
            self._weight_entry(k),
            self._label_entries[next_sentence_label],
        ))
        return b"\x0a" + varints[len(features)] + features
