#include "backend/cpu/gemm.h"

#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "backend/precision.h"

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

namespace {

// Runs fn(m, n, a, b, c) (the sub-problem's rows/cols and operand pointers) on
// `threads` column (split 'n') or row ('m') blocks of C on multiples of 16, in
// one OpenMP region; serial when one block.
template <typename T, typename Fn>
void SplitRun(int threads, char split, bool trans_a, bool trans_b, int m, int n, const T* a,
              int lda, const T* b, int ldb, float* c, int ldc, Fn fn) {
  const int dim = split == 'm' ? m : n;
  const int nt = std::max(1, std::min(threads, dim / 16));
  if (nt == 1) {
    fn(m, n, a, b, c);
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
        const T* aj = trans_a ? a + lo : a + size_t(lo) * lda;
        fn(hi - lo, n, aj, b, c + size_t(lo) * ldc);
      } else {
        const T* bj = trans_b ? b + size_t(lo) * ldb : b + lo;
        fn(m, hi - lo, a, bj, c + lo);
      }
    }
  }
}

}  // namespace

void SgemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
                int ldc) {
  SplitRun(threads, split, trans_a, trans_b, m, n, a, lda, b, ldb, c, ldc,
           [&](int mm, int nn, const float* aa, const float* bb, float* cc) {
             SgemmSerial(trans_a, trans_b, mm, nn, k, alpha, aa, lda, bb, ldb, beta, cc, ldc);
           });
}

// ---- bf16 ----

namespace {

__attribute__((target("avx512f,avx512bf16"))) void ToBf16Avx512(const float* src, size_t n,
                                                                   uint16_t* dst) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<__m256i&>(h));
  }
  for (; i < n; ++i) dst[i] = ToBf16(src[i]);
}

bool HaveAvx512Bf16Cvt() {
  static const bool have = DetectCpuFeatures().avx512_bf16;
  return have;
}

dnnl::engine& CpuEngine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// One cached matmul: the primitive and its three memory objects (handles set
// per call).
struct Matmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  std::string impl;
};

using MatmulKey = std::tuple<bool, bool, int, int, int, int, int, int, float, float>;

Matmul MakeMatmul(const MatmulKey& key) {
  using dnnl::memory;
  const auto [ta, tb, m, n, k, lda, ldb, ldc, alpha, beta] = key;
  const auto bf = memory::data_type::bf16;
  memory::desc a_md({m, k}, bf, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  // ldb < 0: B in the blocked layout of BgemmSerialVnniB.
  memory::desc b_md = ldb < 0 ? memory::desc({k, n}, bf, memory::format_tag::BA16a64b2a)
                              : memory::desc({k, n}, bf, tb ? memory::dims{1, ldb}
                                                            : memory::dims{ldb, 1});
  memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, CpuEngine());
  Matmul mm{dnnl::matmul(pd), memory(a_md, CpuEngine(), DNNL_MEMORY_NONE),
            memory(b_md, CpuEngine(), DNNL_MEMORY_NONE), memory(c_md, CpuEngine(), DNNL_MEMORY_NONE),
            pd.impl_info_str()};
  return mm;
}

struct ThreadMatmuls {
  std::map<MatmulKey, Matmul> cache;
  std::unique_ptr<dnnl::stream> stream;
  std::vector<uint16_t> a16, b16;  // MixedGemmSerial's rounded operands
};

ThreadMatmuls& Local() {
  thread_local ThreadMatmuls t;
  return t;
}

// Runs f with the OpenMP thread count set to 1 (so that oneDNN runs the
// primitive on the calling thread, as SgemmSerial).
template <typename F>
void OneThread(F f) {
  const int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
  f();
  if (saved != 1) omp_set_num_threads(saved);
}

Matmul& Find(const MatmulKey& key) {
  auto& cache = Local().cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  try {
    return cache.emplace(key, MakeMatmul(key)).first->second;
  } catch (const dnnl::error& e) {
    const auto [ta, tb, m, n, k, lda, ldb, ldc, alpha, beta] = key;
    DS_THROW(kInternal, "oneDNN bf16 matmul m={} n={} k={} (ta {} tb {} lda {} ldb {} ldc {}): {}",
             m, n, k, ta, tb, lda, ldb, ldc, e.what());
  }
}

}  // namespace

void ToBf16(const float* src, size_t n, uint16_t* dst) {
  if (HaveAvx512Bf16Cvt()) {
    ToBf16Avx512(src, n, dst);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = ToBf16(src[i]);
}

namespace {

// One bf16 matmul on this thread's stream (the caller holds OneThread).
void RunBf16(Matmul& mm, const uint16_t* a, const uint16_t* b, float* c) {
  auto& local = Local();
  if (!local.stream) local.stream = std::make_unique<dnnl::stream>(CpuEngine());
  mm.a.set_data_handle(const_cast<uint16_t*>(a));
  mm.b.set_data_handle(const_cast<uint16_t*>(b));
  mm.c.set_data_handle(c);
  mm.prim.execute(*local.stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}});
  local.stream->wait();
}

}  // namespace

void BgemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a,
                 int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // oneDNN refuses empty K: C = beta C
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c[size_t(i) * ldc + j] *= beta;
    return;
  }
  OneThread([&] {
    RunBf16(Find({trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta}), a, b, c);
  });
}

void BgemmSerialVnniB(bool trans_a, int m, int n, int k, float alpha, const uint16_t* a, int lda,
                      const uint16_t* b, float beta, float* c, int ldc) {
  DS_CHECK(n % 64 == 0);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    BgemmSerial(trans_a, false, m, n, k, alpha, a, lda, b, n, beta, c, ldc);
    return;
  }
  OneThread([&] {
    RunBf16(Find({trans_a, false, m, n, k, lda, -1, ldc, alpha, beta}), a, b, c);
  });
}

bool BgemmVnniBIsBrgemm(bool trans_a, int m, int n, int k, int lda, int ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return true;
  bool brg = false;
  OneThread([&] { brg = Find({trans_a, false, m, n, k, lda, -1, ldc, 1.0f, 0.0f}).impl.rfind("brg", 0) == 0; });
  return brg;
}

void BgemmSplitVnniB(int threads, bool trans_a, int m, int n, int k, float alpha,
                     const uint16_t* a, int lda, const uint16_t* b, float beta, float* c, int ldc) {
  const int blocks = n / 64;
  const int nt = std::max(1, std::min(threads, blocks));
  const size_t kpad = VnniPadK(size_t(std::max(k, 0)));
  if (nt == 1) {
    BgemmSerialVnniB(trans_a, m, n, k, alpha, a, lda, b, beta, c, ldc);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int lo = blocks * j / nj, hi = blocks * (j + 1) / nj;
    if (hi > lo)
      BgemmSerialVnniB(trans_a, m, (hi - lo) * 64, k, alpha, a, lda, b + size_t(lo) * kpad * 64,
                       beta, c + size_t(lo) * 64, ldc);
  }
}

namespace {
struct Reorder {
  dnnl::reorder prim;
  dnnl::memory src, dst;
};
}  // namespace

void TransposeBf16(int rows, int cols, const uint16_t* src, int lds, uint16_t* dst, int ldd) {
  if (rows <= 0 || cols <= 0) return;
  using dnnl::memory;
  thread_local std::map<std::tuple<int, int, int, int>, Reorder> cache;
  OneThread([&] {
    auto& local = Local();
    if (!local.stream) local.stream = std::make_unique<dnnl::stream>(CpuEngine());
    const auto key = std::make_tuple(rows, cols, lds, ldd);
    auto it = cache.find(key);
    if (it == cache.end()) {
      try {
        const auto bf = memory::data_type::bf16;
        memory::desc s_md({rows, cols}, bf, memory::dims{lds, 1});
        memory::desc d_md({rows, cols}, bf, memory::dims{1, ldd});
        Reorder r{dnnl::reorder(), memory(s_md, CpuEngine(), DNNL_MEMORY_NONE),
                  memory(d_md, CpuEngine(), DNNL_MEMORY_NONE)};
        r.prim = dnnl::reorder(dnnl::reorder::primitive_desc(r.src, r.dst));
        it = cache.emplace(key, std::move(r)).first;
      } catch (const dnnl::error& e) {
        DS_THROW(kInternal, "oneDNN bf16 transpose {} x {}: {}", rows, cols, e.what());
      }
    }
    Reorder& r = it->second;
    r.src.set_data_handle(const_cast<uint16_t*>(src));
    r.dst.set_data_handle(dst);
    r.prim.execute(*local.stream, r.src, r.dst);
    local.stream->wait();
  });
}

void TransposeBf16Split(int threads, int rows, int cols, const uint16_t* src, int lds,
                        uint16_t* dst, int ldd) {
  const int blocks = (cols + 15) / 16;
  const int nt = std::max(1, std::min(threads, blocks));
  if (nt == 1) {
    TransposeBf16(rows, cols, src, lds, dst, ldd);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int j = omp_get_thread_num(), nj = omp_get_num_threads();
    const int lo = std::min(cols, blocks * j / nj * 16), hi = std::min(cols, blocks * (j + 1) / nj * 16);
    if (hi > lo) TransposeBf16(rows, hi - lo, src + lo, lds, dst + size_t(lo) * ldd, ldd);
  }
}

namespace {
// Rounds the stored rows x cols operand (row stride ld) into `out`, compact
// (row stride cols); returns the new stride.
int RoundCompact(const float* src, size_t rows, size_t cols, int ld, std::vector<uint16_t>* out) {
  if (out->size() < rows * cols) out->resize(rows * cols);
  if (size_t(ld) == cols) {
    ToBf16(src, rows * cols, out->data());
  } else {
    for (size_t r = 0; r < rows; ++r) ToBf16(src + r * ld, cols, out->data() + r * cols);
  }
  return int(cols);
}
}  // namespace

