#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"

namespace ds::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n, int threads = kThreads) {
  size_t b = (n + threads - 1) / threads;
  return int(b < 65535u * 16u ? b : 65535u * 16u);  // grid-stride loops cover the rest
}

// Word (index % 4) of the Philox-4x32-10 block with counter index / 4, key
// `seed`, stream `stream`: the index-th draw of ds::Philox(seed, stream).
__device__ __forceinline__ uint32_t PhiloxDraw(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t block = index >> 2;
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32);
  uint32_t c2 = uint32_t(stream), c3 = uint32_t(stream >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0;
    uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  switch (index & 3) {
    case 0:
      return c0;
    case 1:
      return c1;
    case 2:
      return c2;
    default:
      return c3;
  }
}

// Mask factor of element (row r = t * B + b, column j) of a [T*B, W] site;
// `thr` = lround(rate * 65536), see kernels.h.
__device__ __forceinline__ float DropFactor(uint64_t seed, uint64_t site, int r, int j, int B,
                                            int W, uint32_t thr, float scale) {
  int t = r / B, b = r - t * B;
  uint64_t i = uint64_t(b) * W + j;
  uint32_t word = PhiloxDraw(seed, (site << 32) | uint32_t(t), i >> 1);
  uint32_t bits = (i & 1) ? (word >> 16) : (word & 0xFFFFu);
  return bits >= thr ? scale : 0.0f;
}

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void EmbeddingDropoutKernel(const float* __restrict__ table,
                                       const int32_t* __restrict__ tokens, int T, int B, int E,
                                       uint32_t thr, float scale, uint64_t seed, bool drop,
                                       float* __restrict__ out) {
  size_t total = size_t(T) * B * E;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    int r = int(i / E), j = int(i - size_t(r) * E);
    float v = table[size_t(tokens[r]) * E + j];
    if (drop) v *= DropFactor(seed, 0, r, j, B, E, thr, scale);
    out[i] = v;
  }
}

__global__ void DropoutKernel(const float* in, float* out, int T, int B, int W, uint32_t thr,
                              float scale, uint64_t seed, uint64_t site) {
  size_t total = size_t(T) * B * W;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    int r = int(i / W), j = int(i - size_t(r) * W);
    out[i] = in[i] * DropFactor(seed, site, r, j, B, W, thr, scale);
  }
}

__global__ void RoundToBf16Kernel(const float* __restrict__ src, size_t n,
                                  __nv_bfloat16* __restrict__ dst) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void LstmForwardKernel(float* __restrict__ z, const float* __restrict__ bias,
                                  const float* __restrict__ c_prev, float* __restrict__ c,
                                  float* __restrict__ h, int B, int H) {
  int total = B * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int b = i / H, j = i - b * H;
    float* zr = z + size_t(b) * 4 * H;
    float gi = Sigmoid(zr[j] + bias[j]);
    float gf = Sigmoid(zr[H + j] + bias[H + j]);
    float gg = tanhf(zr[2 * H + j] + bias[2 * H + j]);
    float go = Sigmoid(zr[3 * H + j] + bias[3 * H + j]);
    float cv = gf * c_prev[i] + gi * gg;
    zr[j] = gi;
    zr[H + j] = gf;
    zr[2 * H + j] = gg;
    zr[3 * H + j] = go;
    c[i] = cv;
    h[i] = go * tanhf(cv);
  }
}

__global__ void LstmBackwardKernel(const float* __restrict__ gates, const float* __restrict__ c,
                                   const float* __restrict__ c_prev, const float* __restrict__ dh,
                                   float* __restrict__ dc, float* __restrict__ dz, int B, int H) {
  int total = B * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int b = i / H, j = i - b * H;
    const float* g = gates + size_t(b) * 4 * H;
    float gi = g[j], gf = g[H + j], gg = g[2 * H + j], go = g[3 * H + j];
    float tc = tanhf(c[i]);
    float dhv = dh[i];
    float dcv = dc[i] + dhv * go * (1.0f - tc * tc);
    float* d = dz + size_t(b) * 4 * H;
    d[j] = dcv * gg * gi * (1.0f - gi);
    d[H + j] = dcv * c_prev[i] * gf * (1.0f - gf);
    d[2 * H + j] = dcv * gi * (1.0f - gg * gg);
    d[3 * H + j] = dhv * tc * go * (1.0f - go);
    dc[i] = dcv * gf;
  }
}

