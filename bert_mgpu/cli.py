"""The generic adapter between absl flags and the run configs: the only module that imports
`absl.flags`.

A script names its config class (configs/<job>.py): `define_config_flags(Config)` at import
defines an absl flag for every field that declares one (configs/base.py `Flag`: Google's name,
kind, default, help, enum values; the subtrees' fields too, narrowed for the script where its
config says so), and `build_config(Config, *checks)` in `main` fills the config from the parsed
flags by field name, validates it, and runs the job's checks of the files it names (in the job's
data module), all before TensorFlow loads. Errors are one line naming the flag. Nothing here
knows a job; nothing below this layer reads FLAGS.
"""

import dataclasses
import os
import re
import sys
import tempfile
import textwrap
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from absl import flags, logging

from bert_mgpu.configs.base import FLAG, FLAG_VALUES, FLAGS_GIVEN, SUBTREE, Flag

FLAGS = flags.FLAGS

# The flags are defined here but belong to the script that asks for them: absl attributes a flag
# to the module that called DEFINE_*, and `--help` lists the main module's flags only. Disclaimed,
# this module's definitions are attributed to its caller (the script), so `--help` lists each
# script's own flags.
flags.disclaim_key_flags()


class FlagError(ValueError):
    """A flag value that cannot work; the message names the flag."""


_DEFINERS = {"string": flags.DEFINE_string, "bool": flags.DEFINE_bool,
             "integer": flags.DEFINE_integer, "float": flags.DEFINE_float,
             "list": flags.DEFINE_list}


# ---------------------------------------------------------------------------------------------
# The generic adapter: absl flags from the configs' field declarations (configs/base.py `Flag`).

# Every flag this module defined for the running script, in definition order -> its `Flag`.
_DEFINED: Dict[str, Flag] = {}
# The config classes the running script defined its flags from (`--help` groups by them).
_CLASSES: List[type] = []

# The flags of Google's scripts (create_pretraining_data.py, run_pretraining.py,
# run_classifier.py, run_squad.py, extract_features.py at eedf571): `--help` lists them first.
GOOGLE_FLAGS = frozenset("""
    batch_size bert_config_file data_dir do_eval do_lower_case do_predict do_train
    do_whole_word_mask doc_stride dupe_factor eval_batch_size init_checkpoint input_file layers
    learning_rate masked_lm_prob max_answer_length max_eval_steps max_predictions_per_seq
    max_query_length max_seq_length n_best_size null_score_diff_threshold num_train_epochs
    num_train_steps num_warmup_steps output_dir output_file predict_batch_size predict_file
    random_seed save_checkpoints_steps short_seq_prob task_name train_batch_size train_file
    verbose_logging version_2_with_negative vocab_file warmup_proportion""".split())
# The arguments that ask for `--help` (absl's spellings, and -h).
_HELP_ARGS = frozenset(("--help", "-help", "-h", "-?", "--helpshort", "-helpshort"))


def _flags_of(cls, only=None, narrowed=None) -> Iterator[Tuple[str, Flag]]:
    """(name, Flag) of every flag `cls` declares, its subtrees' included (`only`: the names
    kept; `narrowed`: name -> `Flag.narrowed` changes)."""
    narrowed = narrowed or {}
    for f in dataclasses.fields(cls):
        if SUBTREE in f.metadata:
            sub = f.metadata[SUBTREE]
            yield from _flags_of(sub.cls, sub.flags, narrowed)
        elif FLAG in f.metadata:
            flag = f.metadata[FLAG]
            name = flag.name or f.name
            if only is None or name in only:
                yield name, flag.narrowed(**narrowed.get(name, {}))


def script_flags(cls) -> Dict[str, Flag]:
    """name -> Flag of every flag of the script whose config is `cls`."""
    out = dict(_flags_of(cls, narrowed=cls.narrowed_flags))
    for group in cls.accepted_flags:
        out.update(_flags_of(group))
    return out


def define_config_flags(*classes) -> None:
    """Defines the flags of the configs `classes` (a script's), each once, as absl flags."""
    for cls in classes:
        for name, flag in script_flags(cls).items():
            if name not in FLAGS:
                _define(name, flag)
        _CLASSES.append(cls)


def _define(name: str, flag: Flag, **where) -> None:
    if flag.kind == "enum":
        flags.DEFINE_enum(name, flag.default, list(flag.enum), flag.help, **where)
    else:
        _DEFINERS[flag.kind](name, flag.default, flag.help, **where)
    _DEFINED[name] = flag


