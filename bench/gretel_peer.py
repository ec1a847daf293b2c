#!/usr/bin/env python3
"""The gretel-synthetics peer of docs/precision.md: trains gretel-synthetics
0.22.17 (TensorFlow 2.12, one intra-op and one inter-op thread) with its char
tokenizer on the same network as datasynth's default (embedding 256, 2 x LSTM
256, dropout 0.2, batch 64, seq 100, RMSprop 0.01) and prints tokens/s as
datasynth counts them: the characters of the training records (each + 1 for
the record end) x epochs / training seconds (tokenizer and data prep excluded).

  /work/venvs/gretel/bin/python bench/gretel_peer.py RECORDS.csv [--epochs 1] [--lines N]

RECORDS.csv: CSV WITH a header (dropped: gretel trains on the lines as given).
"""
import argparse, os, sys, tempfile, time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_NUM_INTRAOP_THREADS"] = "1"
os.environ["TF_NUM_INTEROP_THREADS"] = "1"
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
from gretel_synthetics.config import TensorFlowConfig  # noqa: E402
from gretel_synthetics.tokenizers import CharTokenizerTrainer  # noqa: E402
from gretel_synthetics.train import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lines", type=int, default=0)
    a = ap.parse_args()
    with open(a.csv) as f:
        lines = f.read().splitlines()[1:]
    if a.lines:
        lines = lines[: a.lines]
    work = tempfile.mkdtemp(prefix="gretel_peer_")
    data = os.path.join(work, "data.csv")
    with open(data, "w") as f:
        f.write("\n".join(lines) + "\n")
    tokens = sum(len(l) + 1 for l in lines)
    cfg = TensorFlowConfig(input_data_path=data, checkpoint_dir=os.path.join(work, "ckpt"),
                           field_delimiter=",", overwrite=True, epochs=a.epochs, vocab_size=0,
                           batch_size=64, seq_length=100, rnn_units=256, embedding_dim=256,
                           dropout_rate=0.2, learning_rate=0.01, validation_split=False,
                           early_stopping=False, save_all_checkpoints=False)
    tok = CharTokenizerTrainer(config=cfg)
    t0 = time.time()
    c0 = time.process_time()
    train(cfg, tok)
    wall, cpu = time.time() - t0, time.process_time() - c0
    print(f"gretel-synthetics {len(lines)} records, {tokens} tokens x {a.epochs} epochs: "
          f"{tokens * a.epochs / wall:.0f} tokens/s wall ({wall:.1f} s), "
          f"{tokens * a.epochs / cpu:.0f} tokens per CPU-second ({cpu:.1f} s; includes tokenizer/data prep)")


if __name__ == "__main__":
    sys.exit(main())