__global__ void GruForwardKernel(float* __restrict__ a, float* __restrict__ u,
                                 const float* __restrict__ bias, const float* __restrict__ h_prev,
                                 float* __restrict__ h, int B, int H) {
  int total = B * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int b = i / H, j = i - b * H;
    float* ar = a + size_t(b) * 3 * H;
    float* ur = u + size_t(b) * 3 * H;
    const float* bh = bias + 3 * H;
    float z = Sigmoid(ar[j] + bias[j] + ur[j] + bh[j]);
    float r = Sigmoid(ar[H + j] + bias[H + j] + ur[H + j] + bh[H + j]);
    float un = ur[2 * H + j] + bh[2 * H + j];
    float n = tanhf(ar[2 * H + j] + bias[2 * H + j] + r * un);
    ar[j] = z;
    ar[H + j] = r;
    ar[2 * H + j] = n;
    ur[2 * H + j] = un;
    h[i] = z * h_prev[i] + (1.0f - z) * n;
  }
}

__global__ void GruBackwardKernel(const float* __restrict__ gates, const float* __restrict__ u,
                                  const float* __restrict__ h_prev, const float* __restrict__ dh,
                                  float* __restrict__ carry, float* __restrict__ dzx,
                                  float* __restrict__ dzh, int B, int H) {
  int total = B * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int b = i / H, j = i - b * H;
    const float* g = gates + size_t(b) * 3 * H;
    float z = g[j], r = g[H + j], n = g[2 * H + j];
    float un = u[size_t(b) * 3 * H + 2 * H + j];
    float d = dh[i] + carry[i];
    float dn = d * (1.0f - z) * (1.0f - n * n);
    float dz = d * (h_prev[i] - n) * z * (1.0f - z);
    float dr = dn * un * r * (1.0f - r);
    carry[i] = d * z;
    float* x = dzx + size_t(b) * 3 * H;
    float* y = dzh + size_t(b) * 3 * H;
    x[j] = dz;
    x[H + j] = dr;
    x[2 * H + j] = dn;
    y[j] = dz;
    y[H + j] = dr;
    y[2 * H + j] = dn * r;
  }
}

// Reductions over one block of kThreads threads.
__device__ __forceinline__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (kThreads >> 5) ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// (value, index) max with the lowest index winning ties.
__device__ __forceinline__ void MaxPair(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__device__ __forceinline__ void BlockArgMax(float& v, int& idx, float* sv, int* si) {
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    MaxPair(v, idx, ov, oi);
  }
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < (kThreads >> 5) ? sv[lane] : -FLT_MAX;
    idx = lane < (kThreads >> 5) ? si[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, v, o);
      int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      MaxPair(v, idx, ov, oi);
    }
    if (lane == 0) {
      sv[0] = v;
      si[0] = idx;
    }
  }
  __syncthreads();
  v = sv[0];
  idx = si[0];
}

