"""bert_mgpu/summary.py: the block every script ends with (the scripts' own summaries are
tested through their runs: test_evaluation.py, test_scripts.py)."""

import io
import os
import time

from bert_mgpu import summary


def test_files_written_since_the_start_with_checkpoints_as_one_entry(tmp_path):
    old = tmp_path / "user_notes.txt"
    old.write_text("written before the run")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    started = time.time()
    for name in ("eval_results.txt", "model.ckpt-20.index", "model.ckpt-20.data-00000-of-00001",
                 "model.ckpt-100.index", "model.ckpt-100.data-00000-of-00001", ".hidden"):
        (tmp_path / name).write_text("x")
    (tmp_path / "best").mkdir()
    assert summary.files_written(str(tmp_path), started) == [
        "best/", "eval_results.txt", "model.ckpt-20", "model.ckpt-100"]
    assert summary.files_written(str(tmp_path / "absent"), started) == []


def test_the_block_lists_each_fact_on_its_own_labelled_line(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["/repo/run_classifier.py", "--flag"])
    stream = io.StringIO()
    summary.print_summary(
        time.time() - 75, [("result", "eval_accuracy = 0.8417 at step 868")],
        (str(tmp_path), ["eval_results.txt", "predict.txt"]), "model.ckpt-868: the latest",
        summary.command("export_saved_model.py", output_dir="out dir", export_dir="x"),
        stream=stream)
    assert stream.getvalue().splitlines() == [
        "== run_classifier.py finished in 1m15s",
        "  result:     eval_accuracy = 0.8417 at step 868",
        f"  written:    {tmp_path}/: eval_results.txt, predict.txt",
        "  checkpoint: model.ckpt-868: the latest",
        "  next:       python export_saved_model.py --output_dir='out dir' --export_dir=x"]


def test_paths_under_the_working_directory_are_shown_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert summary.shown_path(str(tmp_path / "runs" / "a")) == os.path.join("runs", "a")
    assert summary.shown_path("/elsewhere/b") == "/elsewhere/b"
    assert summary.shown_path("gs://bucket/run") == "gs://bucket/run"
