// numgate-train — the reference path's ops and the shared glue (reference_ops.cuh says
// what each computes). Written to be obvious: one thread per element, or one block per
// row with a shared-memory tree reduction; FP32 inside; explicit bf16 roundings where the
// eager code materializes a bf16 tensor; no FMA contraction (__fmul_rn / __fadd_rn).
#include "reference_ops.cuh"

#include <cmath>
#include <stdexcept>
#include <string>

#include "dropout_add/dropout_stream.h"

namespace numgate::train {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 b(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float rb(float v) { return f(b(v)); }  // round to bf16 and back

int blocks_for(std::int64_t n) {
  const std::int64_t g = (n + kThreads - 1) / kThreads;
  return static_cast<int>(g < 65535 * 32 ? (g < 1 ? 1 : g) : 65535 * 32);
}
#define GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Block-wide sum of one float per thread (kThreads threads), a fixed tree; every thread
// gets the total.
__device__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] = __fadd_rn(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  const float t = sh[0];
  __syncthreads();
  return t;
}
__device__ float block_max(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  const float t = sh[0];
  __syncthreads();
  return t;
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("numgate-train reference op: ") + what);
}

// ---- RMSNorm ----
__global__ void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, std::int64_t hidden, float eps) {
  __shared__ float sh[kThreads];
  const bf16* xr = x + blockIdx.x * hidden;
  float ss = 0;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) ss = __fadd_rn(ss, __fmul_rn(f(xr[i]), f(xr[i])));
  const float ms = __fdiv_rn(block_sum(ss, sh), static_cast<float>(hidden));
  const float r = rsqrtf(__fadd_rn(ms, eps));
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads)
    y[blockIdx.x * hidden + i] = b(__fmul_rn(f(w[i]), rb(__fmul_rn(f(xr[i]), r))));
}
__global__ void rmsnorm_bwd_dx(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* rstd,
                               std::int64_t hidden, float eps) {
  __shared__ float sh[kThreads];
  const std::int64_t o = blockIdx.x * hidden;
  float ss = 0, gx = 0;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    const float xi = f(x[o + i]);
    ss = __fadd_rn(ss, __fmul_rn(xi, xi));
    gx = __fadd_rn(gx, __fmul_rn(rb(__fmul_rn(f(dy[o + i]), f(w[i]))), xi));
  }
  const float ms = __fdiv_rn(block_sum(ss, sh), static_cast<float>(hidden));
  const float mgx = __fdiv_rn(block_sum(gx, sh), static_cast<float>(hidden));
  const float r = rsqrtf(__fadd_rn(ms, eps));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    const float g = rb(__fmul_rn(f(dy[o + i]), f(w[i])));
    const float xi = f(x[o + i]);
    dx[o + i] = b(__fmul_rn(r, __fsub_rn(g, __fmul_rn(__fmul_rn(xi, __fmul_rn(r, r)), mgx))));
  }
}
__global__ void rmsnorm_bwd_dw(const bf16* x, const bf16* dy, const float* rstd, bf16* dw, std::int64_t rows,
                               std::int64_t hidden) {
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (j >= hidden) return;
  float acc = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    acc = __fadd_rn(acc, __fmul_rn(f(dy[r * hidden + j]), rb(__fmul_rn(f(x[r * hidden + j]), rstd[r]))));
  dw[j] = b(acc);
}

// ---- RoPE (rotate-half) ----
__global__ void rope_kernel(const bf16* x, bf16* out, const std::int64_t* pos, std::int64_t tokens, int heads,
                            int d, float theta, bool backward) {
  const int half = d / 2;
  GRID_STRIDE(idx, tokens * heads * half) {
    const int fq = static_cast<int>(idx % half);
    const std::int64_t th = idx / half;  // token * heads + head
    const std::int64_t t = th / heads;
    // inv_freq = 1 / theta^(2f/d), FP32 (torch: 1.0 / (base ** (arange(0, d, 2).float() / d)))
    const float inv_freq = __fdiv_rn(1.0f, powf(theta, __fdiv_rn(static_cast<float>(2 * fq), static_cast<float>(d))));
    const float ang = __fmul_rn(static_cast<float>(pos[t]), inv_freq);
    const float c = rb(cosf(ang)), s = rb(sinf(ang));
    const bf16* xi = x + th * d;
    const float x1 = f(xi[fq]), x2 = f(xi[fq + half]);
    float o1, o2;
    if (!backward) {  // out = x*cos + rotate_half(x)*sin, rotate_half(x) = (-x2, x1)
      o1 = __fsub_rn(rb(__fmul_rn(x1, c)), rb(__fmul_rn(x2, s)));
      o2 = __fadd_rn(rb(__fmul_rn(x2, c)), rb(__fmul_rn(x1, s)));
    } else {          // dx1 = dy1 c + dy2 s, dx2 = dy2 c - dy1 s
      o1 = __fadd_rn(rb(__fmul_rn(x1, c)), rb(__fmul_rn(x2, s)));
      o2 = __fsub_rn(rb(__fmul_rn(x2, c)), rb(__fmul_rn(x1, s)));
    }
    out[th * d + fq] = b(o1);
    out[th * d + fq + half] = b(o2);
  }
}