__global__ void __launch_bounds__(kThreads)
    SoftmaxXentKernel(float* __restrict__ logits, const float* __restrict__ bias,
                      const int32_t* __restrict__ targets, const float* __restrict__ weights,
                      const int32_t* __restrict__ lo, const int32_t* __restrict__ hi, int V,
                      bool want_grad, float grad_scale, float* __restrict__ row_loss,
                      float* __restrict__ row_correct) {
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  int r = blockIdx.x;
  float* l = logits + size_t(r) * V;
  const int j0 = lo ? lo[r] : 0, j1 = hi ? hi[r] : V;  // legal ids
  float m = -FLT_MAX;
  int am = INT_MAX;
  for (int j = j0 + threadIdx.x; j < j1; j += kThreads) MaxPair(m, am, l[j] + bias[j], j);
  BlockArgMax(m, am, sv, si);
  float s = 0;
  for (int j = j0 + threadIdx.x; j < j1; j += kThreads) s += expf(l[j] + bias[j] - m);
  s = BlockSum(s, sv);
  int tgt = targets[r];
  float w = weights ? weights[r] : 1.0f;
  if (threadIdx.x == 0) {
    float ce = logf(s) + m - (l[tgt] + bias[tgt]);
    row_loss[r] = w * ce;
    row_correct[r] = am == tgt ? w : 0.0f;
  }
  if (want_grad) {
    __syncthreads();  // l[tgt] was read above
    float k = grad_scale * w, inv = 1.0f / s;
    for (int j = threadIdx.x; j < V; j += kThreads) {
      if (j < j0 || j >= j1) {  // masked: -inf logit, probability 0
        l[j] = 0.0f;
        continue;
      }
      float p = expf(l[j] + bias[j] - m) * inv;
      l[j] = k * (p - (j == tgt ? 1.0f : 0.0f));
    }
  }
}

__global__ void EmbeddingBackwardKernel(const float* __restrict__ dx,
                                        const int32_t* __restrict__ uniq,
                                        const int32_t* __restrict__ offsets,
                                        const int32_t* __restrict__ positions, int T, int B, int E,
                                        uint32_t thr, float scale, uint64_t seed, bool drop,
                                        float* __restrict__ dtable) {
  int u = blockIdx.x;
  int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= E) return;
  float s = 0;
  for (int p = offsets[u]; p < offsets[u + 1]; ++p) {
    int r = positions[p];
    float v = dx[size_t(r) * E + j];
    if (drop) v *= DropFactor(seed, 0, r, j, B, E, thr, scale);
    s += v;
  }
  dtable[size_t(uniq[u]) * E + j] = s;
}

__global__ void RmspropKernel(float* __restrict__ p, const float* __restrict__ g,
                              float* __restrict__ ms, size_t n, float lr, float rho, float eps) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float gv = g[i];
    float m = rho * ms[i] + (1.0f - rho) * gv * gv;
    ms[i] = m;
    p[i] -= lr * gv / sqrtf(m + eps);
  }
}

__global__ void AdamKernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ m, float* __restrict__ v, size_t n, float lr_t,
                           float b1, float b2, float eps) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float gv = g[i];
    float mv = b1 * m[i] + (1.0f - b1) * gv;
    float vv = b2 * v[i] + (1.0f - b2) * gv * gv;
    m[i] = mv;
    v[i] = vv;
    p[i] -= lr_t * mv / (sqrtf(vv) + eps);
  }
}

__global__ void GatherRowsKernel(const float* __restrict__ src, const int32_t* __restrict__ idx,
                                 int n, int W, float* __restrict__ dst) {
  size_t total = size_t(n) * W;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    int k = int(i / W), j = int(i - size_t(k) * W);
    dst[i] = src[size_t(idx[k]) * W + j];
  }
}

__global__ void LstmInferKernel(const float* __restrict__ z, const float* __restrict__ bias,
                                const int32_t* __restrict__ slots, float* __restrict__ h_state,
                                float* __restrict__ c_state, float* __restrict__ x_out, int n,
                                int H) {
  int total = n * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int k = i / H, j = i - k * H;
    const float* zr = z + size_t(k) * 4 * H;
    float gi = Sigmoid(zr[j] + bias[j]);
    float gf = Sigmoid(zr[H + j] + bias[H + j]);
    float gg = tanhf(zr[2 * H + j] + bias[2 * H + j]);
    float go = Sigmoid(zr[3 * H + j] + bias[3 * H + j]);
    size_t s = size_t(slots[k]) * H + j;
    float cv = gf * c_state[s] + gi * gg;
    float hv = go * tanhf(cv);
    c_state[s] = cv;
    h_state[s] = hv;
    x_out[i] = hv;
  }
}