void MixedGemmSerial(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, const uint16_t* b16, int ldb, float beta, float* c,
                     int ldc) {
  if (m <= 0 || n <= 0) return;
  auto& local = Local();
  const int lda16 = RoundCompact(a, trans_a ? k : m, trans_a ? m : k, lda, &local.a16);
  int ldb16 = ldb;
  if (b16 == nullptr) {
    ldb16 = RoundCompact(b, trans_b ? n : k, trans_b ? k : n, ldb, &local.b16);
    b16 = local.b16.data();
  }
  BgemmSerial(trans_a, trans_b, m, n, k, alpha, local.a16.data(), lda16, b16, ldb16, beta, c, ldc);
}

void MixedGemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                    float alpha, const float* a, int lda, const float* b, const uint16_t* b16,
                    int ldb, float beta, float* c, int ldc) {
  // Split over float B; a pre-rounded B follows at the same offsets.
  SplitRun(threads, split, trans_a, trans_b, m, n, a, lda, b, ldb, c, ldc,
           [&](int mm, int nn, const float* aa, const float* bb, float* cc) {
             const uint16_t* bb16 = b16 ? b16 + (bb - b) : nullptr;
             MixedGemmSerial(trans_a, trans_b, mm, nn, k, alpha, aa, lda, bb, bb16, ldb, beta, cc,
                             ldc);
           });
}

void BgemmSplit(int threads, char split, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta,
                float* c, int ldc) {
  SplitRun(threads, split, trans_a, trans_b, m, n, a, lda, b, ldb, c, ldc,
           [&](int mm, int nn, const uint16_t* aa, const uint16_t* bb, float* cc) {
             BgemmSerial(trans_a, trans_b, mm, nn, k, alpha, aa, lda, bb, ldb, beta, cc, ldc);
           });
}

struct PackedBgemm::Impl {
  int m = -1, n = 0, k = 0, lda = 0, ldc = 0;
  float beta = 0;
  dnnl::matmul prim;
  dnnl::memory a, w, c;
  std::unique_ptr<dnnl::stream> stream;
};

PackedBgemm::PackedBgemm() : impl_(std::make_unique<Impl>()) {}
PackedBgemm::~PackedBgemm() = default;
PackedBgemm::PackedBgemm(PackedBgemm&&) noexcept = default;
PackedBgemm& PackedBgemm::operator=(PackedBgemm&&) noexcept = default;

bool PackedBgemm::Matches(int m, int n, int k, int lda, int ldc, float beta) const {
  const Impl& p = *impl_;
  return p.m == m && p.n == n && p.k == k && p.lda == lda && p.ldc == ldc && p.beta == beta;
}

void PackedBgemm::Pack(int m, int n, int k, int lda, int ldc, float beta, const uint16_t* b,
                       int ldb) {
  using dnnl::memory;
  Impl& p = *impl_;
  OneThread([&] {
    try {
      if (!Matches(m, n, k, lda, ldc, beta)) {
        const auto bf = memory::data_type::bf16;
        memory::desc a_md({m, k}, bf, memory::dims{lda, 1});
        memory::desc w_any({k, n}, bf, memory::format_tag::any);
        memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
        dnnl::primitive_attr attr;
        if (beta != 0.0f) {
          dnnl::post_ops po;
          po.append_sum(beta);
          attr.set_post_ops(po);
        }
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_any, c_md), attr, CpuEngine());
        p.prim = dnnl::matmul(pd);
        p.a = memory(a_md, CpuEngine(), DNNL_MEMORY_NONE);
        p.c = memory(c_md, CpuEngine(), DNNL_MEMORY_NONE);
        p.w = memory(pd.weights_desc(), CpuEngine());  // owns the packed copy
        if (!p.stream) p.stream = std::make_unique<dnnl::stream>(CpuEngine());
        p.m = m, p.n = n, p.k = k, p.lda = lda, p.ldc = ldc, p.beta = beta;
      }
      memory plain(memory::desc({k, n}, memory::data_type::bf16, memory::dims{ldb, 1}), CpuEngine(),
                   const_cast<uint16_t*>(b));
      dnnl::reorder(plain, p.w).execute(*p.stream, plain, p.w);
      p.stream->wait();
    } catch (const dnnl::error& e) {
      p.m = -1;
      DS_THROW(kInternal, "oneDNN packed bf16 matmul m={} n={} k={}: {}", m, n, k, e.what());
    }
  });
}

void PackedBgemm::Run(const uint16_t* a, float* c) const {
  Impl& p = *impl_;
  DS_CHECK(p.m >= 0);
  OneThread([&] {
    p.a.set_data_handle(const_cast<uint16_t*>(a));
    p.c.set_data_handle(c);
    p.prim.execute(*p.stream, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.w}, {DNNL_ARG_DST, p.c}});
    p.stream->wait();
  });
}

std::string BgemmImplName(bool trans_a, bool trans_b, int m, int n, int k) {
  const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
  std::string name;
  OneThread([&] { name = Find({trans_a, trans_b, m, n, k, lda, ldb, n, 1.0f, 0.0f}).impl; });
  return name;
}

}  // namespace ds::cpu
