"""Multi-task fine-tuning (run_classifier_mgpu.py with several --task_name): one encoder, one
head per task (`task_<label>/`), each global batch one task's (data/multitask.py)."""

from typing import Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_mgpu.configs import classifier as classifier_config
from bert_mgpu.data import checks
from bert_mgpu.data import features as features_lib
from bert_mgpu.data import multitask as multitask_data
from bert_mgpu.engine import evaluation
from bert_mgpu.engine.job import train_watched, with_dropout_layout
from bert_mgpu.model import modeling
from bert_mgpu.model.head_spec import head_scope
from bert_mgpu.tasks.base import (
    BertTask,
    Tensors,
)
from bert_mgpu.tasks.classifier import (
    classifier_inputs,
    classifier_task,
    evaluate_classifier,
    log_head_initialisation,
    predict_classifier,
    start_classifier_job,
)


class MultiTaskClassifier(BertTask, tf.Module):
    """Several classifier tasks on one encoder: `tasks[i]` (a `BertClassifier`, `BertRegressor`
    or `BertMultiLabelClassifier` built with `encoder=` this model's `bert` and
    `scope=head_scope(labels[i])`) owns the head `task_<label>/output_weights`,
    `task_<label>/output_bias`; the `bert/` variables exist once.

    Training batches come from one task each (data/multitask.py): the union of the tasks'
    features (`label_ids` [B, 1] and/or `label_values` [B, W], zero-padded to the widest task)
    plus `task_id` int32 [B]. The trainer asks `route(features)` (eagerly) whose batch it is and
    traces one update per task with `routes[i]`, that task's loss alone, so the other heads get
    no gradient (None, not zeros): the optimizer leaves them and their Adam slots untouched, as
    Google's AdamWeightDecay skips a variable without a gradient (a zero gradient would still
    move a head by its momentum and weight decay). Evaluation and prediction run one task at a
    time on its own records (`Trainer.evaluate(dataset, task=tasks[i])`).
    """

    def __init__(self, encoder: modeling.BertModel, tasks_by_label: Mapping[str, tf.Module]):
        super().__init__(name=None)
        self.bert = encoder
        self.labels = list(tasks_by_label)
        self.tasks = list(tasks_by_label.values())
        if any(task.bert is not encoder for task in self.tasks):
            raise ValueError("every task of a MultiTaskClassifier must share its encoder")
        self.routes = [_OneTaskOfBatch(task) for task in self.tasks]

    @staticmethod
    def head_scope(label: str) -> str:
        """The variable scope of a task's head."""
        return head_scope(label)

    def named_variables(self):
        return modeling.merge_named_variables(self.bert, *(t.classifier for t in self.tasks))

    def route(self, features: Mapping[str, tf.Tensor]) -> int:
        """The index of the task of a global batch (eager: it selects the traced update).

        Raises:
          ValueError: the batch mixes tasks (its rows were re-cut: see data/multitask.py).
        """
        ids = np.unique(features[features_lib.TASK_ID].numpy())
        if len(ids) != 1:
            raise ValueError(f"a multi-task training batch mixes tasks {ids.tolist()}: each "
                             f"batch must be one task's (a rerun with another global batch "
                             f"cannot re-cut them; rerun with the same --train_batch_size, "
                             f"--n_gpus and --num_accumulation_steps)")
        return int(ids[0])

    def eval_sums(self, features) -> Tensors:
        """Each task's `eval_sums` over its own rows of a multi-task batch (the training
        batches' layout: `task_id` [B] and the union of the label features), as `<i>/<key>`;
        a task without rows in the batch adds zeros. (The jobs evaluate each task on its own
        records: `Trainer.evaluate(dataset, task=model.tasks[i])`.)"""
        task_ids = tf.reshape(features[features_lib.TASK_ID], [-1])
        out = {}
        for i, route in enumerate(self.routes):
            rows = tf.equal(task_ids, i)
            own = {k: tf.boolean_mask(v, rows) for k, v in route.own(features).items()}
            present = tf.reduce_any(rows)
            for key, value in route.task.eval_sums(own).items():
                out[f"{i}/{key}"] = tf.where(present, value, tf.zeros_like(value))
        return out

    def eval_metrics(self, sums) -> Dict[str, float]:
        """Each task's results (its `eval_metrics` of its summed `eval_sums`) as
        `<label>/<key>`, for the tasks that had rows."""
        result = {}
        for i, (label, task) in enumerate(zip(self.labels, self.tasks)):
            own = {key[len(f"{i}/"):]: value for key, value in sums.items()
                   if key.startswith(f"{i}/")}
            if float(own["num_examples"]):
                result.update({f"{label}/{k}": v for k, v in task.eval_metrics(own).items()})
        return result

    def predict(self, features) -> Tensors:
        """Every task's `predict` outputs for every row, as `<label>/<name>`."""
        return {f"{label}/{name}": value
                for label, route in zip(self.labels, self.routes)
                for name, value in route.task.predict(route.own(features)).items()}


