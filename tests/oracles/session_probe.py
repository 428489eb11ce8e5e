"""A probe on a user's TF1 training session, to compare a file (or notebook) run through the
runner with the same file run with Google's modules (tests/test_compat_users.py). It runs in the
project's venv (`ours`: `bert_mgpu.compat.runner`, as `python -m bert_mgpu.compat`) or in the
oracle venv (`google`: google_user_file.py) and changes nothing in the file; it only watches:

* after the file's first `tf.train.Saver.restore`, the trainable variables the restored
  checkpoint does not hold (the file's own head, drawn by its unseeded initializers) are written
  to HEAD.npz when it does not exist, and assigned from it when it does: the second run starts
  from the first run's head;
* each `Session.run` that runs the train op of `optimization.create_optimizer` records the float
  values it fetched (the file's own loss, accuracy, ... before that update);
* when the file ends, every global variable of its default session (an `InteractiveSession`, or
  a `with Session() as sess:` still open) and the recorded updates are written to OUT.npz
  ('/' in names as '|'; `probe|updates`: one row per update).

In `google` mode the learning rate of each update is evaluated first and fed to it, as in
google_optimizer.py: Google's create_optimizer groups the update with `global_step += 1` in no
order, so whether update t reads the rate of step t or t + 1 is the executor's choice; its
comments (and the runner) use step t.

Usage:
  python session_probe.py HEAD.npz OUT.npz ours [--skip_ipython_lines] FILE [ARGS...]
  python session_probe.py HEAD.npz OUT.npz google GOOGLE_DIR FILE [ARGS...]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    if isinstance(value, dict):
        return [x for item in value.values() for x in _flat(item)]
    return [value]


def _watch_restore(tf1, np, head_path):
    """Saves or assigns the file's head after its first `Saver.restore`."""
    original = tf1.train.Saver.restore
    done = []

    def restore(self, sess, save_path):
        original(self, sess, save_path)
        if done:
            return
        done.append(save_path)
        in_checkpoint = {name for name, _ in tf1.train.list_variables(save_path)}
        head = {v.op.name.replace("/", "|"): v for v in tf1.trainable_variables()
                if v.op.name not in in_checkpoint}
        if os.path.exists(head_path):
            values = dict(np.load(head_path))
            assert set(values) == set(head), (sorted(values), sorted(head))
            for key, variable in head.items():
                variable.load(values[key], sess)
        else:
            np.savez(head_path, **{key: sess.run(v) for key, v in head.items()})

    tf1.train.Saver.restore = restore


def _watch_updates(tf1, np, optimization, pin_learning_rate):
    """Records each update's fetched floats; returns the list it fills."""
    train_ops, rates, updates = [], [], []
    create = optimization.create_optimizer
    adam_init = optimization.AdamWeightDecayOptimizer.__init__

    def create_optimizer(*args, **kwargs):
        train_ops.append(create(*args, **kwargs))
        return train_ops[-1]

    def recording_init(self, learning_rate, *args, **kwargs):
        rates.append(learning_rate)
        adam_init(self, learning_rate, *args, **kwargs)

    optimization.create_optimizer = create_optimizer
    optimization.AdamWeightDecayOptimizer.__init__ = recording_init
    for cls in (tf1.Session, tf1.InteractiveSession):
        def run(self, fetches, feed_dict=None, *args, _original=cls.run, **kwargs):
            if not train_ops or not any(f is train_ops[-1] for f in _flat(fetches)):
                return _original(self, fetches, feed_dict, *args, **kwargs)
            if pin_learning_rate:
                feed_dict = dict(feed_dict or {})
                feed_dict[rates[-1]] = _original(self, rates[-1], feed_dict)
            result = _original(self, fetches, feed_dict, *args, **kwargs)
            updates.append([float(x) for x in _flat(result)
                            if isinstance(x, (float, np.floating))])
            return result

        cls.run = run
    return updates


def _dump(tf1, np, updates, out_path):
    sess = tf1.get_default_session()
    assert sess is not None, "the file left no default session to read"
    values = {v.op.name.replace("/", "|"): sess.run(v) for v in tf1.global_variables()}
    np.savez(out_path, **values, **{"probe|updates": np.array(updates, np.float64)})


def main(head_path, out_path, who, rest):
    if who == "google":
        import google_user_file

        google_user_file.prepare(rest[0], rest[1], rest[2:])
        sys.path.remove(HERE)
        import numpy as np
        from bert import optimization

        tf1 = google_user_file.tf1
        updates = _watch_updates(tf1, np, optimization, pin_learning_rate=True)
        _watch_restore(tf1, np, head_path)
        google_user_file.run(rest[1])
        code = 0
    else:
        sys.path.remove(HERE)
        import numpy as np
        import tensorflow as tf

        from bert_mgpu.compat import optimization, runner

        tf1 = tf.compat.v1
        updates = _watch_updates(tf1, np, optimization, pin_learning_rate=False)
        _watch_restore(tf1, np, head_path)
        code = runner.main(["bert_mgpu.compat"] + rest)
    if code == 0:
        _dump(tf1, np, updates, out_path)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
