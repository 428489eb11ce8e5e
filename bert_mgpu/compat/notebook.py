"""Jupyter notebooks (`.ipynb`) in the TF1 runner: `python -m bert_mgpu.compat NOTEBOOK.ipynb`.

A notebook runs as Jupyter's "Run All" would: its code cells in order, in one `__main__`
namespace (no `__file__`, as in a kernel), each compiled on its own. What is not run:

* IPython's own lines (not Python): shell commands `!cmd` / `name = !cmd`, line magics
  `%magic` / `name = %magic`, and cells that start with a cell magic (`%%bash`, `%%time`, ...).
  They are refused before any cell runs, with one line naming the first of them, unless the
  runner is given `--skip_ipython_lines`: then each is skipped (a whole cell for a cell magic)
  and listed on stderr, never silently. A `%` or `!` that continues a Python statement (inside
  brackets, after a backslash, in a string) is Python and runs.
* What a cell would display (its last expression's value): `print` output is printed, values
  are not.

Relative paths are relative to the current directory (Jupyter starts a kernel in the notebook's
folder: run the runner from there to see the same files). Errors and tracebacks name cells as
`NOTEBOOK.ipynb code cell N` (N counts code cells from 1) with the line in that cell.
"""

import builtins
import io
import json
import linecache
import os
import re
import sys
import tokenize
import types

# A shell command or magic assigned to names: `files = !ls`, `t = %timeit -o f()`.
_ASSIGNED_ESCAPE = re.compile(r"^\s*[A-Za-z_][\w\s,]*=\s*[!%]")


class NotebookError(ValueError):
    """A notebook the runner cannot run as it is; the message is one line without the
    runner's prefix."""


class Cell:
    """One code cell, ready to run.

    Attributes:
      name: str, `NOTEBOOK.ipynb code cell N` (the code object's file name).
      code: the compiled cell, or None for a skipped cell-magic cell.
      skipped: list of (line number in the cell, text) of the IPython lines not run.
    """

    def __init__(self, name, code, skipped):
        self.name = name
        self.code = code
        self.skipped = skipped


def _code_cells(path):
    """[source text] of the notebook's code cells in order (nbformat 4, or 3's worksheets)."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NotebookError(f"{os.path.basename(path)}: not a readable Jupyter notebook "
                            f"({error})") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if cells is None and isinstance(document, dict) and document.get("worksheets"):
        cells = document["worksheets"][0].get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{os.path.basename(path)}: not a Jupyter notebook (no cells list)")
    sources = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            source = cell.get("source", cell.get("input", ""))
            sources.append("".join(source) if isinstance(source, list) else source)
    return sources


def _continues_a_statement(lines):
    """Whether the next line after `lines` (Python) is inside an open bracket, string or
    backslash continuation, where `%` and `!` are Python."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            pass
    except tokenize.TokenError:
        return True
    except (SyntaxError, ValueError):
        # Indentation or other errors are for the compiler to report, after the scan.
        return False
    return False


def _without_escapes(source):
    """(Python source, [(line number, text)] of IPython escape lines replaced by `pass`)."""
    lines = source.splitlines(keepends=True)
    kept, escapes = [], []
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if (stripped[:1] in ("!", "%") or _ASSIGNED_ESCAPE.match(line)) \
                and not _continues_a_statement(kept):
            escapes.append((number, line.strip()))
            kept.append(line[:len(line) - len(stripped)] + "pass\n")
        else:
            kept.append(line)
    return "".join(kept), escapes


def _compile_cell(source, name):
    """Compiles one cell; returns (code or None, [(line, text)] of IPython lines)."""
    if source.lstrip().startswith("%%"):
        first = source.lstrip().splitlines()[0]
        return None, [(1, f"{first} (a cell magic: the whole cell)")]
    try:
        return compile(source, name, "exec"), []
    except SyntaxError:
        python, escapes = _without_escapes(source)
        if not escapes:
            raise
    return compile(python, name, "exec"), escapes


def load(path, skip_ipython_lines):
    """Reads and compiles every code cell before any runs.

    Args:
      path: str, the .ipynb file.
      skip_ipython_lines: bool; False refuses a notebook with IPython lines.

    Returns:
      list of `Cell`, in the notebook's order.

    Raises:
      NotebookError: unreadable, a cell that is not Python, or an IPython line while
        `skip_ipython_lines` is False (the first one, named by cell and line).
    """
    cells = []
    base = os.path.basename(path)
    for index, source in enumerate(_code_cells(path), 1):
        name = f"{os.path.abspath(path)} code cell {index}"
        try:
            code, skipped = _compile_cell(source, name)
        except SyntaxError as error:
            raise NotebookError(f"{base} code cell {index}:{error.lineno}: SyntaxError: "
                                f"{error.msg}") from None
        if skipped and not skip_ipython_lines:
            line, text = skipped[0]
            raise NotebookError(
                f"{base} code cell {index}:{line}: `{text}` is an IPython shell command or "
                f"magic, not Python; run it yourself first, or pass --skip_ipython_lines "
                f"(before the notebook) to skip such lines")
        # Tracebacks show the cell's lines, as IPython's do.
        linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
        cells.append(Cell(name, code, skipped))
    return cells


def run(cells):
    """Runs the cells in order in one fresh `__main__` module (as a kernel's namespace); the
    skipped IPython lines are listed on stderr as their cell comes."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        for cell in cells:
            for line, text in cell.skipped:
                sys.stderr.write(f"bert_mgpu.compat: skipped {os.path.basename(cell.name)}:"
                                 f"{line}: {text}\n")
            if cell.code is not None:
                exec(cell.code, main.__dict__)
    finally:
        sys.modules["__main__"] = saved