class _OneTaskOfBatch:
    """A task's training contract (`context`, `tower_loss`, `metrics`) on multi-task batches:
    the task sees the inputs and its own label feature, cut to its width."""

    def __init__(self, task):
        self.task = task
        self.label_feature, self.width = task.task_type.label_feature, task.label_width

    def own(self, features) -> Tensors:
        """The task's features of a multi-task batch: the inputs, and its label feature cut
        to its width when the batch has labels."""
        own = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
        if self.label_feature in features:
            own[self.label_feature] = features[self.label_feature][:, :self.width]
        return own

    def context(self, features) -> Tensors:
        return self.task.context(self.own(features))

    def tower_loss(self, features, context, training=True) -> Dict:
        return self.task.tower_loss(self.own(features), context, training)

    def metrics(self, sums, context) -> Tensors:
        return self.task.metrics(sums, context)


def _sampling(cfg, labels: Sequence[str], num_train: Sequence[int], train_cfg) -> list:
    """--task_sampling's probability of each task's batches, logged with the training plan."""
    probabilities = multitask_data.sampling_probabilities(num_train, cfg.task_sampling)
    logging.info("***** Running multi-task training: %d examples, %g epochs, %d steps, "
                 "--task_sampling=%s *****", sum(num_train), cfg.num_train_epochs,
                 train_cfg.num_train_steps, cfg.task_sampling)
    for label, n, p in zip(labels, num_train, probabilities):
        logging.info("  task %s: %d examples, drawn for %.1f%% of the batches", label, n, 100 * p)
    return probabilities


