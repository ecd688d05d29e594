// The targets numgate replays: every folder of a numgate_add_op() line in
// kernels/CMakeLists.txt registers its targets (NUMGATE_REGISTER_TARGETS); the call list is
// generated from those lines. Each target must match its op's descriptor pass for pass.
#include <algorithm>
#include <stdexcept>

#include "target.h"

namespace numgate {
namespace detail {
void register_all_targets(const TargetSink& add);  // generated: targets_registry.cpp
}

const TargetPass& TargetOp::pass(const std::string& name) const {
  std::string known;
  for (const auto& p : passes) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw std::invalid_argument("target " + op + " has no pass " + name + " (passes: " + known + ")");
}

const std::vector<TargetOp>& all_targets() {
  static const std::vector<TargetOp> targets = [] {
    std::vector<TargetOp> v;
    detail::register_all_targets([&](TargetOp t) { v.push_back(std::move(t)); });
    std::sort(v.begin(), v.end(), [](const TargetOp& a, const TargetOp& b) { return a.op < b.op; });
    for (const TargetOp& t : v) {
      const OpDescriptor& d = find_op(t.op).descriptor();  // throws for a target without an op
      bool same = t.passes.size() == d.passes.size();
      for (std::size_t i = 0; same && i < d.passes.size(); ++i)
        same = t.passes[i].name == d.passes[i].name && t.passes[i].launch;
      if (!same) throw std::logic_error("target " + t.op + ": its passes must be the descriptor's, in order, each with a launch");
    }
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i].op == v[i - 1].op) throw std::logic_error("two targets registered for op " + v[i].op);
    return v;
  }();
  return targets;
}

const TargetOp& find_target(const std::string& name) {
  std::string known;
  for (const auto& t : all_targets()) {
    if (t.op == name) return t;
    known += (known.empty() ? "" : ", ") + t.op;
  }
  throw std::invalid_argument("no target registered for op '" + name + "' (known: " + known + ")");
}

}  // namespace numgate
