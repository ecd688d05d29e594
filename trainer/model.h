// numgate-train — a small Qwen3-shaped decoder trained in plain C++/CUDA: gate 3's
// training run (SPEC §6; seed 000 §2 Gate 3 and §4), with a per-op switch between the
// reference path (the framework's eager composition, trainer/reference_ops.cuh) and the
// target path (numgate's kernels, kernels/<op>/<op>.cuh).
//
// Model (Qwen3 layout, Yang et al. 2025, "Qwen3 Technical Report"; HF modeling_qwen3):
//   h = embed(tokens)                                   bf16 [tokens, d]
//   per layer:  a = RMSNorm(h) ; q, k, v = a Wq^T, a Wk^T, a Wv^T
//               q, k = RoPE(q, k)  (rotate-half, GQA: q_heads query heads, kv_heads shared)
//               o = softmax(q k^T * head_dim^-1/2 + causal) v ; h = h + dropout(o Wo^T)
//               a = RMSNorm(h) ; h = h + dropout( (silu(a Wg^T) * (a Wu^T)) Wd^T )
//   logits = RMSNorm(h) Wlm^T (FP32 straight from cuBLAS, where HF computes bf16 logits and
//   upcasts them: glue, the same on both paths) ; loss = cross_entropy(logits, targets,
//   ignore_index = -100, mean)
// (Qwen3's per-head q/k norms are left out: they would be two more RMSNorms.) Matmuls:
// cuBLAS cublasGemmEx, bf16 inputs, FP32 compute, bf16 outputs (FP32 for the logits and
// the weight gradients). Master weights FP32, a bf16 copy for compute, AdamW. Every kernel
// is deterministic (no atomics; cuBLAS gives bitwise the same result on the same GPU), so a
// run repeated gives bitwise the same losses (seed 000 §4.5; checked by the gate).
//
// Dropout + residual is the dropout_add op on both paths (reference: a dropout kernel and
// an add kernel; target: the fused kernel), its Philox stream keyed by the run's seed at
//   offset = (step * layers + layer) * 2 + site     (site 0 attention, 1 MLP)
// so every layer and step draws a fresh mask (the stream: kernels/dropout_add/dropout_stream.h).
//
// Default size (ModelConfig): d 512, 4 layers, 8 query / 2 KV heads of 64, FFN 1536,
// vocab 1024, batch 16 x seq 256 = 4096 tokens a step; 13.1 M parameters. Why it is
// enough: every swapped op runs at the shapes of a real layer's hot loop (rows of 512,
// 4096-token batches, 256-key causal rows, 4:1 GQA, a 1024-wide vocab), four layers deep
// so an error compounds through residual and attention paths, with a loss that falls from
// ln(1024) = 6.93 to about 4.95 in 200 steps (the corpus: trainer/corpus.h); and a step takes
// milliseconds, so two seeds x two paths x 200 steps fit gate 3's 3-minute budget.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corpus.h"

namespace numgate::train {

/// The swappable ops: each runs the reference or the target implementation.
enum class OpId { rmsnorm, rope, softmax, swiglu, cross_entropy, dropout_add };
inline constexpr std::array<OpId, 6> kOps = {OpId::rmsnorm, OpId::rope,          OpId::softmax,
                                             OpId::swiglu,  OpId::cross_entropy, OpId::dropout_add};
const char* op_name(OpId op);  ///< "rmsnorm", ..., the numgate op names

/// Which ops run their target implementation.
class TargetSet {
 public:
  static TargetSet none() { return TargetSet(0); }
  static TargetSet all() { return TargetSet((1u << kOps.size()) - 1); }
  /// "all", "none", or a comma-separated list of op names ("rmsnorm,rope"); throws
  /// std::invalid_argument naming the unknown name and listing the known ones.
  static TargetSet parse(const std::string& list);
  bool has(OpId op) const { return (bits_ >> static_cast<unsigned>(op)) & 1u; }
  std::string str() const;  ///< "all", "none", or the list
  bool operator==(const TargetSet& o) const { return bits_ == o.bits_; }

 private:
  explicit TargetSet(unsigned bits) : bits_(bits) {}
  unsigned bits_;
};

/// Late-class mutants (SPEC §6: RNG stream, epsilon, mask), applied to the TARGET path only.
enum class Mutant {
  none,
  dropout_offset_fixed_across_steps,   ///< offset = layer * 2 + site: the same masks every step
  dropout_offset_fixed_across_layers,  ///< offset = step * 2 + site: the same masks in every layer
  rmsnorm_eps,                         ///< the target RMSNorm launched with eps 1e-5 (the model's: 1e-6)
  causal_off_by_one,                   ///< the target softmax's mask lets query i see key i + 1
  padding_not_ignored,                 ///< the target cross-entropy gets PAD (0) for padded targets, not -100
};
inline constexpr std::array<Mutant, 5> kMutants = {
    Mutant::dropout_offset_fixed_across_steps, Mutant::dropout_offset_fixed_across_layers, Mutant::rmsnorm_eps,
    Mutant::causal_off_by_one, Mutant::padding_not_ignored};
const char* mutant_name(Mutant m);
/// Throws std::invalid_argument naming the unknown mutant and listing the known ones.
Mutant parse_mutant(const std::string& name);

struct ModelConfig {
  CorpusConfig corpus;  ///< vocab, batch, seq
  int d_model = 512, layers = 4, q_heads = 8, kv_heads = 2, head_dim = 64, ffn = 1536;
  double rms_eps = 1e-6, rope_theta = 1e6, dropout = 0.1;
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, adam_eps = 1e-8f, weight_decay = 0.1f;
  int warmup_steps = 20;  ///< linear warmup, then constant
  float init_std = 0.02f;
};

/// One op output (or gradient) captured by the first-divergence finder, in execution order.
struct Capture {
  std::string name;  ///< "L0.attn_norm.y", "L3.mlp_dropout_add.y", "loss", "grad.L0.attn_norm.dx", ...
  std::vector<float> values;
};

class Trainer {
 public:
  /// Allocates the model on the current CUDA device and initializes the weights from
  /// `seed` (Philox normal, std init_std; RMSNorm weights 1). Throws std::runtime_error
  /// when no CUDA device is usable or a CUDA call fails, std::invalid_argument for a bad
  /// configuration.
  Trainer(const ModelConfig& cfg, std::uint64_t seed, TargetSet targets, Mutant mutant = Mutant::none);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// One training step on `batch` (forward, backward, AdamW); returns the loss before the
  /// update (mean cross-entropy over the non-ignored targets, as the target path's
  /// cross-entropy reports it when it runs the target).
  double step(const Batch& batch);
  /// Forward and backward on `batch` at the current weights, no update, capturing every
  /// op's output and the gradients of the swapped ops, in execution order.
  std::vector<Capture> capture(const Batch& batch);
  /// Copies weights, optimizer state and the step count from `other` (same config).
  void copy_state_from(const Trainer& other);
  std::int64_t steps_done() const;
  const ModelConfig& config() const;
  std::int64_t parameter_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// True when a CUDA device is usable (the CLI and the GPU test skip otherwise).
bool cuda_device_available(std::string* why = nullptr);
/// The current device as the replay's report names it: "NVIDIA H200 (sm_90)".
std::string device_name();

}  // namespace numgate::train