// ---- causal softmax ----
__global__ void softmax_fwd(const bf16* x, bf16* y, int seq, float scale) {
  __shared__ float sh[kThreads];
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(seq);
  const int q = static_cast<int>(blockIdx.x % seq);
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= q; j += kThreads) m = fmaxf(m, rb(__fmul_rn(f(x[o + j]), scale)));
  m = block_max(m, sh);
  float sum = 0;
  for (int j = threadIdx.x; j <= q; j += kThreads) sum = __fadd_rn(sum, expf(__fsub_rn(rb(__fmul_rn(f(x[o + j]), scale)), m)));
  sum = block_sum(sum, sh);
  for (int j = threadIdx.x; j < seq; j += kThreads)
    y[o + j] = j <= q ? b(__fdiv_rn(expf(__fsub_rn(rb(__fmul_rn(f(x[o + j]), scale)), m)), sum)) : b(0.0f);
}
__global__ void softmax_bwd(const bf16* y, const bf16* dy, bf16* dx, int seq, float scale) {
  __shared__ float sh[kThreads];
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(seq);
  float dot = 0;
  for (int j = threadIdx.x; j < seq; j += kThreads) dot = __fadd_rn(dot, __fmul_rn(f(dy[o + j]), f(y[o + j])));
  dot = block_sum(dot, sh);
  for (int j = threadIdx.x; j < seq; j += kThreads)
    dx[o + j] = b(__fmul_rn(rb(__fmul_rn(f(y[o + j]), __fsub_rn(f(dy[o + j]), dot))), scale));
}

// ---- SwiGLU ----
__device__ __forceinline__ float sigmoid(float a) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a))); }
__global__ void swiglu_fwd(const bf16* g, const bf16* u, bf16* y, std::int64_t n) {
  GRID_STRIDE(i, n) {
    const float a = f(g[i]);
    y[i] = b(__fmul_rn(rb(__fmul_rn(a, sigmoid(a))), f(u[i])));
  }
}
__global__ void swiglu_bwd(const bf16* g, const bf16* u, const bf16* dy, bf16* dg, bf16* du, std::int64_t n) {
  GRID_STRIDE(i, n) {
    const float a = f(g[i]), sg = sigmoid(a);
    const float ds = rb(__fmul_rn(f(dy[i]), f(u[i])));
    du[i] = b(__fmul_rn(f(dy[i]), rb(__fmul_rn(a, sg))));
    // silu'(a) = s (1 + a (1 - s))
    dg[i] = b(__fmul_rn(ds, __fmul_rn(sg, __fadd_rn(1.0f, __fmul_rn(a, __fsub_rn(1.0f, sg))))));
  }
}

// ---- cross-entropy (FP32 logits) ----
__global__ void ce_rows(const float* z, const std::int64_t* tgt, float* row_loss, float* row_lse, std::int64_t vocab) {
  __shared__ float sh[kThreads];
  const std::int64_t o = blockIdx.x * vocab;
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < vocab; j += kThreads) m = fmaxf(m, z[o + j]);
  m = block_max(m, sh);
  float sum = 0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += kThreads) sum = __fadd_rn(sum, expf(__fsub_rn(z[o + j], m)));
  sum = block_sum(sum, sh);
  if (threadIdx.x == 0) {
    const float lse = __fadd_rn(m, logf(sum));
    const std::int64_t y = tgt[blockIdx.x];
    row_lse[blockIdx.x] = lse;
    row_loss[blockIdx.x] = y == -100 ? 0.0f : __fsub_rn(lse, z[o + y]);
  }
}
// One block: loss = sum(row_loss) / n_valid, rows in a fixed tree; n_valid is an integer count.
__global__ void ce_mean(const float* row_loss, const std::int64_t* tgt, std::int64_t tokens, float* loss,
                        float* inv_n) {
  __shared__ float sh[kThreads];
  float s = 0, c = 0;
  for (std::int64_t t = threadIdx.x; t < tokens; t += kThreads) {
    s = __fadd_rn(s, row_loss[t]);
    c = __fadd_rn(c, tgt[t] == -100 ? 0.0f : 1.0f);  // exact: counts < 2^24
  }
  s = block_sum(s, sh);
  c = block_sum(c, sh);
  if (threadIdx.x == 0) {
    loss[0] = c > 0 ? __fdiv_rn(s, c) : 0.0f;
    inv_n[0] = c > 0 ? __fdiv_rn(1.0f, c) : 0.0f;
  }
}
__global__ void ce_grad(const float* z, const std::int64_t* tgt, const float* row_lse, const float* inv_n,
                        float* dz, std::int64_t tokens, std::int64_t vocab) {
  GRID_STRIDE(i, tokens * vocab) {
    const std::int64_t t = i / vocab, j = i % vocab;
    const std::int64_t y = tgt[t];
    dz[i] = y == -100 ? 0.0f
                      : __fmul_rn(__fsub_rn(expf(__fsub_rn(z[i], row_lse[t])), j == y ? 1.0f : 0.0f), inv_n[0]);
  }
}

