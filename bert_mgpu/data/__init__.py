"""Data: TFRecord feature specs, pretraining-data creation, task processors, input pipelines."""
