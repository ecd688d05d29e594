// RoPE target: dispatches a fixture case to the CUDA launcher (rope.cuh) by dtype.
//
// Passes: "Forward" (q, k, positions -> q_rot, k_rot) and "Backward" (dq_rot, dk_rot,
// positions -> dq, dk), one launch each (the same kernel, inverse = false / true).
//
// Rows (Replay.RowsIndependent). The replay slices row r = [r * d, (r + 1) * d) out of
// every input whose shape is the case shape (q, dq_rot; k and dk_rot too when kv_heads ==
// q_heads), uploads every other input whole (k, dk_rot under GQA, and positions), and
// launches the slice with the case shape replaced by {1, head_dim}. Because positions is
// uploaded whole, a row launched alone rotates by positions[0], so only rows of token 0
// can reproduce the batched launch: rows() is therefore q_heads (the first token's q
// heads), not batch * seq tokens. The check then says: each head of token 0, launched
// alone at its own address and 16-byte phase, gives bitwise the batched head (and, when
// kv_heads == q_heads, the same for k). Checking every token alone needs a replay hook
// that slices positions per token (not available in tests/gpu/test_replay.cpp).
// A case shape of rank 2, {n, head_dim}, is that single-row launch: one token (position
// positions[0]) with n q heads and 1 kv head.
#include <stdexcept>

#include "rope/rope.cuh"
#include "target.h"

namespace numgate::rope {
namespace {

struct Launch {
  std::int64_t tokens, q_heads, kv_heads, head_dim;
};
Launch launch_of(const CaseSpec& c) {
  if (c.shape.size() == 2) return {1, c.shape[0], 1, c.shape[1]};  // Replay.RowsIndependent's single row
  if (c.shape.size() != 4) return {-1, 0, 0, 0};                    // rejected by the launcher
  return {c.shape[0] * c.shape[1], c.shape[2], static_cast<std::int64_t>(c.param("kv_heads")), c.shape[3]};
}

template <class F>
cudaError_t dispatch(DType t, F&& f) {
  switch (t) {
    case DType::fp32: return f(float{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::fp16: return f(__half{});
    default: return cudaErrorInvalidValue;  // fp64 / i64: no rope kernel
  }
}

cudaError_t run(const CaseSpec& c, const DevicePtrs& p, const char* x, const char* xk, const char* y, const char* yk,
                bool inverse, cudaStream_t s) {
  const Launch l = launch_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return apply<T>(static_cast<const T*>(p.at(x)), static_cast<const T*>(p.at(xk)),
                    static_cast<const std::int64_t*>(p.at("positions")), static_cast<T*>(p.at(y)),
                    static_cast<T*>(p.at(yk)), l.tokens, l.q_heads, l.kv_heads, l.head_dim, c.param("theta"),
                    c.param("interleaved") != 0.0, inverse, s);
  });
}

}  // namespace

TargetOp make_target() {
  TargetOp t;
  t.op = "rope";
  t.rows = [](const CaseSpec& c) { return launch_of(c).q_heads; };
  auto none = [](const CaseSpec&) -> std::size_t { return 0; };
  t.passes.push_back({"Forward", {"q_rot", "k_rot"}, none,
                      [](const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
                        return run(c, p, "q", "k", "q_rot", "k_rot", false, s);
                      },
                      {"q", "k", "positions"}});
  t.passes.push_back({"Backward", {"dq", "dk"}, none,
                      [](const CaseSpec& c, const DevicePtrs& p, void*, std::size_t, cudaStream_t s) {
                        return run(c, p, "dq_rot", "dk_rot", "dq", "dk", true, s);
                      },
                      {"dq_rot", "dk_rot", "positions"}});
  return t;
}

}  // namespace numgate::rope
