// RoPE target: dispatches a fixture case to the CUDA launcher (rope.cuh) by dtype.
//
// Passes: "Forward" (q, k, positions -> q_rot, k_rot) and "Backward" (dq_rot, dk_rot,
// positions -> dq, dk), one launch each (the same kernel, inverse = false / true).
//
// Rows (Replay.RowsIndependent). A row is one head of one token: rows() is
// tokens * q_heads (batch * seq * q_heads). The replay slices row r = [r * d, (r + 1) * d)
// out of every input whose shape is the case shape (q, dq_rot; k and dk_rot too when
// kv_heads == q_heads), uploads every other input whole (k, dk_rot under GQA, and
// positions), and launches row_case(r): shape {1, head_dim} with param "row_token" = the
// row's token t = r / q_heads, so the adapter passes positions + t and the lone head turns
// by its own token's angle. The check then says: each head launched alone at its own
// address and 16-byte phase gives bitwise the batched head (and, when kv_heads ==
// q_heads, the same for k). A case shape of rank 2, {n, head_dim}, is such a single-row
// launch: one token (position positions[row_token]) with n q heads and 1 kv head.
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

cudaError_t run(const CaseSpec& c, const DevicePtrs& p, const char* x, const char* xk, const char* y, const char* yk,
                bool inverse, cudaStream_t s) {
  const Launch l = launch_of(c);
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto row_token = static_cast<std::int64_t>(c.param_or("row_token", 0));
    return apply<T>(static_cast<const T*>(p.at(x)), static_cast<const T*>(p.at(xk)),
                    static_cast<const std::int64_t*>(p.at("positions")) + row_token, static_cast<T*>(p.at(y)),
                    static_cast<T*>(p.at(yk)), l.tokens, l.q_heads, l.kv_heads, l.head_dim, c.param("theta"),
                    c.param("interleaved") != 0.0, inverse, s);
  });
}

}  // namespace

TargetOp make_target() {
  TargetOp t;
  t.op = "rope";
  t.rows = [](const CaseSpec& c) {
    const Launch l = launch_of(c);
    return l.tokens * l.q_heads;
  };
  t.row_case = [](const CaseSpec& c, std::int64_t r) {
    CaseSpec one = c;
    one.shape = {1, c.shape.back()};
    one.params.push_back({"row_token", static_cast<double>(r / launch_of(c).q_heads)});
    return one;
  };
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
