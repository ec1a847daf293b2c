"""gretel_synthetics.train: train(config) on config.input_data_path."""

from __future__ import annotations

from .. import api


def _epoch_state(cb):
    if cb is None:
        return None

    class EpochState:
        def __init__(self, e):
            self.epoch = e["epoch"] - 1  # the reference counts from 0
            self.loss, self.accuracy = e["loss"], e["accuracy"]
            self.val_loss, self.val_accuracy = e.get("val_loss"), e.get("val_accuracy")
            self.epsilon, self.delta = e.get("epsilon"), e.get("delta")

    return lambda e: cb(EpochState(e))


def train(store, tokenizer_trainer=None):
    """Trains into store.checkpoint_dir (the reference's train(config))."""
    if store.input_data_path is None:
        raise ValueError("input_data_path is required to train")
    keys = store._library_keys()
    if tokenizer_trainer is not None:
        keys.update(tokenizer_trainer.library_keys())
    # The reference's rule: without a field_delimiter the input is text lines (also a
    # .csv, whose header line is then a record), not a table as the CLI would guess.
    keys["field_delimiter"] = store.field_delimiter or ""
    return api.train(store.input_data_path, store.checkpoint_dir,
                     epoch_callback=_epoch_state(store.epoch_callback), **keys)


train_rnn = train