__global__ void GruInferKernel(const float* __restrict__ a, const float* __restrict__ u,
                               const float* __restrict__ bias, const int32_t* __restrict__ slots,
                               float* __restrict__ h_state, float* __restrict__ x_out, int n,
                               int H) {
  int total = n * H;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int k = i / H, j = i - k * H;
    const float* ar = a + size_t(k) * 3 * H;
    const float* ur = u + size_t(k) * 3 * H;
    const float* bh = bias + 3 * H;
    float z = Sigmoid(ar[j] + bias[j] + ur[j] + bh[j]);
    float r = Sigmoid(ar[H + j] + bias[H + j] + ur[H + j] + bh[H + j]);
    float nv = tanhf(ar[2 * H + j] + bias[2 * H + j] + r * (ur[2 * H + j] + bh[2 * H + j]));
    size_t s = size_t(slots[k]) * H + j;
    float hv = z * h_state[s] + (1.0f - z) * nv;
    h_state[s] = hv;
    x_out[i] = hv;
  }
}

__global__ void BroadcastRowKernel(const float* __restrict__ row, int n, int W,
                                   float* __restrict__ out) {
  size_t total = size_t(n) * W;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = row[i % W];
  }
}

float Scale(float rate) { return rate > 0 ? 1.0f / (1.0f - rate) : 1.0f; }
uint32_t Threshold(float rate) { return uint32_t(std::lround(double(rate) * 65536.0)); }

}  // namespace

void EmbeddingDropoutForward(const float* table, const int32_t* tokens, int T, int B, int E,
                             float rate, uint64_t seed, bool train, float* out, Stream stream) {
  size_t n = size_t(T) * B * E;
  if (n == 0) return;
  EmbeddingDropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(
      table, tokens, T, B, E, Threshold(rate), Scale(rate), seed, train && rate > 0, out);
  DS_CUDA_CHECK_LAUNCH();
}

void RoundToBf16(const float* src, size_t n, uint16_t* dst, Stream stream) {
  if (n == 0) return;
  RoundToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(src, n,
                                                        reinterpret_cast<__nv_bfloat16*>(dst));
  DS_CUDA_CHECK_LAUNCH();
}

