// RoPE target: launches a case's passes (descriptor: rope_oracle.cpp) by dtype, one
// launch each (the same kernel, inverse = false / true).
//
// Rows. A row is one head of one token: rows = batch * seq * q_heads, row r is head
// r % q_heads of token r / q_heads. q, dq_rot, q_rot, dq are Layout::rows; k, dk_rot,
// k_rot, dk and positions are whole. A window of whole tokens launches those tokens; a
// window of one row launches that q head alone with its token's position and the k head
// it shares under GQA (kv head (r % q_heads) / (q_heads / kv_heads) of the token), as
// tokens = 1, q_heads = kv_heads = 1. Any other window is refused (cudaErrorInvalidValue).
#include "rope/rope.cuh"
#include "target.h"

namespace numgate::rope {
namespace {

cudaError_t run(const Launch& l, const char* x, const char* xk, const char* y, const char* yk, bool inverse) {
  const CaseSpec& c = l.spec;
  if (c.shape.size() != 4) return cudaErrorInvalidValue;
  const std::int64_t q_heads = c.shape[2], head_dim = c.shape[3], kv_heads = static_cast<std::int64_t>(c.param("kv_heads"));
  if (q_heads < 1 || kv_heads < 1 || q_heads % kv_heads != 0) return cudaErrorInvalidValue;
  const std::int64_t all_tokens = c.shape[0] * c.shape[1];
  const RowWindow& w = l.window;
  std::int64_t token = 0, tokens = all_tokens, qh = q_heads, kvh = kv_heads, k_head = 0;
  if (w.count >= 0) {
    if (w.first % q_heads == 0 && w.count % q_heads == 0) {  // whole tokens
      token = w.first / q_heads;
      tokens = w.count / q_heads;
    } else if (w.count == 1) {  // one q head alone
      token = w.first / q_heads;
      tokens = 1;
      qh = kvh = 1;
      k_head = (w.first % q_heads) / (q_heads / kv_heads);
    } else {
      return cudaErrorInvalidValue;
    }
  }
  const std::int64_t k_offset = (token * kv_heads + k_head) * head_dim;  // k tensors are whole
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return apply<T>(l.ptr<const T>(x), l.ptr<const T>(xk) + k_offset, l.ptr<const std::int64_t>("positions") + token,
                    l.ptr<T>(y), l.ptr<T>(yk) + k_offset, tokens, qh, kvh, head_dim, c.param("theta"),
                    c.param("interleaved") != 0.0, inverse, l.stream);
  });
}

}  // namespace

TargetOp make_target() {
  return {"rope",
          {{"Forward", {}, [](const Launch& l) { return run(l, "q", "k", "q_rot", "k_rot", false); }},
           {"Backward", {}, [](const Launch& l) { return run(l, "dq_rot", "dk_rot", "dq", "dk", true); }}},
          {}};
}

}  // namespace numgate::rope

NUMGATE_REGISTER_TARGETS(rope) { add(numgate::rope::make_target()); }
