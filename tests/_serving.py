"""Loading an exported SavedModel as a server would: in a fresh process that cannot import
bert_mgpu, and with TF Serving's REST request mapping (the JSON payloads of docs/serving.md).

`run_loaded(tmp_path, saved_model, body, request)` runs `body` (Python source; `model`,
`request`, `plain` and `rest_predict` are defined, `out` is written back as JSON) in such a
process. `rest_predict(model, payload)` answers a TF Serving REST `:predict` payload the way the
model server maps it (TF Serving's "RESTful API" page): the row format `{"signature_name": ...,
"instances": [{input name: value}, ...]}` stacks each input over the instances into one batched
tensor of the signature's dtype and answers `{"predictions": [{output name: value}, ...]}`
(every output must then have the instances as its first dimension); the columnar format
`{"inputs": {input name: list}}` answers `{"outputs": {output name: list}}`.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

from _oracle import REPO

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
ENV.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")

_PREAMBLE = textwrap.dedent("""
    import importlib.abc, json, os, sys
    # Nothing of this repository may be importable: drop its paths and refuse the package.
    sys.path = [p for p in sys.path if p and not os.path.isdir(os.path.join(p, "bert_mgpu"))]
    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "bert_mgpu":
                raise ImportError("bert_mgpu must not be imported here")
    sys.meta_path.insert(0, Refuse())
    try:
        import bert_mgpu  # noqa: F401
        raise SystemExit("bert_mgpu is importable")
    except ImportError:
        pass
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    request = json.load(open(sys.argv[1]))
    model = tf.saved_model.load(request["dir"])

    def plain(outputs):
        return {k: (v.numpy().astype(str) if v.dtype == tf.string else v.numpy()).tolist()
                for k, v in outputs.items()}

    def rest_predict(model, payload):
        signature = model.signatures[payload.get("signature_name", "serving_default")]
        specs = signature.structured_input_signature[1]
        if "instances" in payload:
            rows = payload["instances"]
            columns = {name: [row[name] for row in rows] for name in specs}
        else:
            columns = payload["inputs"]
        assert sorted(columns) == sorted(specs), (sorted(columns), sorted(specs))
        outputs = plain(signature(**{name: tf.constant(value, specs[name].dtype)
                                     for name, value in columns.items()}))
        if "inputs" in payload:
            return {"outputs": outputs}
        for name, value in outputs.items():
            assert len(value) == len(rows), f"{name}: batch {len(value)} != {len(rows)} rows"
        return {"predictions": [{name: value[i] for name, value in outputs.items()}
                                for i in range(len(rows))]}
""")

_EPILOGUE = textwrap.dedent("""
    assert not any(m.startswith("bert_mgpu") for m in sys.modules)
    json.dump(out, open(sys.argv[2], "w"))
""")


def run_loaded(tmp_path, saved_model, body, request):
    """Runs `body` with the SavedModel loaded in a process without bert_mgpu; returns `out`."""
    path = tmp_path / "request.json"
    path.write_text(json.dumps(dict(request, dir=str(saved_model))))
    loader = tmp_path / "load.py"
    loader.write_text(_PREAMBLE + textwrap.dedent(body) + _EPILOGUE)
    proc = subprocess.run([sys.executable, str(loader), str(path), str(tmp_path / "o.json")],
                          cwd=str(tmp_path), env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "o.json").read_text())


def readme_rest_payloads():
    """The JSON bodies of docs/serving.md's `curl -d '...' .../v1/models/NAME:predict` examples:
    {model name: [payload, ...]}."""
    with open(os.path.join(REPO, "docs", "serving.md"), encoding="utf-8") as f:
        readme = f.read()
    payloads = {}
    for body, name in re.findall(r"curl -d '(.*?)'\s*\\?\s*http://localhost:8501/v1/models/"
                                 r"(\w+):predict", readme, flags=re.S):
        payloads.setdefault(name, []).append(json.loads(body))
    return payloads
