"""datasynth: synthetic records from your records (Python binding of the C++ engine).

    import pandas as pd, datasynth
    model = datasynth.train(pd.read_csv("records.csv"), epochs=30)
    synthetic = model.generate(1000)            # a DataFrame, same columns and dtypes
    print(datasynth.evaluate(real, synthetic).score)
"""

import json as _json

from . import _core
from ._core import TooManyInvalidError
from .api import Model, train
from .report import Report, evaluate

__version__ = _core.__version__


def config_keys() -> list:
    """Every config key: name, type, group, default, valid range and help."""
    return _json.loads(_core.config_keys())


__all__ = ["train", "Model", "evaluate", "Report", "TooManyInvalidError", "config_keys"]
