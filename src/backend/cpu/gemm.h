// Single-precision GEMM for the CPU backend, row-major:
//
//   C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C
//
// op(X) = X or X^T (trans = true). lda/ldb/ldc are row strides in floats of the
// matrices as stored (A is [M, K] or, transposed, [K, M]; B is [K, N] or [N, K]).
//
// Which library runs it was chosen by measurement (bench/gemm_bench.cc): Debian's
// OpenBLAS 0.3.21 misdetects recent CPUs and runs generic kernels, oneDNN's
// dnnl_sgemm dispatches AVX-512 kernels. oneDNN is the default; the environment
// variable DATASYNTH_GEMM=openblas selects OpenBLAS (when built with it).
//
// Threading: the call uses up to omp_get_max_threads() threads of the calling
// thread (oneDNN's OpenMP runtime). Inside an OpenMP parallel region the call runs
// on the calling thread only. SgemmThreads() runs one call with an explicit count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ds::cpu {

enum class GemmImpl { kOneDnn, kOpenBlas };

// The implementation chosen at first use (DATASYNTH_GEMM) or by SetGemmImpl.
GemmImpl CurrentGemmImpl();
// Forces an implementation (benchmarks, tests). kOpenBlas without OpenBLAS
// support compiled in falls back to oneDNN and returns false.
bool SetGemmImpl(GemmImpl impl);
const char* GemmImplName(GemmImpl impl);
bool HaveOpenBlas();

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

// Same on the calling thread only: for per-thread GEMMs inside our own parallel
// regions. (A team of ONE thread is not "in parallel" for OpenMP, so a plain
// Sgemm there would open a nested team of omp_get_max_threads() threads.)
void SgemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Same, with `threads` threads for this call (OpenMP nthreads ICV set around it).
void SgemmThreads(int threads, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

// Same, split by us into `threads` independent serial GEMMs over column blocks
// of C (split = 'n', boundaries on multiples of 16) or row blocks (split = 'm'),
// run in one OpenMP parallel region. No reduction, so the result does not depend
// on the thread count. For shapes where the library's own threading scales
// badly on few cores (measured in bench/gemm_bench.cc).
void SgemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
                int ldc);

// ---- bf16 operands, fp32 accumulation (precision bf16, docs/precision.md) ----
//
// bf16 values are their 16-bit patterns (the high half of the fp32 bits).
// BgemmSerial computes C = alpha op(A) op(B) + beta C from bf16 A and B (as
// stored, strides as for Sgemm) into fp32 C on the calling thread, with a
// oneDNN matmul primitive (fp32 accumulation) created once per shape, strides,
// alpha and beta and cached per thread; the result of a call depends only on
// those and the operands, never on other calls or the thread count.
//
// Rounds n floats to bf16, to nearest even (NaN stays NaN); AVX512_BF16's
// vcvtneps2bf16 where the CPU has it, the same rounding in scalar code otherwise.
void ToBf16(const float* src, size_t n, uint16_t* dst);
inline uint16_t ToBf16(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float FromBf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

void BgemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                 int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc);

// The same from fp32 A and B: both are rounded to bf16 in per-thread scratch
// first, except B when `b16` (B already rounded, same layout and ldb) is given.
void MixedGemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, const uint16_t* b16, int ldb, float beta, float* c,
                     int ldc);

// SgemmSplit's partition (column or row blocks of C, one serial call per
// thread, no reduction) over MixedGemmSerial.
void MixedGemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float* a, int lda, const float* b, const uint16_t* b16,
                    int ldb, float beta, float* c, int ldc);

// SgemmSplit's partition over BgemmSerial (operands already bf16).
void BgemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta,
                float* c, int ldc);

// B in the blocked layout oneDNN's bf16 matmul computes from without
// copying it first (format tag BA16a64b2a, the "VNNI" pairs of rows):
// [n / 64][kpad / 32][16][64][2] with kpad = k rounded up to 32, the rows
// k..kpad zero; element (r, c) at VnniOffset(r, c, kpad). n % 64 == 0. Used
// for B = dZ of the weight-gradient GEMMs, written so by the backward cells.
inline size_t VnniPadK(size_t k) { return (k + 31) & ~size_t(31); }
inline size_t VnniOffset(size_t r, size_t c, size_t kpad) {
  return ((c >> 6) * kpad + (r & ~size_t(31))) * 64 + ((r & 31) >> 1) * 128 + (c & 63) * 2 +
         (r & 1);
}
// C = alpha op(A) B + beta C, B [k, n] in that layout (BgemmSerial otherwise).
void BgemmSerialVnniB(bool trans_a, int m, int n, int k, float alpha, const uint16_t* a, int lda,
                      const uint16_t* b, float beta, float* c, int ldc);
// Whether that call runs oneDNN's brgemm kernels (else a slow reference one:
// the caller takes another layout).
bool BgemmVnniBIsBrgemm(bool trans_a, int m, int n, int k, int lda, int ldc);
// The same split into `threads` serial calls over column blocks of 64 (no
// reduction: the result does not depend on the thread count).
void BgemmSplitVnniB(int threads, bool trans_a, int m, int n, int k, float alpha,
                     const uint16_t* a, int lda, const uint16_t* b, float beta, float* c, int ldc);

// dst [cols, rows] (row stride ldd) = src [rows, cols] (row stride lds)^T,
// bf16, on the calling thread (a oneDNN reorder, cached per shape per
// thread): a GEMM's transposed operand laid out once where the GEMM would
// copy it itself.
void TransposeBf16(int rows, int cols, const uint16_t* src, int lds, uint16_t* dst, int ldd);
// The same split over column blocks of src (multiples of 16) on `threads`.
void TransposeBf16Split(int threads, int rows, int cols, const uint16_t* src, int lds,
                        uint16_t* dst, int ldd);

// C[m, n] = A[m, k] (bf16, row stride lda) x B + beta C (fp32, ldc) with B
// [k, n] packed ONCE (Pack) into the blocked layout oneDNN's matmul prefers
// for this shape, then reused by every Run: for the recurrent GEMMs, whose
// weights stay fixed over the T steps of a training step. One object per
// thread (Run executes on the calling thread).
class PackedBgemm {
 public:
  PackedBgemm();
  ~PackedBgemm();
  PackedBgemm(PackedBgemm&&) noexcept;
  PackedBgemm& operator=(PackedBgemm&&) noexcept;
  // Creates the primitive (when the shape changed) and packs b ([k, n], ldb).
  void Pack(int m, int n, int k, int lda, int ldc, float beta, const uint16_t* b, int ldb);
  bool Matches(int m, int n, int k, int lda, int ldc, float beta) const;
  void Run(const uint16_t* a, float* c) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The oneDNN implementation a bf16 call of this shape dispatches to (for
// benchmarks and reports), e.g. "brg:avx512_core_bf16".
std::string BgemmImplName(bool trans_a, bool trans_b, int m, int n, int k);

}  // namespace ds::cpu
