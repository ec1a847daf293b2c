#include "backend/cpu/gemm.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "util/status.h"

#ifdef DS_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace ds::cpu {
namespace {

GemmImpl FromEnv() {
  const char* e = std::getenv("DATASYNTH_GEMM");
  if (e && std::strcmp(e, "openblas") == 0 && HaveOpenBlas()) return GemmImpl::kOpenBlas;
  return GemmImpl::kOneDnn;
}

std::atomic<int>& ImplSlot() {
  static std::atomic<int> slot{int(FromEnv())};
  return slot;
}

}  // namespace

bool HaveOpenBlas() {
#ifdef DS_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

GemmImpl CurrentGemmImpl() { return GemmImpl(ImplSlot().load(std::memory_order_relaxed)); }

bool SetGemmImpl(GemmImpl impl) {
  if (impl == GemmImpl::kOpenBlas && !HaveOpenBlas()) {
    ImplSlot().store(int(GemmImpl::kOneDnn));
    return false;
  }
  ImplSlot().store(int(impl));
  return true;
}

const char* GemmImplName(GemmImpl impl) {
  return impl == GemmImpl::kOpenBlas ? "openblas" : "onednn";
}

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
#ifdef DS_HAVE_OPENBLAS
  if (CurrentGemmImpl() == GemmImpl::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                ldb, beta, c, ldc);
  if (st != dnnl_success) {
    DS_THROW(kInternal, "dnnl_sgemm failed ({}) for m={} n={} k={}", int(st), m, n, k);
  }
}

void SgemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
#ifdef DS_HAVE_OPENBLAS
  if (CurrentGemmImpl() == GemmImpl::kOpenBlas) openblas_set_num_threads(1);
#endif
  Sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (saved != 1) omp_set_num_threads(saved);
}

void SgemmThreads(int threads, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
#ifdef DS_HAVE_OPENBLAS
  if (CurrentGemmImpl() == GemmImpl::kOpenBlas) openblas_set_num_threads(threads);
#endif
  Sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  omp_set_num_threads(saved);
}

void SgemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
                int ldc) {
  const int dim = split == 'm' ? m : n;
  const int nt = std::max(1, std::min(threads, dim / 16));
  if (nt == 1) {
    SgemmSerial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int blocks = (dim + 15) / 16;
    const int lo = std::min(dim, blocks * j / nj * 16),
              hi = std::min(dim, blocks * (j + 1) / nj * 16);
    if (hi > lo) {
      if (split == 'm') {
        const float* aj = trans_a ? a + lo : a + size_t(lo) * lda;
        SgemmSerial(trans_a, trans_b, hi - lo, n, k, alpha, aj, lda, b, ldb, beta,
                    c + size_t(lo) * ldc, ldc);
      } else {
        const float* bj = trans_b ? b + size_t(lo) * ldb : b + lo;
        SgemmSerial(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, bj, ldb, beta, c + lo, ldc);
      }
    }
  }
}

}  // namespace ds::cpu
