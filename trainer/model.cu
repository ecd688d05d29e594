// numgate-train — the model, one training step top to bottom (model.h says what it is).
// Read in order: buffers, the per-op switch (one function per swappable op: reference or
// target), forward, backward, AdamW.
#include "model.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cross_entropy/cross_entropy.cuh"
#include "cuda_check.h"
#include "dropout_add/dropout_add.cuh"
#include "glu/glu.cuh"
#include "numgate/random.h"
#include "reference_ops.cuh"
#include "rmsnorm/rmsnorm.cuh"
#include "rope/rope.cuh"
#include "softmax/softmax.cuh"

namespace numgate::train {

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

std::string device_name() {
  int dev = 0;
  cudaDeviceProp p{};
  NUMGATE_CUDA_CHECK(cudaGetDevice(&dev));
  NUMGATE_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

namespace {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)) + " (" + cublasGetStatusString(s) + ")");
}
#define CUBLAS_CHECK(call) cublas_check((call), #call)
#define LAUNCH_CHECK(call) NUMGATE_CUDA_CHECK(call)

// A trainable tensor: FP32 master, bf16 compute copy, FP32 gradient, AdamW moments.
struct Param {
  float *w = nullptr, *g = nullptr, *m = nullptr, *v = nullptr;
  bf16* wb = nullptr;
  bf16* gb = nullptr;  // bf16 gradient of an RMSNorm weight (what both paths' backward writes)
  std::int64_t n = 0;
  bool decay = true;
};

struct Layer {
  Param attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd;
  // saved activations (forward), [tokens, *] or [batch, heads, seq, *]
  bf16 *n1, *q, *k, *v, *qr, *kr, *Qp, *Kp, *Vp, *S, *P, *Op, *attn, *o, *h_mid, *n2, *g, *u, *a, *mo;
};

}  // namespace

struct Trainer::Impl {
  ModelConfig c;
  std::uint64_t seed;
  TargetSet targets;
  Mutant mutant;
  std::int64_t N, D, F, V, QD, KD;  // tokens, d_model, ffn, vocab, q width, kv width
  int B, S, Hq, Hkv, hd;
  std::int64_t step_count = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<void*> allocations;
  std::vector<Param*> params;
  Param embed, final_norm, lm_head;
  std::vector<Layer> layers;
  std::vector<bf16*> h;  // residual stream: h[0] = embedding, h[l+1] = output of layer l
  bf16 *nf = nullptr;
  float *logits = nullptr, *dlogits = nullptr, *loss = nullptr, *dloss = nullptr, *lse = nullptr;
  std::int32_t *tokens = nullptr, *csr_off = nullptr, *csr_idx = nullptr;
  std::int64_t *targets_dev = nullptr, *targets_target = nullptr, *positions = nullptr;
  // backward scratch
  bf16 *dlog_b, *dh0, *dh1, *dn, *dq, *dk, *dv, *dqr, *dkr, *dQp, *dKp, *dVp, *dS, *dP, *dattn, *dOp, *do_, *da, *dg,
      *du, *dm, *dx_norm, *dropped;
  bf16* causal_mask = nullptr;
  void* rms_ws = nullptr;
  std::size_t rms_ws_bytes = 0;
  void* ce_ws = nullptr;
  std::size_t ce_ws_bytes = 0;
  float* ref_ws = nullptr;  // reference path: rstd [N], CE rows [2N + 1]
  std::vector<Capture>* cap = nullptr;

