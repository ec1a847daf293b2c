// Small Gram matrices for the per-example clip norms (cpu_backend.h, the clip
// path): one example's T rows of a time-major buffer, T ~ 10-100, width k up
// to a few thousand.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {
namespace cpu {

// The lower triangle (s <= t) of g[t * n + s] = a_t . a_s for the n rows
// a_t = a + t * lda of width k, in fp32 (the upper triangle is left as it was).
// AVX-512: 4 x 4 blocks of rows with one accumulator per pair, k in steps of
// 16 (a masked tail), the 16 accumulators in registers and summed by one
// shuffle tree. Measured on the DP telco run (T ~ 21, k 64-512): 9.9 ms per
// 512-record step against 16.4 with an OpenBLAS ssyrk call per example (the
// first version, accumulators on the stack); bf16 (T ~ 31, k 64, 128, 512,
// 513 records, one core): 7.1 -> 4.6 ms with the accumulators in registers.
void GramLower(int n, int k, const float* a, size_t lda, float* g);
// The same on bf16 rows (the bf16 clip path's rounded copies; half the bytes):
// products of the rounded values summed in fp32 (AVX512_BF16: vdpbf16ps).
void GramLowerBf16(int n, int k, const uint16_t* a, size_t lda, float* g);

}  // namespace cpu
}  // namespace ds
