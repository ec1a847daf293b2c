"""The public names of gretel-synthetics 0.22's LSTM path over datasynth: a script
written for it runs after changing its imports, e.g.

    from gretel_synthetics.config import TensorFlowConfig   ->  from datasynth.gretel.config import ...
    from gretel_synthetics.train import train               ->  from datasynth.gretel.train import train
    from gretel_synthetics.generate import generate_text    ->  from datasynth.gretel.generate import ...
    from gretel_synthetics.batch import DataFrameBatch      ->  from datasynth.gretel.batch import ...
"""

from .batch import DataFrameBatch
from .config import LocalConfig, TensorFlowConfig, config_from_model_dir
from .errors import TooManyInvalidError
from .generate import gen_text, generate_text
from .tokenizers import CharTokenizerTrainer, SentencePieceTokenizerTrainer
from .train import train

__all__ = ["TensorFlowConfig", "LocalConfig", "config_from_model_dir", "train", "generate_text",
           "gen_text", "DataFrameBatch", "TooManyInvalidError", "CharTokenizerTrainer",
           "SentencePieceTokenizerTrainer"]
