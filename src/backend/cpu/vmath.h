// Vectorizable elementwise math for the CPU backend.
//
// libm's expf per element is far too slow inside the LSTM cell, so these are
// branch-free polynomial forms that GCC vectorizes (AVX-512 with -march=native)
// inside `#pragma omp simd` loops:
//
//   exp(x)     = 2^n * P(r),  n = rint(x / ln 2), r = x - n ln 2 (Cody-Waite split),
//                P = Cephes expf minimax polynomial (|rel err| < 2e-7), x clamped
//                to [-87.3, 88.3] so 2^n stays a normal float;
//   sigmoid(x) = 1 / (1 + exp(-x));
//   tanh(x)    = 2 / (1 + exp(-2x)) - 1   (absolute error ~1e-7 near 0).
//
// With AVX-512, LstmCell16 runs the forward cell on 16 units with intrinsics:
// the same polynomial, vscalefps for 2^n and rcp14 + one Newton step instead
// of the division (relative error ~1e-7, i.e. within an ulp or two of the
// portable form). The portable loops remain for other widths.
#pragma once

#if defined(__AVX512F__)
// GCC 12 flags _mm512_undefined_ps() inside its own AVX-512 intrinsics as
// maybe-uninitialized (a known false positive) once they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ds::cpu {

inline float FastExp(float x) {
  // Ternaries, not std::fmin/fmax: those are libm calls unless -ffinite-math-only.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // Round to nearest by the 1.5 * 2^23 trick (std::floor does not vectorize
  // under the default -ftrapping-math).
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

// The largest of x[0..n) (-inf when n = 0 or every x is -inf; a NaN never
// wins), in 16 lanes so it vectorizes. Not an OpenMP max reduction: clang
// starts those at -FLT_MAX, not -inf, so an all -inf row would come out as
// -FLT_MAX, a value no element holds.
inline float MaxOf(const float* x, int n) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  for (float& m : lane) m = -INFINITY;
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float mx = -INFINITY;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  for (float m : lane) mx = m > mx ? m : mx;
  return mx;
}

inline float FastSigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

inline float FastTanh(float x) { return 2.0f / (1.0f + FastExp(-2.0f * x)) - 1.0f; }

// LSTM forward cell on `n` units: pre-activations z = [i f g o] blocks at
// zi, zf, zg, zo (+ bias at bi..bo), c_prev -> writes the activated gates back
// over z, c, tanh(c) and h.
inline void LstmCellPortable(int n, float* zi, float* zf, float* zg, float* zo, const float* bi,
                             const float* bf, const float* bg, const float* bo, const float* cp,
                             float* c, float* tc, float* h) {
#pragma omp simd
  for (int u = 0; u < n; ++u) {
    float i = FastSigmoid(zi[u] + bi[u]);
    float f = FastSigmoid(zf[u] + bf[u]);
    float g = FastTanh(zg[u] + bg[u]);
    float o = FastSigmoid(zo[u] + bo[u]);
    float cn = f * cp[u] + i * g;
    float t = FastTanh(cn);
    zi[u] = i;
    zf[u] = f;
    zg[u] = g;
    zo[u] = o;
    c[u] = cn;
    tc[u] = t;
    h[u] = o * t;
  }
}

#if defined(__AVX512F__)
inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3f)), _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
// 1 / d by rcp14 and one Newton step.
inline __m512 Recip16(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}
inline __m512 Sigmoid16(__m512 x) {
  return Recip16(_mm512_add_ps(_mm512_set1_ps(1.0f), Exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
inline __m512 Tanh16(__m512 x) {
  const __m512 s = Sigmoid16(_mm512_add_ps(x, x));
  return _mm512_sub_ps(_mm512_add_ps(s, s), _mm512_set1_ps(1.0f));
}
#endif

// LstmCellPortable for n % 16 == 0 with AVX-512 intrinsics when available.
inline void LstmCell(int n, float* zi, float* zf, float* zg, float* zo, const float* bi,
                     const float* bf, const float* bg, const float* bo, const float* cp, float* c,
                     float* tc, float* h) {
#if defined(__AVX512F__)
  if (n % 16 == 0) {
    for (int u = 0; u < n; u += 16) {
      const __m512 i = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(zi + u), _mm512_loadu_ps(bi + u)));
      const __m512 f = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(zf + u), _mm512_loadu_ps(bf + u)));
      const __m512 g = Tanh16(_mm512_add_ps(_mm512_loadu_ps(zg + u), _mm512_loadu_ps(bg + u)));
      const __m512 o = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(zo + u), _mm512_loadu_ps(bo + u)));
      const __m512 cn = _mm512_fmadd_ps(f, _mm512_loadu_ps(cp + u), _mm512_mul_ps(i, g));
      const __m512 t = Tanh16(cn);
      _mm512_storeu_ps(zi + u, i);
      _mm512_storeu_ps(zf + u, f);
      _mm512_storeu_ps(zg + u, g);
      _mm512_storeu_ps(zo + u, o);
      _mm512_storeu_ps(c + u, cn);
      _mm512_storeu_ps(tc + u, t);
      _mm512_storeu_ps(h + u, _mm512_mul_ps(o, t));
    }
    return;
  }
