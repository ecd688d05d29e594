// Cross-entropy target: launches a case's passes (descriptor: cross_entropy_oracle.cpp)
// by dtype.
//
// Passes: "Forward" (logits, targets -> loss, lse) and "Backward" (logits, targets, dloss
// -> dlogits; it recomputes the row statistics, see cross_entropy_oracle.h).
//
// Variant "fused": its "Backward" runs forward_backward (cross_entropy.cuh), the fused
// forward + backward training calls, gated on dlogits on every case. Its loss and lse go to
// the pass's workspace, after the launcher's own (the Backward pass declares dlogits as its
// only output); tests/gpu/test_ce_fused.cpp shows they are bitwise the forward's.
//
// Rows. A row is one token. logits and dlogits are Layout::rows; targets and lse are
// Layout::row_indexed (whole buffers, element row_offset + r is row r's); dloss and loss
// are whole ([1] for mean and sum). All are indexed by row_offset + r (the launchers' slice
// arguments, cross_entropy.cuh): a window [first, first + count) launches `count` tokens
// with row_offset = first and total_tokens = the case's tokens (the mean's count runs over
// all of targets), so a token launched alone gives bitwise its row of the batched launch.
//
// Target validation (TargetOp::precheck, run by the replay before any launch, never by the
// benchmark): copies the targets to the host and checks them with check_targets (the
// oracles' function): a target outside [0, vocab) that is not ignore_index refuses the case
// (cudaErrorInvalidValue). The kernels themselves never index memory with a target (an
// invalid one gives NaN); a production integration validates where targets are produced.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cross_entropy/cross_entropy.cuh"
#include "cross_entropy/cross_entropy_oracle.h"
#include "target.h"

namespace numgate::cross_entropy {
namespace {

Params params_of(const CaseSpec& c) {
  Params p;
  p.ignore_index = static_cast<std::int64_t>(c.param("ignore_index"));
  p.label_smoothing = c.param("label_smoothing");
  p.z_loss = c.param("z_loss");
  p.softcap = c.param("softcap");
  p.reduction = static_cast<int>(c.param("reduction"));
  return p;
}
std::int64_t tokens_of(const CaseSpec& c) { return c.shape.size() == 2 ? c.shape[0] : -1; }  // -1: refused

cudaError_t precheck(const CaseSpec& c, const DevicePtrs& p, cudaStream_t s) {
  const std::int64_t tokens = tokens_of(c);
  if (tokens < 0 || c.shape[1] < 1) return cudaErrorInvalidValue;
  std::vector<std::int64_t> host(static_cast<std::size_t>(tokens));
  if (!host.empty()) {
    if (const cudaError_t e = cudaMemcpyAsync(host.data(), p.at("targets"), host.size() * sizeof(std::int64_t),
                                              cudaMemcpyDeviceToHost, s);
        e != cudaSuccess)
      return e;
    if (const cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
  }
  return check_targets(host.data(), tokens, c.shape[1], params_of(c).ignore_index).empty() ? cudaSuccess
                                                                                          : cudaErrorInvalidValue;
}

cudaError_t launch_forward(const Launch& l) {
  const std::int64_t total = tokens_of(l.spec);
  if (total < 0) return cudaErrorInvalidValue;
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(l.ptr<const T>("logits"), l.ptr<const std::int64_t>("targets"), l.ptr<T>("loss"), l.ptr<T>("lse"),
                      l.window.rows_of(total), l.spec.shape[1], params_of(l.spec), l.window.first, total, l.workspace,
                      l.workspace_bytes, l.stream);
  });
}

cudaError_t launch_backward(const Launch& l) {
  const std::int64_t total = tokens_of(l.spec);
  if (total < 0) return cudaErrorInvalidValue;
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(l.ptr<const T>("logits"), l.ptr<const std::int64_t>("targets"), l.ptr<const T>("dloss"),
                       l.ptr<T>("dlogits"), l.window.rows_of(total), l.spec.shape[1], params_of(l.spec), l.window.first,
                       total, l.workspace, l.workspace_bytes, l.stream);
  });
}

std::size_t ws_of(const CaseSpec& c) { return workspace_bytes(std::max<std::int64_t>(tokens_of(c), 0)); }

// The fused variant's workspace: the launcher's, then loss and lse (each from a 16-byte
// boundary of the workspace's own alignment, plus the slack to reach one).
std::size_t loss_elems(const CaseSpec& c) {
  return c.param("reduction") == 0 ? static_cast<std::size_t>(std::max<std::int64_t>(tokens_of(c), 0)) : 1;
}
std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }
std::size_t fused_ws_of(const CaseSpec& c) {
  const std::size_t es = dtype_size(c.dtype), tokens = static_cast<std::size_t>(std::max<std::int64_t>(tokens_of(c), 0));
  return round16(ws_of(c)) + round16(loss_elems(c) * es) + round16(tokens * es) + 16;
}

cudaError_t launch_fused(const Launch& l) {
  const std::int64_t total = tokens_of(l.spec);
  if (total < 0 || l.workspace_bytes < fused_ws_of(l.spec)) return cudaErrorInvalidValue;
  const std::size_t own = ws_of(l.spec), es = dtype_size(l.spec.dtype);
  auto* base = static_cast<unsigned char*>(l.workspace);
  const auto a = reinterpret_cast<std::uintptr_t>(base + round16(own));
  unsigned char* loss = base + round16(own) + ((16 - a % 16) % 16);
  unsigned char* lse = loss + round16(loss_elems(l.spec) * es);
  return dispatch(l.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward_backward<T>(l.ptr<const T>("logits"), l.ptr<const std::int64_t>("targets"), l.ptr<const T>("dloss"),
                               reinterpret_cast<T*>(loss), reinterpret_cast<T*>(lse), l.ptr<T>("dlogits"),
                               l.window.rows_of(total), l.spec.shape[1], params_of(l.spec), l.window.first, total,
                               l.workspace, own, l.stream);
  });
}

}  // namespace

TargetOp make_target() {
  return {"cross_entropy", {{"Forward", ws_of, launch_forward}, {"Backward", ws_of, launch_backward}}, precheck};
}

/// forward_backward: loss, lse and dlogits in one sweep structure (gated on dlogits).
TargetOp make_fused_target() {
  TargetOp t{"cross_entropy", {{"Backward", fused_ws_of, launch_fused}}, {}};
  t.variant = "fused";
  return t;
}

}  // namespace numgate::cross_entropy

NUMGATE_REGISTER_TARGETS(cross_entropy) {
  add(numgate::cross_entropy::make_target());
  add(numgate::cross_entropy::make_fused_target());
}