# Flags that a file named by one of the script's flags declares (a --processors_file's own
# flags.DEFINE_*): that flag's name -> a function (the file's path, the names already defined)
# -> {name: Flag}, raising ValueError (one line) for a file that cannot give them.
_FLAG_SOURCES: Dict[str, Callable[[str, frozenset], Dict[str, Flag]]] = {}


def flags_from_file(flag: str, source: Callable[[str, frozenset], Dict[str, Flag]]) -> None:
    """Declares that the file `--flag` names defines more flags of the script (`source` reads
    them): they are defined and parsed with the script's own, their values are in the
    config's `flags` (run_config.json) like the script's; nothing but this module reads absl.
    """
    _FLAG_SOURCES[flag] = source


_HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml", "h", "?")

# The flags each such file defined: "--flag=path" -> their names (a section of --help).
_FILE_FLAGS: Dict[str, List[str]] = {}


def _define_flags_from_files(argv: List[str]) -> None:
    """Defines the flags of the files the command line names (`flags_from_file`): a first
    parse of the flags known so far finds the files, then the flags are unparsed to be
    parsed again with the files' own."""
    if not _FLAG_SOURCES:
        return
    # Without --help and its kind: they print the flags and exit, the files' flags listed too.
    FLAGS([a for a in argv if a.split("=")[0].lstrip("-") not in _HELP_FLAGS], known_only=True)
    try:
        for flag, source in _FLAG_SOURCES.items():
            path = FLAGS[flag].value
            for name, declared in (source(path, frozenset(FLAGS)) if path else {}).items():
                # The script's own (--help lists the main module's flags).
                _define(name, declared, module_name=sys.argv[0])
                _FILE_FLAGS.setdefault(f"--{flag}={path}", []).append(name)
    finally:
        FLAGS.unparse_flags()


def build_config(cls, *checks: Callable[[Any], None]):
    """The config `cls` of the parsed flags, validated, then checked by `checks` (functions of
    the config that read the files it names, before TensorFlow loads).

    In order: the required flags (`cls.required_flags`), the output paths (writable), a
    warning for each ignored flag given, the log level (`--verbose`: DEBUG), the config filled
    by field name and validated (a ValueError becomes a one-line FlagError), then `checks`.
    """
    require(*cls.required_flags)
    for name, flag in script_flags(cls).items():
        if flag.output == "dir":
            check_output_dir(name)
        elif flag.output == "files":
            check_output_files(name)
    warn_ignored_flags(cls)
    if "verbose" in _DEFINED and FLAGS.verbose:
        # Google's full logs (configs/base.py Verbosity) are logged at DEBUG.
        logging.set_verbosity(logging.DEBUG)
    given = given_flags()
    try:
        cfg = _filled(cls, None, given)
        cfg.validate()
    except ValueError as e:
        raise FlagError(str(e)) from None
    for check in checks:
        check(cfg)
    return cfg


def _filled(cls, only, given):
    """`cls.build` of its fields' values: each flag's (converted; `only`: the flags kept, the
    others' fields keep their defaults), each subtree built."""
    values = {}
    for f in dataclasses.fields(cls):
        if SUBTREE in f.metadata:
            sub = f.metadata[SUBTREE]
            values[f.name] = _filled(sub.cls, sub.flags, given)
        elif FLAG in f.metadata:
            flag = f.metadata[FLAG]
            name = flag.name or f.name
            if only is None or name in only:
                values[f.name] = flag.field_value(FLAGS[name].value)
        elif FLAG_VALUES in f.metadata:
            values[f.name] = flag_values_dict()
        elif FLAGS_GIVEN in f.metadata:
            values[f.name] = given
    return cls.build(values, given)


def _group_title(cls) -> str:
    """'EvalDuringTraining' -> 'eval during training'."""
    return " ".join(re.findall(r"[A-Z][a-z]*", cls.__name__)).lower()


def _flag_groups(cls) -> Dict[str, List[str]]:
    """Group title -> the names of the script's flags declared by that config class (a subtree's
    own class, the script's config, or a class of `accepted_flags`), in definition order."""
    groups: Dict[str, List[str]] = {}

    def walk(owner, only, title):
        for f in dataclasses.fields(owner):
            if SUBTREE in f.metadata:
                sub = f.metadata[SUBTREE]
                walk(sub.cls, sub.flags, _group_title(sub.cls))
            elif FLAG in f.metadata:
                name = f.metadata[FLAG].name or f.name
                if only is None or name in only:
                    groups.setdefault(title, []).append(name)

    walk(cls, None, "this script's own")
    for group in cls.accepted_flags:
        walk(group, None, _group_title(group))
    return groups


