#!/usr/bin/env python3
"""Reference forward/backward of the datasynth network in PyTorch (float64).

usage: torch_crosscheck.py DIR

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
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


def main():
    d = sys.argv[1]
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
    logits.detach().numpy().astype(np.float64).tofile(os.path.join(d, "logits.f64"))
    np.array([loss.item()], dtype=np.float64).tofile(os.path.join(d, "loss.f64"))
    for name, p in params.items():
        p.grad.detach().numpy().astype(np.float64).tofile(os.path.join(d, f"grad_{name}.f64"))


if __name__ == "__main__":
    main()
