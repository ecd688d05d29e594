// The targets numgate replays: every folder of a numgate_add_op() line in
// kernels/CMakeLists.txt registers its targets (NUMGATE_REGISTER_TARGETS); the call list is
// generated from those lines. Each target must match its op's descriptor pass for pass.
#include <algorithm>
#include <stdexcept>
#include <tuple>

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
    std::sort(v.begin(), v.end(),
              [](const TargetOp& a, const TargetOp& b) { return std::tie(a.op, a.variant) < std::tie(b.op, b.variant); });
    for (const TargetOp& t : v) {
      const OpDescriptor& d = find_op(t.op).descriptor();  // throws for a target without an op
      if (t.variant.empty()) {
        bool same = t.passes.size() == d.passes.size();
        for (std::size_t i = 0; same && i < d.passes.size(); ++i)
          same = t.passes[i].name == d.passes[i].name && t.passes[i].launch;
        if (!same)
          throw std::logic_error("target " + t.op + ": its passes must be the descriptor's, in order, each with a launch");
        continue;
      }
      const bool name_ok = std::all_of(t.variant.begin(), t.variant.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
      });
      if (!name_ok) throw std::logic_error("target " + t.label() + ": a variant's name is [a-z0-9_]+");
      if (t.passes.empty()) throw std::logic_error("target " + t.label() + ": a variant has at least one pass");
      for (std::size_t i = 0; i < t.passes.size(); ++i) {
        const TargetPass& p = t.passes[i];
        (void)d.pass(p.name);  // throws std::invalid_argument naming the descriptor's passes
        if (!p.launch) throw std::logic_error("target " + t.label() + ": pass " + p.name + " has no launch");
        for (std::size_t k = 0; k < i; ++k)
          if (t.passes[k].name == p.name) throw std::logic_error("target " + t.label() + ": pass " + p.name + " twice");
      }
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0 && v[i].op == v[i - 1].op && v[i].variant == v[i - 1].variant)
        throw std::logic_error("two targets registered for " + v[i].label());
      if (!v[i].variant.empty() && (i == 0 || v[i - 1].op != v[i].op))
        throw std::logic_error("target " + v[i].label() + ": a variant of an op without a main target");
    }
    // A variant without its own precheck checks the case's inputs as its main target does
    // (the main target sorts first: an empty variant name).
    for (std::size_t i = 1; i < v.size(); ++i)
      if (!v[i].variant.empty() && !v[i].precheck) {
        std::size_t m = i;
        while (!v[m].variant.empty()) --m;
        v[i].precheck = v[m].precheck;
      }
    return v;
  }();
  return targets;
}

const TargetOp& find_target(const std::string& name) {
  std::string known;
  for (const auto& t : all_targets()) {
    if (t.op == name && t.variant.empty()) return t;
    if (t.variant.empty()) known += (known.empty() ? "" : ", ") + t.op;
  }
  throw std::invalid_argument("no target registered for op '" + name + "' (known: " + known + ")");
}

std::vector<const TargetOp*> variants_of(const std::string& name) {
  std::vector<const TargetOp*> out;
  for (const auto& t : all_targets())
    if (t.op == name && !t.variant.empty()) out.push_back(&t);
  return out;
}

}  // namespace numgate