#endif
  LstmCellPortable(n, zi, zf, zg, zo, bi, bf, bg, bo, cp, c, tc, h);
}

#if defined(__AVX512F__) && defined(__AVX512BF16__)
// 16 floats rounded to bf16 (to nearest even, as ToBf16) and stored.
inline void StoreBf16x16(uint16_t* dst, __m512 v) {
  __m256bh h = _mm512_cvtneps_pbh(v);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), reinterpret_cast<__m256i&>(h));
}

// LSTM forward cell on one block of 16 units for bf16 training, reading the
// pre-activations [i f g o] x 16 from z (a cache-resident scratch row) and
// writing the activated gates to `gates`, tanh(c) to tc and h to h with
// non-temporal stores (they are read again only after the whole sequence,
// so they bypass the cache and cost no read-for-ownership), c (read by the
// next step) and h in bf16 (the next step's GEMM operand) normally; tc may be
// null (not stored: LstmBackCell16Bf16 recomputes it from c). The
// math is LstmCell's, bit for bit. gates, tc and h must be 64-byte aligned;
// the caller fences (_mm_sfence) before other threads read them.
inline void LstmCell16Stream(const float* z, const float* b, const float* cp, float* gates,
                             float* c, float* tc, float* h, uint16_t* h16) {
  const __m512 i = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(z), _mm512_loadu_ps(b)));
  const __m512 f = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(z + 16), _mm512_loadu_ps(b + 16)));
  const __m512 g = Tanh16(_mm512_add_ps(_mm512_loadu_ps(z + 32), _mm512_loadu_ps(b + 32)));
  const __m512 o = Sigmoid16(_mm512_add_ps(_mm512_loadu_ps(z + 48), _mm512_loadu_ps(b + 48)));
  const __m512 cn = _mm512_fmadd_ps(f, _mm512_loadu_ps(cp), _mm512_mul_ps(i, g));
  const __m512 t = Tanh16(cn);
  const __m512 hv = _mm512_mul_ps(o, t);
  _mm512_stream_ps(gates, i);
  _mm512_stream_ps(gates + 16, f);
  _mm512_stream_ps(gates + 32, g);
  _mm512_stream_ps(gates + 48, o);
  _mm512_storeu_ps(c, cn);
  if (tc) _mm512_stream_ps(tc, t);
  _mm512_stream_ps(h, hv);
  StoreBf16x16(h16, hv);
}