def run_multitask_classifier(cfg) -> dict:
    """Runs run_classifier_mgpu.py with a `ClassifierConfig` of several --task_name on one
    encoder: one head per task (`task_<label>/`), each global batch one task's, drawn by
    --task_sampling (data/multitask.py); each task evaluated and predicted in
    OUTPUT_DIR/<label>/, the mean of the tasks' --best_metric for the best checkpoint;
    OUTPUT_DIR/eval_results.txt holds every task's results as `<label>/<key>`."""
    job = start_classifier_job(cfg)
    task_cfgs = cfg.task_configs()
    labels = classifier_config.task_labels([t.task_name for t in task_cfgs])
    mean_metric = multitask_mean_metric([t.best_metric for t in task_cfgs])
    tokenizer = checks.tokenizer_for(cfg.model)
    inputs = [classifier_inputs(t, tokenizer) for t in task_cfgs]  # (labels, data, splits)
    num_train = [splits["train"][1] if cfg.do_train else 0 for _, _, splits in inputs]
    train_cfg = with_dropout_layout(
        cfg, cfg.train_config(sum(num_train), job.num_workers),
        [splits["train"][0] for _, _, splits in inputs] if cfg.do_train else [])
    probabilities = _sampling(cfg, labels, num_train, train_cfg) if cfg.do_train else None
    job.save_effective_config(tasks=[
        {"label": label, "task_name": t.task_name, "data_dir": t.data_dir,
         "task_type": t.task_type, "labels": task_labels, "best_metric": t.best_metric}
        for label, t, (task_labels, _, _) in zip(labels, task_cfgs, inputs)],
        best_metric=mean_metric)
    encoder = modeling.BertModel(job.bert_config, compute_dtype=job.compute_dtype())
    model = MultiTaskClassifier(encoder, {
        label: classifier_task(t, job, task_labels, encoder,
                               MultiTaskClassifier.head_scope(label))
        for label, t, (task_labels, _, _) in zip(labels, task_cfgs, inputs)})
    log_head_initialisation(cfg, model)
    trainer = job.trainer(model, train_cfg, job.layerwise_lr_multipliers(model))
    watch = train_watched(
        job, trainer, lambda: multitask_data.training_dataset(
            [(splits["train"][0], data.shapes) for _, data, splits in inputs],
            train_cfg.global_batch_size, train_cfg.random_seed, probabilities,
            num_shards=job.num_workers,
            shard_index=job.cluster.task_index if job.cluster is not None else 0),
        lambda: evaluate_multitask(trainer, model, task_cfgs, inputs, mean_metric, False),
        best_metric=mean_metric)
    result = {}
    if job.chief and cfg.do_eval:
        result = watch.check(
            evaluate_multitask(trainer, model, task_cfgs, inputs, mean_metric, True))
        job.write_eval_results(result)
    if job.chief and cfg.do_predict:
        job.weights_for_prediction(trainer, job.cfg.keep_best_checkpoint)
        for t, task, (_, data, splits) in zip(task_cfgs, model.tasks, inputs):
            predict_classifier(t, trainer, data, *splits["test"], task=task)
    job.print_summary(mean_metric, result, job.export_command())
    return result


def multitask_mean_metric(metrics: Sequence[str]) -> str:
    """The name of the scalar that picks the best checkpoint of a multi-task run, the mean over
    the tasks of each one's --best_metric: `mean_<metric>` when every task uses the same one,
    else `mean_best_metric` (scores) or `mean_best_loss` (losses).

    Raises:
      ValueError: the metrics do not improve in one direction (losses and scores mixed).
    """
    lower = {evaluation.lower_is_better(m) for m in metrics}
    if len(lower) > 1:
        raise ValueError(f"--best_metric={','.join(metrics)}: the mean of losses (lower is "
                         f"better) and scores (higher is better) means nothing; choose metrics "
                         f"that improve in one direction")
    if len(set(metrics)) == 1:
        return f"mean_{metrics[0]}"
    return "mean_best_loss" if lower == {True} else "mean_best_metric"



def evaluate_multitask(trainer, model: MultiTaskClassifier, task_cfgs, inputs,
                       mean_metric: str, write: bool = False) -> dict:
    """The dev sets of a multi-task run: each task's results (`evaluate_classifier` of that
    task with the trainer's weights) as `<label>/<key>`, plus `mean_metric`, the mean over the
    tasks of their --best_metric; with `write`, each task's also to
    OUTPUT_DIR/<label>/eval_results.txt.

    Raises:
      ValueError: a task's --best_metric is not among its results, naming both.
    """
    result, best = {}, []
    for label, t, task, (_, data, splits) in zip(model.labels, task_cfgs, model.tasks, inputs):
        task_result = evaluate_classifier(t, trainer, data, *splits["dev"], write=write,
                                          task=task)
        if t.best_metric not in task_result:
            raise ValueError(f"--best_metric={t.best_metric} is not an evaluation result of "
                             f"task {label}; choose one of {', '.join(sorted(task_result))}")
        best.append(float(task_result[t.best_metric]))
        result.update({f"{label}/{k}": v for k, v in task_result.items()
                       if k != "global_step"})
    result[mean_metric] = float(np.mean(best))
    result["global_step"] = int(trainer.global_step.numpy())
    return result