// ---- dropout, then add ----
__global__ void dropout_kernel(const bf16* x, bf16* out, std::int64_t n, std::uint32_t threshold, float scale,
                               std::uint64_t seed, std::uint64_t offset) {
  GRID_STRIDE(i, n) {
    const bool keep = numgate::dropout_add::dropout_keep(
        numgate::dropout_add::dropout_draw(static_cast<std::uint64_t>(i), seed, offset), threshold);
    out[i] = keep ? b(__fmul_rn(f(x[i]), scale)) : b(0.0f);
  }
}
__global__ void add_kernel(const bf16* a, const bf16* c, bf16* out, std::int64_t n) {
  GRID_STRIDE(i, n) out[i] = b(__fadd_rn(f(a[i]), f(c[i])));
}

// ---- glue ----
__global__ void to_heads_kernel(const bf16* in, bf16* out, int batch, int seq, int qh, int kvh, int d) {
  GRID_STRIDE(i, static_cast<std::int64_t>(batch) * qh * seq * d) {
    const int e = static_cast<int>(i % d);
    const int s = static_cast<int>((i / d) % seq);
    const int h = static_cast<int>((i / (static_cast<std::int64_t>(d) * seq)) % qh);
    const std::int64_t bb = i / (static_cast<std::int64_t>(d) * seq * qh);
    const int hk = h / (qh / kvh);
    out[i] = in[((bb * seq + s) * kvh + hk) * d + e];
  }
}
__global__ void from_heads_kernel(const bf16* in, bf16* out, int batch, int seq, int heads, int d) {
  GRID_STRIDE(i, static_cast<std::int64_t>(batch) * heads * seq * d) {  // i indexes out [b, s, h, e]
    const int e = static_cast<int>(i % d);
    const int h = static_cast<int>((i / d) % heads);
    const int s = static_cast<int>((i / (static_cast<std::int64_t>(d) * heads)) % seq);
    const std::int64_t bb = i / (static_cast<std::int64_t>(d) * heads * seq);
    out[i] = in[((bb * heads + h) * seq + s) * d + e];
  }
}
__global__ void reduce_heads_kernel(const bf16* in, bf16* out, int batch, int seq, int qh, int kvh, int d) {
  GRID_STRIDE(i, static_cast<std::int64_t>(batch) * seq * kvh * d) {  // out [b, s, hk, e]
    const int e = static_cast<int>(i % d);
    const int hk = static_cast<int>((i / d) % kvh);
    const int s = static_cast<int>((i / (static_cast<std::int64_t>(d) * kvh)) % seq);
    const std::int64_t bb = i / (static_cast<std::int64_t>(d) * kvh * seq);
    const int group = qh / kvh;
    float acc = 0;
    for (int g = 0; g < group; ++g) acc = __fadd_rn(acc, f(in[((bb * qh + hk * group + g) * seq + s) * d + e]));
    out[i] = b(acc);
  }
}
__global__ void to_bf16_kernel(const float* in, bf16* out, std::int64_t n) { GRID_STRIDE(i, n) out[i] = b(in[i]); }
__global__ void to_float_kernel(const bf16* in, float* out, std::int64_t n) { GRID_STRIDE(i, n) out[i] = f(in[i]); }
__global__ void embedding_fwd(const bf16* table, const std::int32_t* tok, bf16* out, std::int64_t n, int dim) {
  GRID_STRIDE(i, n * dim) out[i] = table[static_cast<std::int64_t>(tok[i / dim]) * dim + i % dim];
}
__global__ void embedding_bwd(const bf16* dout, const std::int32_t* off, const std::int32_t* idx, float* dtable,
                              int vocab, int dim) {
  GRID_STRIDE(i, static_cast<std::int64_t>(vocab) * dim) {
    const std::int64_t v = i / dim, e = i % dim;
    float acc = 0;
    for (std::int32_t k = off[v]; k < off[v + 1]; ++k) acc = __fadd_rn(acc, f(dout[static_cast<std::int64_t>(idx[k]) * dim + e]));
    dtable[i] = acc;
  }
}
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, bf16* pb, std::int64_t n, float lr, float b1,
                             float b2, float eps, float wd, float c1, float c2) {
  GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(1.0f - b2, __fmul_rn(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    const float mhat = __fdiv_rn(mi, c1), vhat = __fdiv_rn(vi, c2);
    float pi = __fmul_rn(p[i], 1.0f - __fmul_rn(lr, wd));
    pi = __fsub_rn(pi, __fmul_rn(lr, __fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps))));
    p[i] = pi;
    pb[i] = b(pi);
  }
}
__global__ void causal_mask_kernel(bf16* mask, int seq, int shift) {
  GRID_STRIDE(i, static_cast<std::int64_t>(seq) * seq) {
    const std::int64_t q = i / seq, k = i % seq;
    mask[i] = k <= q + shift ? b(0.0f) : b(-INFINITY);
  }
}

}  // namespace