// LSTM backward cell on 16 units for bf16 training, the formulas of the
// portable loop in train_cpu.cc: gr = activated [i f g o] x 16, cp = c_{t-1},
// tc = tanh(c_t) (null: recomputed from ct = c_t as the forward cell did, the
// same bits), dha = dL/d(dropout(h_t)) before the mask m (keep flags x
// keep_scale), dhr = the recurrent dh; dc carries dL/dc from t+1 in and to t-1
// out. Writes dz = [dzi dzf dzg dzo] as bf16 (dz16) and adds it to db; dz32
// non-null (the clip path, which reads fp32 dz): also as fp32 there, and db
// may be null (not added).
inline void LstmBackCell16Bf16(const float* gr, const float* cp, const float* tc, const float* ct,
                               const float* dha, const uint8_t* mr, float keep_scale,
                               const float* dhr, float* dc, uint16_t* dz16, float* db,
                               float* dz32 = nullptr) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 m = _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mr)))),
      _mm512_set1_ps(keep_scale));
  const __m512 dh = _mm512_fmadd_ps(_mm512_loadu_ps(dha), m, _mm512_loadu_ps(dhr));
  const __m512 i = _mm512_loadu_ps(gr), f = _mm512_loadu_ps(gr + 16);
  const __m512 g = _mm512_loadu_ps(gr + 32), o = _mm512_loadu_ps(gr + 48);
  const __m512 t = tc ? _mm512_loadu_ps(tc) : Tanh16(_mm512_loadu_ps(ct));
  const __m512 c = _mm512_fmadd_ps(_mm512_mul_ps(dh, o), _mm512_fnmadd_ps(t, t, one),
                                   _mm512_loadu_ps(dc));
  const __m512 dzi = _mm512_mul_ps(_mm512_mul_ps(c, g), _mm512_mul_ps(i, _mm512_sub_ps(one, i)));
  const __m512 dzf = _mm512_mul_ps(_mm512_mul_ps(c, _mm512_loadu_ps(cp)),
                                   _mm512_mul_ps(f, _mm512_sub_ps(one, f)));
  const __m512 dzg = _mm512_mul_ps(_mm512_mul_ps(c, i), _mm512_fnmadd_ps(g, g, one));
  const __m512 dzo = _mm512_mul_ps(_mm512_mul_ps(dh, t), _mm512_mul_ps(o, _mm512_sub_ps(one, o)));
  _mm512_storeu_ps(dc, _mm512_mul_ps(c, f));
  StoreBf16x16(dz16, dzi);
  StoreBf16x16(dz16 + 16, dzf);
  StoreBf16x16(dz16 + 32, dzg);
  StoreBf16x16(dz16 + 48, dzo);
  if (dz32) {
    _mm512_storeu_ps(dz32, dzi);
    _mm512_storeu_ps(dz32 + 16, dzf);
    _mm512_storeu_ps(dz32 + 32, dzg);
    _mm512_storeu_ps(dz32 + 48, dzo);
    if (!db) return;
  }
  _mm512_storeu_ps(db, _mm512_add_ps(_mm512_loadu_ps(db), dzi));
  _mm512_storeu_ps(db + 16, _mm512_add_ps(_mm512_loadu_ps(db + 16), dzf));
  _mm512_storeu_ps(db + 32, _mm512_add_ps(_mm512_loadu_ps(db + 32), dzg));
  _mm512_storeu_ps(db + 48, _mm512_add_ps(_mm512_loadu_ps(db + 48), dzo));
}

#if defined(__AVX512BW__)
// Two rows of 64 bf16 (r0 = row 2i, r1 = row 2i + 1 of a matrix B) as one row
// pair of the blocked layout of gemm.h's VnniOffset: dst[2 c] = r0[c],
// dst[2 c + 1] = r1[c], 128 values (dst 64-byte aligned), with non-temporal
// stores (read only by a GEMM after the whole sequence; the caller fences).
inline void InterleaveBf16Pair64(const uint16_t* r0, const uint16_t* r1, uint16_t* dst) {
  alignas(64) static constexpr uint16_t kIdx[64] = {
      0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
      11, 43, 12, 44, 13, 45, 14, 46, 15, 47, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53,
      22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_load_si512(kIdx), hi = _mm512_load_si512(kIdx + 32);
  for (int h = 0; h < 2; ++h) {
    const __m512i a = _mm512_loadu_si512(r0 + 32 * h), b = _mm512_loadu_si512(r1 + 32 * h);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 64 * h), _mm512_permutex2var_epi16(a, lo, b));
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 64 * h + 32),
                        _mm512_permutex2var_epi16(a, hi, b));
  }
}
#endif
#endif

// GRU forward cell (Keras, reset_after) on `n` units. a = x Wx (no bias) in
// blocks az, ar, an; u = h_prev Wh (no bias) in uz, ur, un (all zeros at t = 0);
// bx / bh the input / recurrent biases per gate; hp = h_prev. Writes the
// activated gates z, r, n back over az, ar, an, hn = u_n + bh_n (what the
// backward needs for dr) and h = z * hp + (1 - z) * n.
inline void GruCell(int n, float* az, float* ar, float* an, const float* uz, const float* ur,
                    const float* un, const float* bxz, const float* bxr, const float* bxn,
                    const float* bhz, const float* bhr, const float* bhn, const float* hp,
                    float* hn, float* h) {
#pragma omp simd
  for (int k = 0; k < n; ++k) {
    float z = FastSigmoid(az[k] + bxz[k] + uz[k] + bhz[k]);
    float r = FastSigmoid(ar[k] + bxr[k] + ur[k] + bhr[k]);
    float hv = un[k] + bhn[k];
    float c = FastTanh(an[k] + bxn[k] + r * hv);
    az[k] = z;
    ar[k] = r;
    an[k] = c;
    hn[k] = hv;
    h[k] = z * hp[k] + (1.0f - z) * c;
  }
}

}  // namespace ds::cpu
