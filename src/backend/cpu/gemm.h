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

}  // namespace ds::cpu
