"""`BertConfig`: Google's `bert_config.json`, plus the model options of BERT's successors.

`BertConfig` reads and writes exactly Google's JSON keys. Keys it does not know (for example
`pooler_fc_size`, `directionality` in Google's Chinese config) are kept and written back, never
fatal, so a config round-trips unchanged.

Model options of BERT's successors are more keys of the same file (`MODEL_OPTIONS`); they live in
`extra` like any other key, so a config is written back exactly as read, and a config without
them is Google's BERT (same variables, same numerics):

  key                       default     meaning
  embedding_size            hidden_size ALBERT: word/position/type embeddings of this width,
                                        projected to hidden_size (`embedding_hidden_mapping_in`)
  share_parameters          "none"      ALBERT: "all", "attention" or "ffn" sub-blocks shared
                                        by every layer (ALBERT's `num_hidden_groups: 1` = "all")
  pre_layer_norm            false       Cramming: LayerNorm before each sub-block, plus a final one
  use_bias                  true        Cramming (false): no biases in Q/K/V, attention output
                                        and feed-forward dense layers
  position_embedding_type   "learned"   Cramming: "scaled_sinusoidal", a fixed sinusoid table
                                        times one learned scale
  gated_ffn                 false       Cramming: gated feed-forward; intermediate_size is the
                                        width of the first dense layer, half of it goes on
  position_embedding_type   "rope"      ModernBERT: no position table; rotary embeddings of the
                                        queries and keys (GPT-NeoX layout, rotate-half)
  rope_theta                10000.0     RoPE base of the global-attention layers
  local_rope_theta          rope_theta  RoPE base of the local (sliding-window) layers
  local_attention_window    0           ModernBERT: a local layer's query attends to keys at
                                        distance <= window / 2; 0 = every layer global
  global_attention_every_n_layers  1    layer i is global when i % n == 0, local otherwise
                                        (ModernBERT: window 128, every 3rd layer global)
  layer_norm_eps            1e-12       every LayerNorm's epsilon (ModernBERT: 1e-5)
  layer_norm_bias           true        false: LayerNorms have no `beta` (ModernBERT)
  first_layer_attention_norm true       false: layer 0 has no attention LayerNorm under
                                        pre_layer_norm (ModernBERT: the embedding LayerNorm is it)
  head_bias                 true        false: no bias in the masked-LM transform dense layer
                                        (and in ModernBERT's pooler head)
  classifier_pooling        absent      absent: Google's pooler tanh(dense(first token));
                                        "cls" / "mean": ModernBERT's head LayerNorm(act(dense(
                                        first token / masked mean))) as the pooled output;
                                        the token tasks (NER, SQuAD) apply that head to every
                                        token before their output layer, as Hugging Face's
                                        ModernBertFor{Token,QuestionAnswering} do
  classifier_dropout        absent      ModernBERT: dropout before the fine-tuning jobs' output
                                        layer; absent: each job's own (Google's 0.1 for the
                                        classifier, hidden_dropout_prob for NER, none for SQuAD)
  type_vocab_size           (Google's)  0: no token-type table, segment ids are ignored
"""

import copy
import dataclasses
import json
import os
from typing import Any, Dict, Optional

# Google's keys and defaults (modeling.BertConfig.__init__), in Google's order.
_GOOGLE_DEFAULTS = (
    ("vocab_size", None),
    ("hidden_size", 768),
    ("num_hidden_layers", 12),
    ("num_attention_heads", 12),
    ("intermediate_size", 3072),
    ("hidden_act", "gelu"),
    ("hidden_dropout_prob", 0.1),
    ("attention_probs_dropout_prob", 0.1),
    ("max_position_embeddings", 512),
    ("type_vocab_size", 16),
    ("initializer_range", 0.02),
)


