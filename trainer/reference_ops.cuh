// numgate-train — the REFERENCE path's ops and the glue both paths share (CUDA).
//
// The reference path implements each swappable op the way the framework's eager code
// composes it (Hugging Face Qwen3 modeling code under PyTorch eager, bf16 activations):
// plain separate kernels, FP32 intermediates inside each kernel, a bf16 rounding wherever
// the eager code materializes a bf16 tensor, and nothing fused. Each function names the
// eager expression it implements. Every kernel is deterministic: no atomics, fixed
// reduction trees, launch shapes that depend only on the sizes.
//
// Layouts: activations row-major [tokens, features], tokens = batch * seq (sequence-major
// within a batch row); attention tensors per head [batch, heads, seq, head_dim].
// Errors: the launchers check their arguments and throw std::invalid_argument; CUDA launch
// errors are thrown as std::runtime_error (numgate/cuda_check.h style) by the caller's
// NUMGATE_CUDA_CHECK on cudaGetLastError().
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace numgate::train {

using bf16 = __nv_bfloat16;

// ---- reference path: one function per swappable op ------------------------------------

/// Qwen3RMSNorm: x32 = x.float(); r = rsqrt(mean(x32^2) + eps); y = w * (x32 * r).to(bf16)
/// (two roundings: the normalized activation to bf16, then the bf16 product with w).
void ref_rmsnorm_forward(const bf16* x, const bf16* w, bf16* y, std::int64_t rows, std::int64_t hidden, float eps,
                         cudaStream_t s);
/// Autograd of the above: g = (dy * w).to(bf16); dx = r (g - x r^2 mean(g x)) in FP32, to
/// bf16; dw = sum over rows of dy * (x r).to(bf16) in FP32 (rows in order), to bf16.
/// rstd_workspace: [rows] floats.
void ref_rmsnorm_backward(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, bf16* dw, float* rstd_workspace,
                          std::int64_t rows, std::int64_t hidden, float eps, cudaStream_t s);
/// HF apply_rotary_pos_emb, rotate-half: cos/sin = cos/sin(pos * inv_freq) in FP32 cast to
/// bf16, inv_freq = 1 / theta^(2f/d) in FP32; out = (x * cos).bf16 + (rotate_half(x) * sin).bf16.
/// backward = autograd: dx1 = (dy1 c).bf16 + (dy2 s).bf16, dx2 = (dy2 c).bf16 - (dy1 s).bf16.
/// x, out: [tokens, heads, head_dim]; positions [tokens].
void ref_rope(const bf16* x, bf16* out, const std::int64_t* positions, std::int64_t tokens, int heads, int head_dim,
              double theta, bool backward, cudaStream_t s);
/// HF eager attention weights: z = (scores * scale).bf16 + causal mask; p = softmax(z,
/// dtype=float32).to(bf16). scores, p: [rows, seq], row r is query r mod seq, keys j <= i.
void ref_softmax_forward(const bf16* scores, bf16* p, std::int64_t rows, int seq, float scale, cudaStream_t s);
/// Autograd: dz = p (dp - sum(dp p)) in FP32, to bf16; dscores = (dz * scale).bf16.
void ref_softmax_backward(const bf16* p, const bf16* dp, bf16* dscores, std::int64_t rows, int seq, float scale,
                          cudaStream_t s);
/// Qwen3MLP's act_fn(gate) * up: y = (silu(g).bf16 * u).bf16.
void ref_swiglu_forward(const bf16* g, const bf16* u, bf16* y, std::int64_t n, cudaStream_t s);
/// Autograd: ds = (dy u).bf16; du = (dy silu(g).bf16).bf16; dg = (ds silu'(g)).bf16.
void ref_swiglu_backward(const bf16* g, const bf16* u, const bf16* dy, bf16* dg, bf16* du, std::int64_t n,
                         cudaStream_t s);
/// F.cross_entropy(logits.float(), targets, ignore_index=-100, reduction='mean') on FP32
/// logits [tokens, vocab]: loss[0] = mean over non-ignored tokens of lse - z_target (0 when
/// all are ignored); dlogits = (softmax - onehot) / n_valid, 0 on ignored rows (FP32).
/// row_workspace: [2 * tokens + 1] floats (per-token losses, per-token lse, 1 / n_valid).
void ref_cross_entropy(const float* logits, const std::int64_t* targets, float* loss, float* dlogits,
                       float* row_workspace, std::int64_t tokens, std::int64_t vocab, cudaStream_t s);
/// residual + F.dropout(x, p): dropped = (m ? x * s : 0).bf16 (s = RN_fp32(1/(1-p))), then
/// y = (residual + dropped).bf16 — two kernels, two roundings; m from the dropout_add
/// op's declared stream (kernels/dropout_add/dropout_stream.h) at (seed, offset).
void ref_dropout_add_forward(const bf16* x, const bf16* residual, bf16* dropped_workspace, bf16* y, std::int64_t n,
                             double p, std::uint64_t seed, std::uint64_t offset, cudaStream_t s);
/// Autograd of F.dropout: dx = (m ? dy * s : 0).bf16 (the residual's gradient is dy itself).
void ref_dropout_backward(const bf16* dy, bf16* dx, std::int64_t n, double p, std::uint64_t seed,
                          std::uint64_t offset, cudaStream_t s);

// ---- glue: the same on both paths ---------------------------------------------------------

/// [batch, seq, kv_heads, d] -> [batch, q_heads, seq, d], head h reading kv head h / (q_heads / kv_heads)
/// (q_heads == kv_heads: a plain transpose).
void to_heads(const bf16* in, bf16* out, int batch, int seq, int q_heads, int kv_heads, int head_dim, cudaStream_t s);
/// [batch, heads, seq, d] -> [batch, seq, heads, d].
void from_heads(const bf16* in, bf16* out, int batch, int seq, int heads, int head_dim, cudaStream_t s);
/// Gradient of to_heads: [batch, q_heads, seq, d] -> [batch, seq, kv_heads, d], the group's
/// q heads summed in FP32 in head order, rounded once.
void reduce_heads(const bf16* in, bf16* out, int batch, int seq, int q_heads, int kv_heads, int head_dim,
                  cudaStream_t s);
/// out = (a + b).bf16, FP32 add (the residual stream's gradient sum).
void add(const bf16* a, const bf16* b, bf16* out, std::int64_t n, cudaStream_t s);
void to_bf16(const float* in, bf16* out, std::int64_t n, cudaStream_t s);
void to_float(const bf16* in, float* out, std::int64_t n, cudaStream_t s);
void embedding_forward(const bf16* table, const std::int32_t* tokens, bf16* out, std::int64_t n_tokens, int dim,
                       cudaStream_t s);
/// dtable[v] = sum over the tokens t with tokens[t] == v of dout[t] (FP32, in token order:
/// CSR lists built on the host, csr_offsets [vocab + 1], csr_tokens [n_tokens]).
void embedding_backward(const bf16* dout, const std::int32_t* csr_offsets, const std::int32_t* csr_tokens,
                        float* dtable, int vocab, int dim, cudaStream_t s);
/// AdamW (Loshchilov & Hutter), bias-corrected, decoupled weight decay, on FP32 master
/// weights; writes the bf16 compute copy. step >= 1.
void adamw(float* param, const float* grad, float* m, float* v, bf16* param_bf16, std::int64_t n, float lr,
           float beta1, float beta2, float eps, float weight_decay, int step, cudaStream_t s);
/// mask[i, j] = 0 where j <= i + shift, -inf elsewhere ([seq, seq] bf16): the additive mask
/// of the causal mask mutant (shift 1: each query also sees the next key).
void causal_additive_mask(bf16* mask, int seq, int shift, cudaStream_t s);

}  // namespace numgate::train
