// Cross-entropy target: dispatches a fixture case to the CUDA launchers (cross_entropy.cuh)
// by dtype.
//
// Passes: "Forward" (logits, targets -> loss, lse) and "Backward" (logits, targets, dloss
// -> dlogits; it recomputes the row statistics, see cross_entropy_oracle.h).
//
// Target validation. Before any launch, each pass copies the targets to the host
// (total_tokens x 8 bytes: 64 KB at the 8192-token benchmark shape; one stream
// synchronization) and checks them with check_targets (the oracles' function): a target
// outside [0, vocab) that is not ignore_index returns cudaErrorInvalidValue and launches
// nothing. The launchers themselves never read out of bounds with a bad target (it gives
// NaN); a production integration would validate where the targets are produced (the data
// loader, on the host) and skip this copy.
//
// Rows (Replay.RowsIndependent). The replay slices row r of the inputs whose shape is the
// case shape (logits) and of dlogits, and uploads targets and dloss whole; the loss and
// lse buffers are whole too. row_case therefore launches row r alone as a slice: params
// "row_offset" = r (targets, dloss (none), loss (none) and lse are indexed by
// row_offset + 0) and "total_tokens" = the batch's tokens (the mean's count n runs over
// all of targets), so the lone row's dlogits must equal the batched launch's bitwise, for
// every reduction including mean. rows() is tokens. Fixture cases never declare these
// two params.
#include <cstdint>
#include <vector>

#include "cross_entropy/cross_entropy.cuh"
#include "cross_entropy/cross_entropy_oracle.h"
#include "target.h"

namespace numgate::cross_entropy {
namespace {

double optional_param(const CaseSpec& c, const std::string& key, double fallback) {
  for (const auto& [k, v] : c.params)
    if (k == key) return v;
  return fallback;
}

struct Launch {
  std::int64_t tokens, vocab, row_offset, total_tokens;
  Params p;
  bool prevalidated = false;  ///< the caller guarantees valid targets (benchmark): no host check
};
Launch launch_of(const CaseSpec& c) {
  Launch l{};
  if (c.shape.size() != 2) return {-1, 0, 0, 0, {}};  // rejected by the launchers
  l.tokens = c.shape[0];
  l.vocab = c.shape[1];
  l.row_offset = static_cast<std::int64_t>(optional_param(c, "row_offset", 0));
  l.total_tokens = static_cast<std::int64_t>(optional_param(c, "total_tokens", static_cast<double>(l.tokens)));
  l.p.ignore_index = static_cast<std::int64_t>(c.param("ignore_index"));
  l.p.label_smoothing = c.param("label_smoothing");
  l.p.z_loss = c.param("z_loss");
  l.p.softcap = c.param("softcap");
  l.p.reduction = static_cast<int>(c.param("reduction"));
  l.prevalidated = optional_param(c, "targets_prevalidated", 0) != 0;
  return l;
}

/// Host-side validation of the device targets (see the file comment). cudaSuccess when
/// every target is valid.
cudaError_t validate(const Launch& l, const void* targets, cudaStream_t s) {
  if (l.total_tokens < 0 || l.vocab < 1) return cudaErrorInvalidValue;
  if (l.prevalidated) return cudaSuccess;  // numgate-bench: its index inputs are all 0
  std::vector<std::int64_t> host(static_cast<std::size_t>(l.total_tokens));
  if (!host.empty()) {
    if (const cudaError_t e = cudaMemcpyAsync(host.data(), targets, host.size() * sizeof(std::int64_t),
                                              cudaMemcpyDeviceToHost, s);
        e != cudaSuccess)
      return e;
    if (const cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
  }
  return check_targets(host.data(), l.total_tokens, l.vocab, l.p.ignore_index).empty() ? cudaSuccess
                                                                                       : cudaErrorInvalidValue;
}

cudaError_t launch_forward(const CaseSpec& c, const DevicePtrs& p, void* ws, std::size_t ws_bytes, cudaStream_t s) {
  const Launch l = launch_of(c);
  if (const cudaError_t e = validate(l, p.at("targets"), s); e != cudaSuccess) return e;
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(static_cast<const T*>(p.at("logits")), static_cast<const std::int64_t*>(p.at("targets")),
                      static_cast<T*>(p.at("loss")), static_cast<T*>(p.at("lse")), l.tokens, l.vocab, l.p,
                      l.row_offset, l.total_tokens, ws, ws_bytes, s);
  });
}

cudaError_t launch_backward(const CaseSpec& c, const DevicePtrs& p, void* ws, std::size_t ws_bytes, cudaStream_t s) {
  const Launch l = launch_of(c);
  if (const cudaError_t e = validate(l, p.at("targets"), s); e != cudaSuccess) return e;
  return dispatch(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    return backward<T>(static_cast<const T*>(p.at("logits")), static_cast<const std::int64_t*>(p.at("targets")),
                       static_cast<const T*>(p.at("dloss")), static_cast<T*>(p.at("dlogits")), l.tokens, l.vocab, l.p,
                       l.row_offset, l.total_tokens, ws, ws_bytes, s);
  });
}

std::size_t ws_of(const CaseSpec& c) { return workspace_bytes(c.shape.empty() ? 0 : c.shape[0]); }

}  // namespace

TargetOp make_target() {
  TargetOp t;
  t.op = "cross_entropy";
  t.rows = [](const CaseSpec& c) { return c.shape.empty() ? std::int64_t{0} : c.shape[0]; };
  t.row_case = [](const CaseSpec& c, std::int64_t r) {
    CaseSpec one = c;
    one.shape = {1, c.shape.back()};
    one.params.push_back({"row_offset", static_cast<double>(r)});
    one.params.push_back({"total_tokens", static_cast<double>(c.shape[0])});
    return one;
  };
  t.passes.push_back({"Forward", {"loss", "lse"}, ws_of, launch_forward, {"logits", "targets"}});
  t.passes.push_back({"Backward", {"dlogits"}, ws_of, launch_backward, {"logits", "targets", "dloss"}});
  return t;
}

}  // namespace numgate::cross_entropy
