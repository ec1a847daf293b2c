"""gretel_synthetics.config: TensorFlowConfig (LocalConfig) with the reference's keys."""

from __future__ import annotations

import json
import os

from .. import _core

_KEYS = {k["name"]: k for k in json.loads(_core.config_keys())}
# The reference's keys datasynth has no key of its own for.
_EXTRA = ("epoch_callback",)


class TensorFlowConfig:
    """The reference's training/generation config: input_data_path, checkpoint_dir
    and every config key (epochs, batch_size, field_delimiter, gen_lines, ...), with
    the library's defaults; values are checked by the library's key table when the
    config is made (ValueError naming the key), an unknown key is a TypeError."""

    def __init__(self, input_data_path=None, checkpoint_dir=None, **kwargs):
        for k in kwargs:
            if k not in _KEYS and k not in _EXTRA:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword "
                                f"argument '{k}'")
        if checkpoint_dir is None:
            raise TypeError("checkpoint_dir is required")
        self.input_data_path = os.fspath(input_data_path) if input_data_path is not None else None
        self.checkpoint_dir = os.fspath(checkpoint_dir)
        self.epoch_callback = kwargs.pop("epoch_callback", None)
        self._explicit = {k: v for k, v in kwargs.items() if v is not None}
        for name, key in _KEYS.items():
            setattr(self, name, kwargs.get(name, key["default"]))
        _core.validate_config(json.dumps(self._library_keys()))

    def _library_keys(self) -> dict:
        """The keys given (or changed since), for the library."""
        out = {}
        for name, key in _KEYS.items():
            v = getattr(self, name)
            if name in self._explicit or v != key["default"]:
                if v is not None:
                    out[name] = v.item() if hasattr(v, "item") else v
        return out

    def as_dict(self) -> dict:
        d = {name: getattr(self, name) for name in _KEYS}
        d.update(input_data_path=self.input_data_path, checkpoint_dir=self.checkpoint_dir)
        return d

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(input_data_path={self.input_data_path!r}, "
                f"checkpoint_dir={self.checkpoint_dir!r}, {self._library_keys()})")


LocalConfig = TensorFlowConfig


def config_from_model_dir(model_dir) -> TensorFlowConfig:
    """The config a model was trained with (its model_params.json)."""
    info = json.loads(_core.model_info(os.fspath(model_dir)))
    cfg = {k: v for k, v in info["config"].items() if k in _KEYS}
    return TensorFlowConfig(input_data_path=info["meta"].get("input_path"),
                            checkpoint_dir=os.fspath(model_dir), **cfg)
