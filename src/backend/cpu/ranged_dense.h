// The logits of one id range for a group of rows, as one register-blocked
// kernel over the rows (generation's dense layer: the rows of a step that
// sample from the same column part share its range).
//
//   out_r[v] = b[v] + sum_{k < K} x_r[k] * W[k * ldw + v]    for v in [lo, hi), r < m
//
// Each element is four fp32 accumulators, chain j updated by fused
// multiply-adds over k = j, j + 4, j + 8, ... < K in order (from 0), then
// ((c0 + c1) + (c2 + c3)) + b[v]: its value depends on x_r, W and b only,
// never on m, on the other rows, on the range's other ids, or on whether the
// AVX-512 kernel or the portable one (std::fma, the same rounding) computes
// it. So a record does not depend on which other records share its steps.
// W is row-major [K, ldw] (the dense layer's Wd [H, V], ldw = V); out_r is
// written on [lo, hi) only.
#pragma once

#include <vector>

namespace ds::cpu {

// W [K, ldw] (its first V columns) in the kernel's layout: panels of 16
// columns, panel t = columns 16 t .. 16 t + 15 as [K][16] floats (contiguous,
// zero past V), so that a narrow range of one row reads K x 64 contiguous
// bytes instead of one line (and page) per k.
std::vector<float> PackRangedDense(int K, int V, const float* w, int ldw);

// out_r[v] for v in [lo, hi) from the packed weights (`packed` of
// PackRangedDense(K, V, ...); hi <= V).
void RangedDense(int m, const float* const* x, int K, const float* packed, const float* b, int lo,
                 int hi, float* const* out);

// The portable form of the same arithmetic from W as stored (the reference
// for tests; the kernel's fallback without AVX-512).
void RangedDensePortable(int m, const float* const* x, int K, const float* w, int ldw,
                         const float* b, int lo, int hi, float* const* out);

}  // namespace ds::cpu