  template <typename T>
  T* alloc(std::int64_t n) {
    void* p = nullptr;
    NUMGATE_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T)));
    allocations.push_back(p);
    return static_cast<T*>(p);
  }
  void make_param(Param& p, std::int64_t n, bool decay) {
    p.n = n;
    p.decay = decay;
    p.w = alloc<float>(n);
    p.g = alloc<float>(n);
    p.m = alloc<float>(n);
    p.v = alloc<float>(n);
    p.wb = alloc<bf16>(n);
    NUMGATE_CUDA_CHECK(cudaMemsetAsync(p.m, 0, n * sizeof(float), stream));
    NUMGATE_CUDA_CHECK(cudaMemsetAsync(p.v, 0, n * sizeof(float), stream));
    params.push_back(&p);
  }
  // Weights: normal(0, std) from Philox (numgate/random.h), one stream per tensor; norms 1.
  void init_param(Param& p, std::uint32_t stream_id, double stdev, bool ones) {
    std::vector<float> host(static_cast<std::size_t>(p.n));
    const RandomStream rs(seed, stream_id);
    for (std::int64_t i = 0; i < p.n; ++i)
      host[static_cast<std::size_t>(i)] = ones ? 1.0f : static_cast<float>(stdev * rs.normal(static_cast<std::uint64_t>(i)));
    // On `stream`, then synchronized: a plain cudaMemcpy runs on the legacy stream, which a
    // non-blocking stream does not wait for (the bf16 copy could read a half-copied tensor).
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(p.w, host.data(), p.n * sizeof(float), cudaMemcpyHostToDevice, stream));
    to_bf16(p.w, p.wb, p.n, stream);
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  Impl(const ModelConfig& cfg, std::uint64_t s, TargetSet t, Mutant m) : c(cfg), seed(s), targets(t), mutant(m) {
    try {
      init();
    } catch (...) {  // ~Impl does not run for a constructor that throws: free what init took
      release();
      throw;
    }
  }

  void init() {
    B = static_cast<int>(c.corpus.batch);
    S = static_cast<int>(c.corpus.seq);
    N = c.corpus.batch * c.corpus.seq;
    D = c.d_model;
    F = c.ffn;
    V = c.corpus.vocab;
    Hq = c.q_heads;
    Hkv = c.kv_heads;
    hd = c.head_dim;
    QD = static_cast<std::int64_t>(Hq) * hd;
    KD = static_cast<std::int64_t>(Hkv) * hd;
    if (Hkv < 1 || Hq % Hkv != 0 || hd % 2 != 0 || c.layers < 1 || D < 1 || F < 1)
      throw std::invalid_argument("numgate-train: kv_heads must divide q_heads, head_dim even, layers >= 1");
    std::string why;
    if (!cuda_device_available(&why)) throw std::runtime_error("numgate-train: no usable CUDA device (" + why + ")");
    NUMGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasSetStream(blas, stream));
    CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));

    make_param(embed, V * D, false);
    layers.resize(static_cast<std::size_t>(c.layers));
    for (Layer& L : layers) {
      make_param(L.attn_norm, D, false);
      make_param(L.wq, QD * D, true);
      make_param(L.wk, KD * D, true);
      make_param(L.wv, KD * D, true);
      make_param(L.wo, D * QD, true);
      make_param(L.mlp_norm, D, false);
      make_param(L.wg, F * D, true);
      make_param(L.wu, F * D, true);
      make_param(L.wd, D * F, true);
      L.attn_norm.gb = alloc<bf16>(D);
      L.mlp_norm.gb = alloc<bf16>(D);
    }
    make_param(final_norm, D, false);
    final_norm.gb = alloc<bf16>(D);
    make_param(lm_head, V * D, true);
    // Initialization: std init_std; the residual-branch outputs (wo, wd) std / sqrt(2 layers).
    std::uint32_t id = 1;
    init_param(embed, id++, c.init_std, false);
    const double out_std = c.init_std / std::sqrt(2.0 * c.layers);
    for (Layer& L : layers) {
      init_param(L.attn_norm, id++, 0, true);
      init_param(L.wq, id++, c.init_std, false);
      init_param(L.wk, id++, c.init_std, false);
      init_param(L.wv, id++, c.init_std, false);
      init_param(L.wo, id++, out_std, false);
      init_param(L.mlp_norm, id++, 0, true);
      init_param(L.wg, id++, c.init_std, false);
      init_param(L.wu, id++, c.init_std, false);
      init_param(L.wd, id++, out_std, false);
    }
    init_param(final_norm, id++, 0, true);
    init_param(lm_head, id++, c.init_std, false);

    const std::int64_t heads_elems = static_cast<std::int64_t>(B) * Hq * S * hd;
    const std::int64_t score_elems = static_cast<std::int64_t>(B) * Hq * S * S;
    for (int l = 0; l <= c.layers; ++l) h.push_back(alloc<bf16>(N * D));
    for (Layer& L : layers) {
      L.n1 = alloc<bf16>(N * D);
      L.q = alloc<bf16>(N * QD);
      L.k = alloc<bf16>(N * KD);
      L.v = alloc<bf16>(N * KD);
      L.qr = alloc<bf16>(N * QD);
      L.kr = alloc<bf16>(N * KD);
      L.Qp = alloc<bf16>(heads_elems);
      L.Kp = alloc<bf16>(heads_elems);
      L.Vp = alloc<bf16>(heads_elems);
      L.S = alloc<bf16>(score_elems);
      L.P = alloc<bf16>(score_elems);
      L.Op = alloc<bf16>(heads_elems);
      L.attn = alloc<bf16>(N * QD);
      L.o = alloc<bf16>(N * D);
      L.h_mid = alloc<bf16>(N * D);
      L.n2 = alloc<bf16>(N * D);
      L.g = alloc<bf16>(N * F);
      L.u = alloc<bf16>(N * F);
      L.a = alloc<bf16>(N * F);
      L.mo = alloc<bf16>(N * D);
    }
    nf = alloc<bf16>(N * D);
    logits = alloc<float>(N * V);
    dlogits = alloc<float>(N * V);
    loss = alloc<float>(1);
    dloss = alloc<float>(1);
    lse = alloc<float>(N);
    const float one = 1.0f;
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(dloss, &one, sizeof(float), cudaMemcpyHostToDevice, stream));
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
    tokens = alloc<std::int32_t>(N);
    csr_off = alloc<std::int32_t>(V + 1);
    csr_idx = alloc<std::int32_t>(N);
    targets_dev = alloc<std::int64_t>(N);
    targets_target = alloc<std::int64_t>(N);
    positions = alloc<std::int64_t>(N);
    dlog_b = alloc<bf16>(N * V);
    dh0 = alloc<bf16>(N * D);
    dh1 = alloc<bf16>(N * D);
    dn = alloc<bf16>(N * D);
    dx_norm = alloc<bf16>(N * D);
    dq = alloc<bf16>(N * QD);
    dk = alloc<bf16>(N * KD);
    dv = alloc<bf16>(N * KD);
    dqr = alloc<bf16>(N * QD);
    dkr = alloc<bf16>(N * KD);
    dQp = alloc<bf16>(heads_elems);
    dKp = alloc<bf16>(heads_elems);
    dVp = alloc<bf16>(heads_elems);
    dOp = alloc<bf16>(heads_elems);
    dS = alloc<bf16>(score_elems);
    dP = alloc<bf16>(score_elems);
    dattn = alloc<bf16>(N * QD);
    do_ = alloc<bf16>(N * D);
    da = alloc<bf16>(N * F);
    dg = alloc<bf16>(N * F);
    du = alloc<bf16>(N * F);
    dm = alloc<bf16>(N * D);
    dropped = alloc<bf16>(N * std::max(D, F));
    rms_ws_bytes = numgate::rmsnorm::backward_workspace_bytes(N, D);
    rms_ws = alloc<unsigned char>(static_cast<std::int64_t>(rms_ws_bytes));
    ce_ws_bytes = numgate::cross_entropy::workspace_bytes(N);
    ce_ws = alloc<unsigned char>(static_cast<std::int64_t>(ce_ws_bytes));
    ref_ws = alloc<float>(2 * N + 1);
    if (mutant == Mutant::causal_off_by_one) {
      causal_mask = alloc<bf16>(static_cast<std::int64_t>(S) * S);
      causal_additive_mask(causal_mask, S, 1, stream);
    }
    NUMGATE_CUDA_CHECK(cudaGetLastError());
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  ~Impl() { release(); }
  void release() noexcept {
    if (stream) cudaStreamSynchronize(stream);
    for (void* p : allocations) cudaFree(p);
    allocations.clear();
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
    blas = nullptr;
    stream = nullptr;
  }

  // ---- capture (first-divergence finder) ----
  void keep(const std::string& name, const bf16* p, std::int64_t n) {
    if (!cap) return;
    std::vector<bf16> tmp(static_cast<std::size_t>(n));
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(tmp.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost, stream));
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
    Capture cpt{name, std::vector<float>(tmp.size())};
    for (std::size_t i = 0; i < tmp.size(); ++i) cpt.values[i] = __bfloat162float(tmp[i]);
    cap->push_back(std::move(cpt));
  }
  void keep(const std::string& name, const float* p, std::int64_t n) {
    if (!cap) return;
    Capture cpt{name, std::vector<float>(static_cast<std::size_t>(n))};
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(cpt.values.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
    cap->push_back(std::move(cpt));
  }

  // ---- matmuls (cuBLAS is column-major: a row-major [r, c] matrix is a column-major c x r) ----
  // Y[N, out] = X[N, in] W[out, in]^T
  void linear(const bf16* X, const Param& W, void* Y, cudaDataType yt, std::int64_t in, std::int64_t out) {
    const float alpha = 1, beta = 0;
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(N),
                              static_cast<int>(in), &alpha, W.wb, CUDA_R_16BF, static_cast<int>(in), X, CUDA_R_16BF,
                              static_cast<int>(in), &beta, Y, yt, static_cast<int>(out), CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }
  // dX[N, in] (+)= dY[N, out] W[out, in]
  void linear_dx(const bf16* dY, const Param& W, bf16* dX, std::int64_t in, std::int64_t out, bool accumulate) {
    const float alpha = 1, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(N),
                              static_cast<int>(out), &alpha, W.wb, CUDA_R_16BF, static_cast<int>(in), dY, CUDA_R_16BF,
                              static_cast<int>(out), &beta, dX, CUDA_R_16BF, static_cast<int>(in), CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }
  // dW[out, in] = dY[N, out]^T X[N, in]   (FP32)
  void linear_dw(const bf16* dY, const bf16* X, Param& W, std::int64_t in, std::int64_t out) {
    const float alpha = 1, beta = 0;
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                              static_cast<int>(N), &alpha, X, CUDA_R_16BF, static_cast<int>(in), dY, CUDA_R_16BF,
                              static_cast<int>(out), &beta, W.g, CUDA_R_32F, static_cast<int>(in), CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }
  // Per (batch, head) matrices, column-major C[m, n] = op(A) op(B): see the attention below.
  void batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16* A, int lda,
               std::int64_t sa, const bf16* Bm, int ldb, std::int64_t sb, bf16* C, int ldc, std::int64_t sc) {
    const float alpha = 1, beta = 0;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, Bm, CUDA_R_16BF, ldb,
                                            sb, &beta, C, CUDA_R_16BF, ldc, sc, B * Hq, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  }

  // ---- the per-op switch: each swappable op, reference or target ----
  bool tgt(OpId op) const { return targets.has(op); }
  double target_eps() const { return mutant == Mutant::rmsnorm_eps ? 1e-5 : c.rms_eps; }

  void rmsnorm_fwd(const bf16* x, const Param& w, bf16* y) {
    if (tgt(OpId::rmsnorm))
      LAUNCH_CHECK(numgate::rmsnorm::forward<bf16>(x, w.wb, y, N, D, target_eps(), stream));
    else
      ref_rmsnorm_forward(x, w.wb, y, N, D, static_cast<float>(c.rms_eps), stream);
  }
  void rmsnorm_bwd(const bf16* x, Param& w, const bf16* dy, bf16* dx) {
    if (tgt(OpId::rmsnorm))
      LAUNCH_CHECK(numgate::rmsnorm::backward<bf16>(x, w.wb, dy, dx, w.gb, N, D, target_eps(), rms_ws, rms_ws_bytes,
                                                    stream));
    else
      ref_rmsnorm_backward(x, w.wb, dy, dx, w.gb, ref_ws, N, D, static_cast<float>(c.rms_eps), stream);
    to_float(w.gb, w.g, D, stream);
  }
  void rope(const bf16* q, const bf16* k, bf16* qo, bf16* ko, bool backward) {
    if (tgt(OpId::rope)) {
      LAUNCH_CHECK(numgate::rope::apply<bf16>(q, k, positions, qo, ko, N, Hq, Hkv, hd, c.rope_theta, false, backward,
                                              stream));
    } else {
      ref_rope(q, qo, positions, N, Hq, hd, c.rope_theta, backward, stream);
      ref_rope(k, ko, positions, N, Hkv, hd, c.rope_theta, backward, stream);
    }
  }
  float attn_scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))); }
  void softmax_fwd(const bf16* s, bf16* p) {
    const std::int64_t rows = static_cast<std::int64_t>(B) * Hq * S;
    if (tgt(OpId::softmax)) {
      if (mutant == Mutant::causal_off_by_one)
        LAUNCH_CHECK(numgate::softmax::forward<bf16>(s, causal_mask, p, rows, S, S, attn_scale(), 2, 0, stream));
      else
        LAUNCH_CHECK(numgate::softmax::forward<bf16>(s, nullptr, p, rows, S, S, attn_scale(), 1, 0, stream));
    } else {
      ref_softmax_forward(s, p, rows, S, attn_scale(), stream);
    }
  }
  void softmax_bwd(const bf16* p, const bf16* dp, bf16* ds) {
    const std::int64_t rows = static_cast<std::int64_t>(B) * Hq * S;
    if (tgt(OpId::softmax))
      // the forward's mask mode: 1 (y not read past the causal limit), 2 for the mutant's mask
      LAUNCH_CHECK(numgate::softmax::backward<bf16>(p, dp, ds, rows, S, S, attn_scale(),
                                                    mutant == Mutant::causal_off_by_one ? 2 : 1, 0, stream));
    else
      ref_softmax_backward(p, dp, ds, rows, S, attn_scale(), stream);
  }
  void swiglu_fwd(const bf16* g, const bf16* u, bf16* a) {
    if (tgt(OpId::swiglu))
      LAUNCH_CHECK(numgate::glu::swiglu_forward<bf16>(g, u, a, N * F, stream));
    else
      ref_swiglu_forward(g, u, a, N * F, stream);
  }
  void swiglu_bwd(const bf16* g, const bf16* u, const bf16* dy, bf16* dgo, bf16* duo) {
    if (tgt(OpId::swiglu))
      LAUNCH_CHECK(numgate::glu::swiglu_backward<bf16>(g, u, dy, dgo, duo, N * F, stream));
    else
      ref_swiglu_backward(g, u, dy, dgo, duo, N * F, stream);
  }
  void cross_entropy() {  // logits -> loss, dlogits (FP32)
    if (tgt(OpId::cross_entropy)) {
      numgate::cross_entropy::Params p;
      p.ignore_index = kIgnoreIndex;
      p.reduction = 1;  // mean
      // The fused entry (dloss = 1 is known in advance): bitwise forward() + backward().
      LAUNCH_CHECK(numgate::cross_entropy::forward_backward<float>(logits, targets_target, dloss, loss, lse, dlogits, N,
                                                                   V, p, 0, N, ce_ws, ce_ws_bytes, stream));
    } else {
      ref_cross_entropy(logits, targets_dev, loss, dlogits, ref_ws, N, V, stream);
    }
  }
  std::uint64_t dropout_offset(int layer, int site) const {
    const auto st = static_cast<std::uint64_t>(step_count), l = static_cast<std::uint64_t>(layer);
    const auto L = static_cast<std::uint64_t>(c.layers), s = static_cast<std::uint64_t>(site);
    if (tgt(OpId::dropout_add) && mutant == Mutant::dropout_offset_fixed_across_steps) return l * 2 + s;
    if (tgt(OpId::dropout_add) && mutant == Mutant::dropout_offset_fixed_across_layers) return st * 2 + s;
    return (st * L + l) * 2 + s;
  }
  void dropout_add_fwd(const bf16* x, const bf16* residual, bf16* y, int layer, int site) {
    const std::uint64_t off = dropout_offset(layer, site);
    if (tgt(OpId::dropout_add))
      LAUNCH_CHECK(numgate::dropout_add::forward<bf16>(x, residual, y, nullptr, N * D, c.dropout, seed, off, 0, stream));
    else
      ref_dropout_add_forward(x, residual, dropped, y, N * D, c.dropout, seed, off, stream);
  }
  void dropout_bwd(const bf16* dy, bf16* dx, int layer, int site) {  // the residual's gradient is dy itself
    const std::uint64_t off = dropout_offset(layer, site);
    if (tgt(OpId::dropout_add))
      LAUNCH_CHECK(numgate::dropout_add::backward<bf16>(dy, dx, nullptr, N * D, c.dropout, seed, off, 0, stream));
    else
      ref_dropout_backward(dy, dx, N * D, c.dropout, seed, off, stream);
  }

  // ---- one step ----
  void upload(const Batch& b) {
    if (static_cast<std::int64_t>(b.tokens.size()) != N)
      throw std::invalid_argument("numgate-train: a batch of " + std::to_string(b.tokens.size()) + " tokens, the model takes " + std::to_string(N));
    std::vector<std::int64_t> tt = b.targets;
    if (tgt(OpId::cross_entropy) && mutant == Mutant::padding_not_ignored)
      for (auto& t : tt)
        if (t == kIgnoreIndex) t = kPad;
    // CSR of the token ids (embedding backward sums each id's rows in token order).
    std::vector<std::int32_t> off(static_cast<std::size_t>(V + 1), 0), idx(static_cast<std::size_t>(N));
    for (std::int32_t t : b.tokens) ++off[static_cast<std::size_t>(t) + 1];
    for (std::int64_t v = 0; v < V; ++v) off[v + 1] += off[v];
    std::vector<std::int32_t> fill(off.begin(), off.end() - 1);
    for (std::int64_t t = 0; t < N; ++t) idx[fill[b.tokens[t]]++] = static_cast<std::int32_t>(t);
    auto up = [&](void* d, const void* hsrc, std::size_t bytes) {
      NUMGATE_CUDA_CHECK(cudaMemcpyAsync(d, hsrc, bytes, cudaMemcpyHostToDevice, stream));
    };
    up(tokens, b.tokens.data(), N * sizeof(std::int32_t));
    up(targets_dev, b.targets.data(), N * sizeof(std::int64_t));
    up(targets_target, tt.data(), N * sizeof(std::int64_t));
    up(positions, b.positions.data(), N * sizeof(std::int64_t));
    up(csr_off, off.data(), off.size() * sizeof(std::int32_t));
    up(csr_idx, idx.data(), idx.size() * sizeof(std::int32_t));
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors die here
  }

  void forward() {
    embedding_forward(embed.wb, tokens, h[0], N, static_cast<int>(D), stream);
    keep("embed.y", h[0], N * D);
    const std::int64_t hs = static_cast<std::int64_t>(S) * hd, ss = static_cast<std::int64_t>(S) * S;
    for (int l = 0; l < c.layers; ++l) {
      Layer& L = layers[static_cast<std::size_t>(l)];
      const std::string p = "L" + std::to_string(l) + ".";
      rmsnorm_fwd(h[l], L.attn_norm, L.n1);
      keep(p + "attn_norm.y", L.n1, N * D);
      linear(L.n1, L.wq, L.q, CUDA_R_16BF, D, QD);
      linear(L.n1, L.wk, L.k, CUDA_R_16BF, D, KD);
      linear(L.n1, L.wv, L.v, CUDA_R_16BF, D, KD);
      rope(L.q, L.k, L.qr, L.kr, false);
      keep(p + "rope.q", L.qr, N * QD);
      keep(p + "rope.k", L.kr, N * KD);
      to_heads(L.qr, L.Qp, B, S, Hq, Hq, hd, stream);
      to_heads(L.kr, L.Kp, B, S, Hq, Hkv, hd, stream);
      to_heads(L.v, L.Vp, B, S, Hq, Hkv, hd, stream);
      // scores[q, k] = Q K^T: column-major (k x q) = Kc^T Qc
      batched(CUBLAS_OP_T, CUBLAS_OP_N, S, S, hd, L.Kp, hd, hs, L.Qp, hd, hs, L.S, S, ss);
      softmax_fwd(L.S, L.P);
      keep(p + "softmax.p", L.P, static_cast<std::int64_t>(B) * Hq * ss);
      // O = P V: column-major (d x q) = Vc Pc
      batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, S, S, L.Vp, hd, hs, L.P, S, ss, L.Op, hd, hs);
      from_heads(L.Op, L.attn, B, S, Hq, hd, stream);
      linear(L.attn, L.wo, L.o, CUDA_R_16BF, QD, D);
      keep(p + "attn_proj.y", L.o, N * D);
      dropout_add_fwd(L.o, h[l], L.h_mid, l, 0);
      keep(p + "attn_dropout_add.y", L.h_mid, N * D);
      rmsnorm_fwd(L.h_mid, L.mlp_norm, L.n2);
      keep(p + "mlp_norm.y", L.n2, N * D);
      linear(L.n2, L.wg, L.g, CUDA_R_16BF, D, F);
      linear(L.n2, L.wu, L.u, CUDA_R_16BF, D, F);
      swiglu_fwd(L.g, L.u, L.a);
      keep(p + "swiglu.y", L.a, N * F);
      linear(L.a, L.wd, L.mo, CUDA_R_16BF, F, D);
      keep(p + "mlp_proj.y", L.mo, N * D);
      dropout_add_fwd(L.mo, L.h_mid, h[l + 1], l, 1);
      keep(p + "mlp_dropout_add.y", h[l + 1], N * D);
    }
    rmsnorm_fwd(h[c.layers], final_norm, nf);
    keep("final_norm.y", nf, N * D);
    linear(nf, lm_head, logits, CUDA_R_32F, D, V);
    keep("logits", logits, N * V);
    cross_entropy();
    keep("loss", loss, 1);
  }

  void backward() {
    const std::int64_t hs = static_cast<std::int64_t>(S) * hd, ss = static_cast<std::int64_t>(S) * S;
    keep("grad.dlogits", dlogits, N * V);
    to_bf16(dlogits, dlog_b, N * V, stream);  // the gradient of logits.float(): back to bf16
    linear_dw(dlog_b, nf, lm_head, D, V);
    linear_dx(dlog_b, lm_head, dn, D, V, false);
    bf16* dh = dh0;  // gradient of the residual stream at the current point
    bf16* other = dh1;
    rmsnorm_bwd(h[c.layers], final_norm, dn, dh);
    keep("grad.final_norm.dx", dh, N * D);
    for (int l = c.layers - 1; l >= 0; --l) {
      Layer& L = layers[static_cast<std::size_t>(l)];
      const std::string p = "grad.L" + std::to_string(l) + ".";
      // h[l+1] = h_mid + dropout(mo)
      dropout_bwd(dh, dm, l, 1);
      keep(p + "mlp_dropout_add.dx", dm, N * D);
      linear_dw(dm, L.a, L.wd, F, D);
      linear_dx(dm, L.wd, da, F, D, false);
      swiglu_bwd(L.g, L.u, da, dg, du);
      keep(p + "swiglu.dg", dg, N * F);
      keep(p + "swiglu.du", du, N * F);
      linear_dw(dg, L.n2, L.wg, D, F);
      linear_dw(du, L.n2, L.wu, D, F);
      linear_dx(dg, L.wg, dn, D, F, false);
      linear_dx(du, L.wu, dn, D, F, true);
      rmsnorm_bwd(L.h_mid, L.mlp_norm, dn, dx_norm);
      keep(p + "mlp_norm.dx", dx_norm, N * D);
      keep(p + "mlp_norm.dw", L.mlp_norm.gb, D);
      add(dh, dx_norm, other, N * D, stream);  // d h_mid = d h[l+1] (residual) + through the norm
      std::swap(dh, other);
      // h_mid = h[l] + dropout(o)
      dropout_bwd(dh, do_, l, 0);
      keep(p + "attn_dropout_add.dx", do_, N * D);
      linear_dw(do_, L.attn, L.wo, QD, D);
      linear_dx(do_, L.wo, dattn, QD, D, false);
      to_heads(dattn, dOp, B, S, Hq, Hq, hd, stream);
      // dP = dO V^T: column-major (k x q) = Vc^T dOc ; dV = P^T dO: (d x k) = dOc Pc^T
      batched(CUBLAS_OP_T, CUBLAS_OP_N, S, S, hd, L.Vp, hd, hs, dOp, hd, hs, dP, S, ss);
      batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, S, S, dOp, hd, hs, L.P, S, ss, dVp, hd, hs);
      softmax_bwd(L.P, dP, dS);
      keep(p + "softmax.dscores", dS, static_cast<std::int64_t>(B) * Hq * ss);
      // dQ = dS K: (d x q) = Kc dSc ; dK = dS^T Q: (d x k) = Qc dSc^T
      batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, S, S, L.Kp, hd, hs, dS, S, ss, dQp, hd, hs);
      batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, S, S, L.Qp, hd, hs, dS, S, ss, dKp, hd, hs);
      from_heads(dQp, dqr, B, S, Hq, hd, stream);
      reduce_heads(dKp, dkr, B, S, Hq, Hkv, hd, stream);
      reduce_heads(dVp, dv, B, S, Hq, Hkv, hd, stream);
      rope(dqr, dkr, dq, dk, true);
      keep(p + "rope.dq", dq, N * QD);
      keep(p + "rope.dk", dk, N * KD);
      linear_dw(dq, L.n1, L.wq, D, QD);
      linear_dw(dk, L.n1, L.wk, D, KD);
      linear_dw(dv, L.n1, L.wv, D, KD);
      linear_dx(dq, L.wq, dn, D, QD, false);
      linear_dx(dk, L.wk, dn, D, KD, true);
      linear_dx(dv, L.wv, dn, D, KD, true);
      rmsnorm_bwd(h[l], L.attn_norm, dn, dx_norm);
      keep(p + "attn_norm.dx", dx_norm, N * D);
      keep(p + "attn_norm.dw", L.attn_norm.gb, D);
      add(dh, dx_norm, other, N * D, stream);
      std::swap(dh, other);
    }
    embedding_backward(dh, csr_off, csr_idx, embed.g, static_cast<int>(V), static_cast<int>(D), stream);
    keep("grad.embed.dtable", embed.g, V * D);
  }

  void optimizer() {
    const int t = static_cast<int>(step_count + 1);
    const float lr = c.lr * std::min(1.0f, static_cast<float>(t) / static_cast<float>(std::max(1, c.warmup_steps)));
    for (Param* p : params)
      adamw(p->w, p->g, p->m, p->v, p->wb, p->n, lr, c.beta1, c.beta2, c.adam_eps, p->decay ? c.weight_decay : 0.0f, t,
            stream);
  }

  double read_loss() {
    float l = 0;
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(&l, loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return l;
  }
};