def _flag_help(name: str) -> str:
    """One flag as absl's `--help` shows it: `--[no]name: help` wrapped, then its default."""
    fl = FLAGS[name]
    prefix = "--[no]" if isinstance(fl, flags.BooleanFlag) else "--"
    text = textwrap.fill(f"{prefix}{name}: {fl.help}", width=100, initial_indent="  ",
                         subsequent_indent="    ", break_on_hyphens=False)
    return f"{text}\n    (default: {fl.default_as_str})\n"


def help_text(doc: str) -> str:
    """The script's `--help`: its docstring, Google's flags, the project's flags by group, then
    the flags accepted for compatibility and ignored."""
    names = [name for cls in _CLASSES for group in _flag_groups(cls).values() for name in group]
    ignored = [n for n in dict.fromkeys(names) if _DEFINED[n].ignored]
    google = [n for n in dict.fromkeys(names) if n in GOOGLE_FLAGS and n not in ignored]
    sections = [("Google's flags (same names and defaults as Google's scripts)", google)]
    # Several configs of one script: a flag they share is listed once, a group title once.
    own: Dict[str, List[str]] = {}
    shown = set(google) | set(ignored)
    for cls in _CLASSES:
        for title, group in _flag_groups(cls).items():
            rest = [n for n in group if n not in shown]
            shown.update(rest)
            own.setdefault(title, []).extend(rest)
    sections.extend((f"Flags of this implementation: {title}", group)
                    for title, group in own.items() if group)
    sections.extend((f"Flags defined by {source}", names)
                    for source, names in _FILE_FLAGS.items())
    sections.append(("Google's TPU flags, accepted for compatibility and ignored", ignored))
    out = [doc.strip() + "\n"] if doc else []
    for title, group in sections:
        if group:
            out.append(f"\n{title}:\n" + "".join(_flag_help(n) for n in group))
    out.append("\n--helpfull also lists absl's own flags (logging, verbosity).\n")
    return "".join(out)


def warn_ignored_flags(cls) -> None:
    """Logs a warning for every flag of the script accepted for compatibility and ignored that
    is set on the command line."""
    for name, flag in script_flags(cls).items():
        if flag.ignored and FLAGS[name].present:
            logging.warning("--%s is accepted for compatibility with Google's scripts and "
                            "ignored (this implementation runs on GPUs/CPU).", name)


def parse_flags(argv: List[str]) -> List[str]:
    """absl's flag parsing for `app.run(..., flags_parser=parse_flags)`: a bad flag (unknown
    name, a value of the wrong type or outside its enum) is one line `SCRIPT: ERROR: ...` and
    exit code 1, as every other bad input. `--help` (or -h) prints `help_text`, `--helpfull`
    absl's list of every flag; both exit 0."""
    script = os.path.basename(argv[0]) if argv else "bert_mgpu"
    given = argv[1:argv.index("--") if "--" in argv else None]
    try:
        _define_flags_from_files(argv)  # first: --help lists the files' flags too
        if _HELP_ARGS.intersection(given):
            main = sys.modules.get("__main__")
            sys.stdout.write(help_text(main.__doc__ if main else ""))
            sys.exit(0)
        if {"--helpfull", "-helpfull"}.intersection(given):
            sys.stdout.write(FLAGS.get_help() + "\n")
            sys.exit(0)
        rest = FLAGS(argv)
    except flags.Error as e:
        message = " ".join(str(e).split())
        sys.stderr.write(f"{script}: ERROR: {message} (--help lists the flags)\n")
        sys.exit(1)
    except ValueError as e:  # a file of _FLAG_SOURCES that cannot give its flags
        sys.stderr.write(f"{script}: ERROR: {' '.join(str(e).split())}\n")
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
    return [name for name in _DEFINED if name in FLAGS]


def flag_values_dict() -> dict:
    """name -> value of every flag this module defined for the running script (run_config.json).
    """
    return {name: FLAGS[name].value for name in _declared_names()}


def given_flags() -> frozenset:
    """The names of the running script's flags set on the command line."""
    return frozenset(name for name in _declared_names() if FLAGS[name].present)


def set_derived_flags(values: Dict[str, Any]) -> None:
    """Sets flags of the running script to values derived from others (e.g. the files of a
    converted --init_checkpoint), before the config is built; they stay "not given"."""
    for name, value in values.items():
        FLAGS[name].value = value


def from_flags(cls, **explicit):
    """`cls` (a config dataclass) with every field taken from the flag of the same name, except
    those given in `explicit` (subtrees and derived values)."""
    values = {f.name: getattr(FLAGS, f.name) for f in dataclasses.fields(cls)
              if f.name not in explicit and f.name in FLAGS}
    return cls(**values, **explicit)


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