void ref_rmsnorm_forward(const bf16* x, const bf16* w, bf16* y, std::int64_t rows, std::int64_t hidden, float eps,
                         cudaStream_t s) {
  require(rows >= 1 && rows < (1LL << 31) && hidden >= 1, "rmsnorm: rows in [1, 2^31), hidden >= 1");
  rmsnorm_fwd<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, w, y, hidden, eps);
}
void ref_rmsnorm_backward(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, bf16* dw, float* rstd,
                          std::int64_t rows, std::int64_t hidden, float eps, cudaStream_t s) {
  require(rows >= 1 && rows < (1LL << 31) && hidden >= 1, "rmsnorm: rows in [1, 2^31), hidden >= 1");
  rmsnorm_bwd_dx<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, w, dy, dx, rstd, hidden, eps);
  rmsnorm_bwd_dw<<<static_cast<unsigned>((hidden + 127) / 128), 128, 0, s>>>(x, dy, rstd, dw, rows, hidden);
}
void ref_rope(const bf16* x, bf16* out, const std::int64_t* positions, std::int64_t tokens, int heads, int head_dim,
              double theta, bool backward, cudaStream_t s) {
  require(head_dim >= 2 && head_dim % 2 == 0 && heads >= 1 && theta > 0, "rope: even head_dim, heads >= 1, theta > 0");
  rope_kernel<<<blocks_for(tokens * heads * head_dim / 2), kThreads, 0, s>>>(x, out, positions, tokens, heads, head_dim,
                                                                            static_cast<float>(theta), backward);
}
void ref_softmax_forward(const bf16* scores, bf16* p, std::int64_t rows, int seq, float scale, cudaStream_t s) {
  require(rows >= 1 && rows < (1LL << 31) && seq >= 1, "softmax: rows in [1, 2^31), seq >= 1");
  softmax_fwd<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(scores, p, seq, scale);
}
void ref_softmax_backward(const bf16* p, const bf16* dp, bf16* dscores, std::int64_t rows, int seq, float scale,
                          cudaStream_t s) {
  require(rows >= 1 && rows < (1LL << 31) && seq >= 1, "softmax: rows in [1, 2^31), seq >= 1");
  softmax_bwd<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(p, dp, dscores, seq, scale);
}
void ref_swiglu_forward(const bf16* g, const bf16* u, bf16* y, std::int64_t n, cudaStream_t s) {
  swiglu_fwd<<<blocks_for(n), kThreads, 0, s>>>(g, u, y, n);
}
void ref_swiglu_backward(const bf16* g, const bf16* u, const bf16* dy, bf16* dg, bf16* du, std::int64_t n,
                         cudaStream_t s) {
  swiglu_bwd<<<blocks_for(n), kThreads, 0, s>>>(g, u, dy, dg, du, n);
}
void ref_cross_entropy(const float* logits, const std::int64_t* targets, float* loss, float* dlogits, float* row_ws,
                       std::int64_t tokens, std::int64_t vocab, cudaStream_t s) {
  require(tokens >= 1 && tokens < (1LL << 24) && vocab >= 1, "cross_entropy: tokens in [1, 2^24), vocab >= 1");
  // row_ws: [2 * tokens + 1] floats: per-token loss, per-token lse, 1 / n_valid.
  float* row_loss = row_ws;
  float* row_lse = row_ws + tokens;
  float* inv_n = row_ws + 2 * tokens;
  ce_rows<<<static_cast<unsigned>(tokens), kThreads, 0, s>>>(logits, targets, row_loss, row_lse, vocab);
  ce_mean<<<1, kThreads, 0, s>>>(row_loss, targets, tokens, loss, inv_n);
  ce_grad<<<blocks_for(tokens * vocab), kThreads, 0, s>>>(logits, targets, row_lse, inv_n, dlogits, tokens, vocab);
}
void ref_dropout_add_forward(const bf16* x, const bf16* residual, bf16* dropped, bf16* y, std::int64_t n, double p,
                             std::uint64_t seed, std::uint64_t offset, cudaStream_t s) {
  require(p >= 0 && p < 1, "dropout: p in [0, 1)");
  dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, dropped, n, numgate::dropout_add::dropout_threshold(p),
                                                    numgate::dropout_add::dropout_scale_fp32(p), seed, offset);
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(residual, dropped, y, n);
}
void ref_dropout_backward(const bf16* dy, bf16* dx, std::int64_t n, double p, std::uint64_t seed, std::uint64_t offset,
                          cudaStream_t s) {
  require(p >= 0 && p < 1, "dropout: p in [0, 1)");
  dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, n, numgate::dropout_add::dropout_threshold(p),
                                                    numgate::dropout_add::dropout_scale_fp32(p), seed, offset);
}
void to_heads(const bf16* in, bf16* out, int batch, int seq, int q_heads, int kv_heads, int head_dim, cudaStream_t s) {
  require(kv_heads >= 1 && q_heads % kv_heads == 0, "to_heads: kv_heads must divide q_heads");
  to_heads_kernel<<<blocks_for(static_cast<std::int64_t>(batch) * q_heads * seq * head_dim), kThreads, 0, s>>>(
      in, out, batch, seq, q_heads, kv_heads, head_dim);
}
void from_heads(const bf16* in, bf16* out, int batch, int seq, int heads, int head_dim, cudaStream_t s) {
  from_heads_kernel<<<blocks_for(static_cast<std::int64_t>(batch) * heads * seq * head_dim), kThreads, 0, s>>>(
      in, out, batch, seq, heads, head_dim);
}
void reduce_heads(const bf16* in, bf16* out, int batch, int seq, int q_heads, int kv_heads, int head_dim,
                  cudaStream_t s) {
  require(kv_heads >= 1 && q_heads % kv_heads == 0, "reduce_heads: kv_heads must divide q_heads");
  reduce_heads_kernel<<<blocks_for(static_cast<std::int64_t>(batch) * kv_heads * seq * head_dim), kThreads, 0, s>>>(
      in, out, batch, seq, q_heads, kv_heads, head_dim);
}
void add(const bf16* a, const bf16* c, bf16* out, std::int64_t n, cudaStream_t s) {
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, c, out, n);
}
void to_bf16(const float* in, bf16* out, std::int64_t n, cudaStream_t s) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
}
void to_float(const bf16* in, float* out, std::int64_t n, cudaStream_t s) {
  to_float_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
}
void embedding_forward(const bf16* table, const std::int32_t* tokens, bf16* out, std::int64_t n_tokens, int dim,
                       cudaStream_t s) {
  embedding_fwd<<<blocks_for(n_tokens * dim), kThreads, 0, s>>>(table, tokens, out, n_tokens, dim);
}
void embedding_backward(const bf16* dout, const std::int32_t* off, const std::int32_t* idx, float* dtable, int vocab,
                        int dim, cudaStream_t s) {
  embedding_bwd<<<blocks_for(static_cast<std::int64_t>(vocab) * dim), kThreads, 0, s>>>(dout, off, idx, dtable, vocab,
                                                                                        dim);
}
void adamw(float* param, const float* grad, float* m, float* v, bf16* param_bf16, std::int64_t n, float lr,
           float beta1, float beta2, float eps, float weight_decay, int step, cudaStream_t s) {
  require(step >= 1, "adamw: step >= 1");
  const float c1 = static_cast<float>(1.0 - std::pow(beta1, step));
  const float c2 = static_cast<float>(1.0 - std::pow(beta2, step));
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(param, grad, m, v, param_bf16, n, lr, beta1, beta2, eps,
                                                 weight_decay, c1, c2);
}
void causal_additive_mask(bf16* mask, int seq, int shift, cudaStream_t s) {
  causal_mask_kernel<<<blocks_for(static_cast<std::int64_t>(seq) * seq), kThreads, 0, s>>>(mask, seq, shift);
}

}  // namespace numgate::train
