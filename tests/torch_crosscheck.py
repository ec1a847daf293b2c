#!/usr/bin/env python3
"""Reference forward/backward of the datasynth network in PyTorch (float64).

usage: torch_crosscheck.py DIR [--init SEED V E H L B T] [--out-dtype f64|f32]

DIR holds (written by tests/torch_crosscheck_test.cc), all little-endian:
  spec.txt                 "V E H L B T"
  inputs.i32, targets.i32  [B, T] token ids
  weights.f32              [B, T] per-position loss weights
  <tensor>.f32             parameters in torch layout: embedding [V, E];
                           lstm{l}.weight_ih [4H, In], lstm{l}.weight_hh [4H, H],
                           lstm{l}.bias_ih [4H] (bias_hh = 0); dense.weight [V, H],
                           dense.bias [V]
Writes logits.f64 [B, T, V], loss.f64 [1] (sum_t w_t CE_t / sum_t w_t) and
grad_<tensor>.f64 for every tensor above (same layout).
Network: nn.Embedding -> nn.LSTM (one per layer, gate order i, f, g, o) ->
nn.Linear, dropout 0.

--init first writes spec.txt, the inputs and the parameters itself (numpy,
seeded): scripts/make_golden.sh makes the committed golden directory
tests/data/golden/torch_lstm this way, with --out-dtype f32 (outputs named
*.f32) to keep it small.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


def init(d, seed, V, E, H, L, B, T):
    """Inputs and parameters for a golden case, in the layout described above."""
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    with open(os.path.join(d, "spec.txt"), "w") as f:
        f.write(f"{V} {E} {H} {L} {B} {T}\n")

    def put(name, a):
        a.tofile(os.path.join(d, name))

    def uniform(shape, limit):
        return rng.uniform(-limit, limit, size=shape).astype(np.float32)

    put("inputs.i32", rng.integers(0, V, size=(B, T), dtype=np.int32))
    put("targets.i32", rng.integers(0, V, size=(B, T), dtype=np.int32))
    w = (0.5 + rng.uniform(size=(B, T))).astype(np.float32)
    w.reshape(-1)[2::7] = 0  # some positions carry no loss
    put("weights.f32", w)
    put("embedding.f32", uniform((V, E), 0.5))
    for l in range(L):
        In = E if l == 0 else H
        put(f"lstm{l}.weight_ih.f32", uniform((4 * H, In), (6 / (In + 4 * H)) ** 0.5))
        put(f"lstm{l}.weight_hh.f32", uniform((4 * H, H), (6 / (H + 4 * H)) ** 0.5))
        put(f"lstm{l}.bias_ih.f32", uniform((4 * H,), 0.3))
    put("dense.weight.f32", uniform((V, H), (6 / (V + H)) ** 0.5))
    put("dense.bias.f32", uniform((V,), 0.2))


def main():
    args = sys.argv[1:]
    d = args.pop(0)
    out = "f64"
    while args:
        opt = args.pop(0)
        if opt == "--init":
            init(d, *(int(args.pop(0)) for _ in range(7)))
        elif opt == "--out-dtype":
            out = args.pop(0)
        else:
            sys.exit(f"torch_crosscheck.py: unknown option {opt}")
    odt = {"f64": np.float64, "f32": np.float32}[out]
    V, E, H, L, B, T = (int(x) for x in open(os.path.join(d, "spec.txt")).read().split())

    def load(name, dtype, shape):
        return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=dtype).reshape(shape))

    torch.set_num_threads(1)
    emb = nn.Embedding(V, E).double()
    lstms = [nn.LSTM(E if l == 0 else H, H, batch_first=True).double() for l in range(L)]
    dense = nn.Linear(H, V).double()
    params = {"embedding": emb.weight, "dense.weight": dense.weight, "dense.bias": dense.bias}
    with torch.no_grad():
        emb.weight.copy_(load("embedding.f32", np.float32, (V, E)))
        for l, m in enumerate(lstms):
            In = E if l == 0 else H
            m.weight_ih_l0.copy_(load(f"lstm{l}.weight_ih.f32", np.float32, (4 * H, In)))
            m.weight_hh_l0.copy_(load(f"lstm{l}.weight_hh.f32", np.float32, (4 * H, H)))
            m.bias_ih_l0.copy_(load(f"lstm{l}.bias_ih.f32", np.float32, (4 * H,)))
            m.bias_hh_l0.zero_()
            params[f"lstm{l}.weight_ih"] = m.weight_ih_l0
            params[f"lstm{l}.weight_hh"] = m.weight_hh_l0
            params[f"lstm{l}.bias_ih"] = m.bias_ih_l0
        dense.weight.copy_(load("dense.weight.f32", np.float32, (V, H)))
        dense.bias.copy_(load("dense.bias.f32", np.float32, (V,)))
    x = load("inputs.i32", np.int32, (B, T)).long()
    y = load("targets.i32", np.int32, (B, T)).long()
    w = load("weights.f32", np.float32, (B, T)).double()

    h = emb(x)
    for m in lstms:
        h, _ = m(h)
    logits = dense(h)
    ce = nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none")
    loss = (ce * w.reshape(-1)).sum() / w.sum()
    loss.backward()
    logits.detach().numpy().astype(odt).tofile(os.path.join(d, f"logits.{out}"))
    np.array([loss.item()], dtype=np.float64).tofile(os.path.join(d, "loss.f64"))
    for name, p in params.items():
        p.grad.detach().numpy().astype(odt).tofile(os.path.join(d, f"grad_{name}.{out}"))


if __name__ == "__main__":
    main()