# The model options (module docstring) and their defaults; `None` = see the property.
MODEL_OPTIONS = (
    ("embedding_size", None),
    ("share_parameters", "none"),
    ("pre_layer_norm", False),
    ("use_bias", True),
    ("position_embedding_type", "learned"),
    ("gated_ffn", False),
    ("rope_theta", 10000.0),
    ("local_rope_theta", None),
    ("local_attention_window", 0),
    ("global_attention_every_n_layers", 1),
    ("layer_norm_eps", 1e-12),
    ("layer_norm_bias", True),
    ("first_layer_attention_norm", True),
    ("head_bias", True),
    ("classifier_pooling", None),
    ("classifier_dropout", None),
)


SHARE_PARAMETERS = ("none", "all", "attention", "ffn")


POSITION_EMBEDDING_TYPES = ("learned", "scaled_sinusoidal", "rope")


CLASSIFIER_POOLINGS = ("cls", "mean")


class BertConfigError(ValueError):
    """A `bert_config.json` that cannot describe a model; the message names the file and key."""


@dataclasses.dataclass
class BertConfig:
    """Configuration of a `BertModel`, with Google's attribute names and defaults.

    Attributes are Google's: `vocab_size`, `hidden_size`, `num_hidden_layers`,
    `num_attention_heads`, `intermediate_size`, `hidden_act`, `hidden_dropout_prob`,
    `attention_probs_dropout_prob`, `max_position_embeddings`, `type_vocab_size`,
    `initializer_range`. Unknown JSON keys live in `extra` and are also readable as attributes.
    """

    vocab_size: Optional[int] = None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getattr__(self, name):
        # Only called when normal lookup fails: expose unknown JSON keys as attributes.
        extra = self.__dict__.get("extra", {})
        if name in extra:
            return extra[name]
        raise AttributeError(name)

    # -- model options (read from `extra`; absent = Google's BERT) ------------------------------

    @property
    def embedding_size(self) -> int:
        """Width of the embedding tables (ALBERT's E); `hidden_size` when not factorized."""
        value = self.extra.get("embedding_size")
        return self.hidden_size if value is None else value

    @property
    def share_parameters(self) -> str:
        """One of "none", "all", "attention", "ffn". ALBERT's own configs say
        `num_hidden_groups: 1` (one group of layers: everything shared), which reads as "all"."""
        if "share_parameters" in self.extra:
            return self.extra["share_parameters"]
        if self.extra.get("num_hidden_groups") == 1:
            return "all"
        return "none"

    @property
    def pre_layer_norm(self) -> bool:
        return self.extra.get("pre_layer_norm", False)

    @property
    def use_bias(self) -> bool:
        return self.extra.get("use_bias", True)

    @property
    def position_embedding_type(self) -> str:
        return self.extra.get("position_embedding_type", "learned")

    @property
    def gated_ffn(self) -> bool:
        return self.extra.get("gated_ffn", False)

    @property
    def rope_theta(self) -> float:
        return self.extra.get("rope_theta", 10000.0)

    @property
    def local_rope_theta(self) -> float:
        value = self.extra.get("local_rope_theta")
        return self.rope_theta if value is None else value

    @property
    def local_attention_window(self) -> int:
        return self.extra.get("local_attention_window", 0)

    @property
    def global_attention_every_n_layers(self) -> int:
        return self.extra.get("global_attention_every_n_layers", 1)

    def is_local_layer(self, index: int) -> bool:
        """Whether encoder layer `index` attends within the sliding window only."""
        return self.local_attention_window > 0 and \
            index % self.global_attention_every_n_layers != 0

    @property
    def layer_norm_eps(self) -> float:
        return self.extra.get("layer_norm_eps", 1e-12)

    @property
    def layer_norm_bias(self) -> bool:
        return self.extra.get("layer_norm_bias", True)

    @property
    def first_layer_attention_norm(self) -> bool:
        return self.extra.get("first_layer_attention_norm", True)

    @property
    def head_bias(self) -> bool:
        return self.extra.get("head_bias", True)

    @property
    def classifier_pooling(self) -> Optional[str]:
        return self.extra.get("classifier_pooling")

    @property
    def classifier_dropout(self) -> Optional[float]:
        """The dropout before a fine-tuning job's output layer, or None: the job's own."""
        return self.extra.get("classifier_dropout")

    def _validate_modernbert_options(self, source: str) -> None:
        extra = self.extra
        for key in ("layer_norm_bias", "first_layer_attention_norm", "head_bias"):
            if key in extra and not isinstance(extra[key], bool):
                raise BertConfigError(f"{source}: '{key}' must be true or false, "
                                      f"got {extra[key]!r}")
        for key in ("rope_theta", "local_rope_theta", "layer_norm_eps"):
            value = extra.get(key)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, (int, float)) or value <= 0):
                raise BertConfigError(f"{source}: '{key}' must be a number > 0, got {value!r}")
        for key, minimum in (("local_attention_window", 0),
                             ("global_attention_every_n_layers", 1)):
            value = extra.get(key, minimum)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise BertConfigError(
                    f"{source}: '{key}' must be an integer >= {minimum}, got {value!r}")
        if self.local_attention_window % 2:
            raise BertConfigError(
                f"{source}: 'local_attention_window' must be even (keys at distance <= "
                f"window / 2 on each side), got {self.local_attention_window}")
        value = extra.get("classifier_dropout")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0.0 <= value < 1.0):
            raise BertConfigError(f"{source}: 'classifier_dropout' must be in [0, 1), "
                                  f"got {value!r}")
        pooling = self.classifier_pooling
        if pooling is not None and pooling not in CLASSIFIER_POOLINGS:
            raise BertConfigError(f"{source}: 'classifier_pooling' must be one of "
                                  f"{', '.join(CLASSIFIER_POOLINGS)}, got {pooling!r}")
        if self.position_embedding_type == "rope" and self.hidden_size // \
                self.num_attention_heads % 2:
            raise BertConfigError(f"{source}: 'position_embedding_type' rope needs an even "
                                  f"head size (hidden_size / num_attention_heads)")
        if not self.first_layer_attention_norm and not self.extra.get("pre_layer_norm", False):
            raise BertConfigError(f"{source}: 'first_layer_attention_norm' false needs "
                                  f"'pre_layer_norm' true")
        if self.local_attention_window and self.share_parameters != "none":
            raise BertConfigError(f"{source}: 'local_attention_window' with 'share_parameters' "
                                  f"is not supported (a shared block has one attention kind)")

    def _validate_model_options(self, source: str) -> None:
        extra = self.extra
        self._validate_modernbert_options(source)
        for key in ("pre_layer_norm", "use_bias", "gated_ffn"):
            if key in extra and not isinstance(extra[key], bool):
                raise BertConfigError(f"{source}: '{key}' must be true or false, "
                                      f"got {extra[key]!r}")
        if extra.get("embedding_size") is not None:
            value = extra["embedding_size"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BertConfigError(
                    f"{source}: 'embedding_size' must be an integer >= 1, got {value!r}")
        if self.share_parameters not in SHARE_PARAMETERS:
            raise BertConfigError(f"{source}: 'share_parameters' must be one of "
                                  f"{', '.join(SHARE_PARAMETERS)}, got {self.share_parameters!r}")
        # ALBERT's grouping keys: only the layouts ALBERT released (one group, one inner block).
        groups = extra.get("num_hidden_groups")
        if groups is not None and groups != 1 and "share_parameters" not in extra:
            raise BertConfigError(
                f"{source}: 'num_hidden_groups' = {groups!r} is not supported (1 = all layers "
                f"share their parameters); use 'share_parameters' instead")
        if extra.get("inner_group_num", 1) != 1:
            raise BertConfigError(f"{source}: 'inner_group_num' must be 1, got "
                                  f"{extra['inner_group_num']!r}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise BertConfigError(
                f"{source}: 'position_embedding_type' must be one of "
                f"{', '.join(POSITION_EMBEDDING_TYPES)}, got {self.position_embedding_type!r}")
        if self.position_embedding_type == "scaled_sinusoidal" and self.embedding_size % 2:
            raise BertConfigError(
                f"{source}: 'position_embedding_type' scaled_sinusoidal needs an even embedding "
                f"width (sine and cosine pairs), got {self.embedding_size}")
        if self.gated_ffn and self.intermediate_size % 2:
            raise BertConfigError(
                f"{source}: 'gated_ffn' splits intermediate_size into value and gate halves; it "
                f"must be even, got {self.intermediate_size}")

    @classmethod
    def from_dict(cls, json_object: Dict[str, Any], source: str = "<dict>") -> "BertConfig":
        """Builds a config from a dict of Google's keys; unknown keys go to `extra`."""
        if not isinstance(json_object, dict):
            raise BertConfigError(f"{source}: expected a JSON object, got "
                                  f"{type(json_object).__name__}")
        known = {name for name, _ in _GOOGLE_DEFAULTS}
        kwargs = {k: v for k, v in json_object.items() if k in known}
        extra = {k: v for k, v in json_object.items() if k not in known}
        config = cls(**kwargs, extra=copy.deepcopy(extra))
        config.validate(source)
        return config

    @classmethod
    def from_json_file(cls, json_file: str) -> "BertConfig":
        """Reads Google's `bert_config.json`; errors name the file."""
        if "://" not in json_file:  # local: no TensorFlow (config builders check it at start)
            if not os.path.isfile(json_file):
                raise BertConfigError(f"{json_file}: bert_config file not found")
            with open(json_file, "rb") as reader:
                data = reader.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise BertConfigError(f"{json_file}: not a UTF-8 JSON file") from None
        else:
            import tensorflow as tf  # gs:// etc. go through tf.io.gfile

            if not tf.io.gfile.exists(json_file):
                raise BertConfigError(f"{json_file}: bert_config file not found")
            with tf.io.gfile.GFile(json_file, "r") as reader:
                text = reader.read()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise BertConfigError(f"{json_file}:{e.lineno}: invalid JSON ({e.msg})") from None
        return cls.from_dict(obj, source=json_file)

    def validate(self, source: str = "<config>") -> None:
        """Checks the values a model needs; raises `BertConfigError` naming the key."""
        def need_int(key, minimum=1):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise BertConfigError(
                    f"{source}: '{key}' must be an integer >= {minimum}, got {value!r}")

        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings"):
            need_int(key)
        need_int("type_vocab_size", minimum=0)  # 0: no token types (ModernBERT)
        if self.hidden_size % self.num_attention_heads:
            raise BertConfigError(
                f"{source}: hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise BertConfigError(f"{source}: '{key}' must be in [0, 1), got {value!r}")
        self._validate_model_options(source)

    def to_dict(self) -> Dict[str, Any]:
        """Google's keys in Google's order, then the unknown keys as read."""
        output = {name: getattr(self, name) for name, _ in _GOOGLE_DEFAULTS}
        output.update(copy.deepcopy(self.extra))
        return output

    def to_json_string(self) -> str:
        """Serializes like Google's `BertConfig.to_json_string` (indent 2, sorted keys)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file: str) -> None:
        """Writes the config atomically (temporary file, then rename)."""
        directory = os.path.dirname(os.path.abspath(json_file))
        os.makedirs(directory, exist_ok=True)
        tmp = json_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())
        os.replace(tmp, json_file)

    def replace(self, **changes) -> "BertConfig":
        """A copy with some fields changed (e.g. dropout off for evaluation)."""
        return dataclasses.replace(self, extra=copy.deepcopy(self.extra), **changes)


def read_bert_config(model) -> BertConfig:
    """Reads `model.bert_config_file` (`model`: a configs.base.ModelFiles) and checks that
    `model.max_seq_length` fits the model.

    Raises:
      BertConfigError: the file is missing or invalid, naming it.
      ValueError: --max_seq_length is longer than the model's positions.
    """
    bert_config = BertConfig.from_json_file(model.bert_config_file)
    if model.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={model.max_seq_length} is longer than "
                         f"max_position_embeddings ({bert_config.max_position_embeddings}) "
                         f"in {model.bert_config_file}")
    return bert_config