Trainer::Trainer(const ModelConfig& cfg, std::uint64_t seed, TargetSet targets, Mutant mutant)
    : impl_(std::make_unique<Impl>(cfg, seed, targets, mutant)) {}
Trainer::~Trainer() = default;

double Trainer::step(const Batch& batch) {
  Impl& m = *impl_;
  m.upload(batch);
  m.forward();
  m.backward();
  m.optimizer();
  NUMGATE_CUDA_CHECK(cudaGetLastError());
  const double l = m.read_loss();
  ++m.step_count;
  return l;
}

std::vector<Capture> Trainer::capture(const Batch& batch) {
  Impl& m = *impl_;
  std::vector<Capture> out;
  m.cap = &out;
  try {
    m.upload(batch);
    m.forward();
    m.backward();
    NUMGATE_CUDA_CHECK(cudaGetLastError());
    NUMGATE_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  } catch (...) {
    m.cap = nullptr;
    throw;
  }
  m.cap = nullptr;
  return out;
}

void Trainer::copy_state_from(const Trainer& other) {
  Impl& a = *impl_;
  const Impl& b = *other.impl_;
  if (a.params.size() != b.params.size()) throw std::invalid_argument("copy_state_from: different model configurations");
  NUMGATE_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    Param& p = *a.params[i];
    const Param& q = *b.params[i];
    if (p.n != q.n) throw std::invalid_argument("copy_state_from: different model configurations");
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(p.w, q.w, p.n * sizeof(float), cudaMemcpyDeviceToDevice, a.stream));
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(p.m, q.m, p.n * sizeof(float), cudaMemcpyDeviceToDevice, a.stream));
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(p.v, q.v, p.n * sizeof(float), cudaMemcpyDeviceToDevice, a.stream));
    NUMGATE_CUDA_CHECK(cudaMemcpyAsync(p.wb, q.wb, p.n * sizeof(bf16), cudaMemcpyDeviceToDevice, a.stream));
  }
  a.step_count = b.step_count;
  NUMGATE_CUDA_CHECK(cudaStreamSynchronize(a.stream));
}

std::int64_t Trainer::steps_done() const { return impl_->step_count; }
const ModelConfig& Trainer::config() const { return impl_->c; }
std::int64_t Trainer::parameter_count() const {
  std::int64_t n = 0;
  for (const Param* p : impl_->params) n += p->n;
  return n;
}

}  // namespace numgate::train