void Dropout(const float* in, float* out, int T, int B, int W, float rate, uint64_t seed,
             uint64_t site, Stream stream) {
  size_t n = size_t(T) * B * W;
  if (n == 0) return;
  if (rate <= 0) {
    if (in != out) {
      DS_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, T, B, W, Threshold(rate), Scale(rate),
                                                    seed, site);
  DS_CUDA_CHECK_LAUNCH();
}

void LstmCellForward(float* z, const float* bias, const float* c_prev, float* c, float* h, int B,
                     int H, Stream stream) {
  if (B * H == 0) return;
  LstmForwardKernel<<<Blocks(size_t(B) * H), kThreads, 0, stream>>>(z, bias, c_prev, c, h, B, H);
  DS_CUDA_CHECK_LAUNCH();
}

void LstmCellBackward(const float* gates, const float* c, const float* c_prev, const float* dh,
                      float* dc, float* dz, int B, int H, Stream stream) {
  if (B * H == 0) return;
  LstmBackwardKernel<<<Blocks(size_t(B) * H), kThreads, 0, stream>>>(gates, c, c_prev, dh, dc, dz,
                                                                     B, H);
  DS_CUDA_CHECK_LAUNCH();
}

void GruCellForward(float* a, float* u, const float* bias, const float* h_prev, float* h, int B,
                    int H, Stream stream) {
  if (B * H == 0) return;
  GruForwardKernel<<<Blocks(size_t(B) * H), kThreads, 0, stream>>>(a, u, bias, h_prev, h, B, H);
  DS_CUDA_CHECK_LAUNCH();
}

void GruCellBackward(const float* gates, const float* u, const float* h_prev, const float* dh,
                     float* carry, float* dzx, float* dzh, int B, int H, Stream stream) {
  if (B * H == 0) return;
  GruBackwardKernel<<<Blocks(size_t(B) * H), kThreads, 0, stream>>>(gates, u, h_prev, dh, carry,
                                                                    dzx, dzh, B, H);
  DS_CUDA_CHECK_LAUNCH();
}

void GruCellInfer(const float* a, const float* u, const float* bias, const int32_t* slots,
                  float* h_state, float* x_out, int n, int H, Stream stream) {
  if (n * H == 0) return;
  GruInferKernel<<<Blocks(size_t(n) * H), kThreads, 0, stream>>>(a, u, bias, slots, h_state, x_out,
                                                                 n, H);
  DS_CUDA_CHECK_LAUNCH();
}

void SoftmaxCrossEntropy(float* logits, const float* bias, const int32_t* targets,
                         const float* weights, const int32_t* lo, const int32_t* hi, int N, int V,
                         bool want_grad, float grad_scale, float* row_loss, float* row_correct,
                         Stream stream) {
  if (N == 0) return;
  SoftmaxXentKernel<<<N, kThreads, 0, stream>>>(logits, bias, targets, weights, lo, hi, V,
                                                want_grad, grad_scale, row_loss, row_correct);
  DS_CUDA_CHECK_LAUNCH();
}

void EmbeddingBackward(const float* dx, const int32_t* uniq, const int32_t* offsets,
                       const int32_t* positions, int U, int T, int B, int E, float rate,
                       uint64_t seed, bool train, float* dtable, Stream stream) {
  if (U == 0 || E == 0) return;
  constexpr int kCols = 128;
  dim3 grid(U, (E + kCols - 1) / kCols);
  EmbeddingBackwardKernel<<<grid, kCols, 0, stream>>>(dx, uniq, offsets, positions, T, B, E,
                                                      Threshold(rate), Scale(rate), seed,
                                                      train && rate > 0, dtable);
  DS_CUDA_CHECK_LAUNCH();
}

void RmspropUpdate(float* p, const float* g, float* ms, size_t n, float lr, float rho, float eps,
                   Stream stream) {
  if (n == 0) return;
  RmspropKernel<<<Blocks(n), kThreads, 0, stream>>>(p, g, ms, n, lr, rho, eps);
  DS_CUDA_CHECK_LAUNCH();
}

void AdamUpdate(float* p, const float* g, float* m, float* v, size_t n, float lr_t, float b1,
                float b2, float eps, Stream stream) {
  if (n == 0) return;
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(p, g, m, v, n, lr_t, b1, b2, eps);
  DS_CUDA_CHECK_LAUNCH();
}

void GatherRows(const float* src, const int32_t* idx, int n, int W, float* dst, Stream stream) {
  size_t total = size_t(n) * W;
  if (total == 0) return;
  GatherRowsKernel<<<Blocks(total), kThreads, 0, stream>>>(src, idx, n, W, dst);
  DS_CUDA_CHECK_LAUNCH();
}

void LstmCellInfer(const float* z, const float* bias, const int32_t* slots, float* h_state,
                   float* c_state, float* x_out, int n, int H, Stream stream) {
  if (n * H == 0) return;
  LstmInferKernel<<<Blocks(size_t(n) * H), kThreads, 0, stream>>>(z, bias, slots, h_state, c_state,
                                                                  x_out, n, H);
  DS_CUDA_CHECK_LAUNCH();
}

void BroadcastRow(const float* row, int n, int W, float* out, Stream stream) {
  size_t total = size_t(n) * W;
  if (total == 0) return;
  BroadcastRowKernel<<<Blocks(total), kThreads, 0, stream>>>(row, n, W, out);
  DS_CUDA_CHECK_LAUNCH();
}

}  // namespace ds::cuda
