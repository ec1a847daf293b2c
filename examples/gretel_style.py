"""A gretel-synthetics 0.22 script, moved to datasynth by changing its imports only.

The original imports were:
    from gretel_synthetics.config import TensorFlowConfig
    from gretel_synthetics.train import train
    from gretel_synthetics.generate import generate_text
    from gretel_synthetics.batch import DataFrameBatch

Usage: python examples/gretel_style.py [WORK_DIR] [EPOCHS]
"""
import sys
from pathlib import Path

import pandas as pd

from datasynth.gretel.config import TensorFlowConfig
from datasynth.gretel.train import train
from datasynth.gretel.generate import generate_text
from datasynth.gretel.batch import DataFrameBatch

work = Path(sys.argv[1] if len(sys.argv) > 1 else "gretel_example")
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
source = Path(__file__).with_name("telco_churn_2k.csv")

# 1. One model over whole records, a validator on the generated lines.
config = TensorFlowConfig(
    input_data_path=str(source),
    checkpoint_dir=str(work / "checkpoints"),
    field_delimiter=",",
    overwrite=True,
    epochs=epochs,
    rnn_units=64,
    embedding_dim=32,
    gen_lines=100,
)
train(config)

header = pd.read_csv(source, nrows=0).columns


def validate_record(line):
    rec = line.split(",")
    if len(rec) != len(header):
        raise Exception(f"record has {len(rec)} fields, not {len(header)}")
    if rec[header.get_loc("churn")] not in ("Yes", "No"):
        raise Exception("churn is not Yes or No")


records = list(generate_text(config, line_validator=validate_record, num_lines=100,
                             parallelism=2, max_invalid=1000))
valid = [r for r in records if r.valid]
print(f"{len(valid)} valid lines of {len(records)}")
print(valid[0].text)
print(valid[0].values_as_list()[:5])
assert len(valid) == 100

# 2. The DataFrame batch API: column batches, seed fields, a DataFrame back.
df = pd.read_csv(source)
config_template = {
    "epochs": epochs,
    "rnn_units": 64,
    "embedding_dim": 32,
    "field_delimiter": ",",
    "overwrite": True,
    "checkpoint_dir": str(work / "batch_checkpoints"),
}
batcher = DataFrameBatch(df=df, config=config_template, batch_size=10)
batcher.create_training_data()
batcher.train_all_batches()
status = batcher.generate_all_batch_lines(num_lines=50, max_invalid=1000,
                                          seed_fields={"churn": "Yes"}, parallelism=2)
synthetic_df = batcher.batches_to_df()
print(status)
print(synthetic_df.head())
assert list(synthetic_df.columns) == list(df.columns)
assert (synthetic_df["churn"] == "Yes").all()
assert len(synthetic_df) == 50
