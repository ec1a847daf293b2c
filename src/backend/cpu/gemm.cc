#include "backend/cpu/gemm.h"

#include <dnnl.h>
#include <omp.h>

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

}  // namespace ds::cpu
