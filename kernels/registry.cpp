// The ops numgate knows: every folder of a numgate_add_op() line in kernels/CMakeLists.txt
// registers its ops (NUMGATE_REGISTER_OPS); the call list is generated from those lines.
#include <algorithm>
#include <set>
#include <stdexcept>

#include "numgate/op.h"

namespace numgate {
namespace detail {
void register_all_ops(const OpSink& add);  // generated: ops_registry.cpp
}

const std::vector<std::unique_ptr<Op>>& all_ops() {
  static const std::vector<std::unique_ptr<Op>> ops = [] {
    std::vector<std::unique_ptr<Op>> v;
    detail::register_all_ops([&](std::unique_ptr<Op> op) { v.push_back(std::move(op)); });
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a->name() < b->name(); });
    std::set<std::string> seen;
    for (const auto& op : v) {
      if (const std::string p = op->descriptor().problems(); !p.empty()) throw std::logic_error(p);
      if (!seen.insert(op->name()).second) throw std::logic_error("two registered ops are named " + op->name());
    }
    return v;
  }();
  return ops;
}

const Op& find_op(const std::string& name) {
  std::string known;
  for (const auto& op : all_ops()) {
    if (op->name() == name) return *op;
    known += (known.empty() ? "" : ", ") + op->name();
  }
  throw std::invalid_argument("unknown op '" + name + "' (known: " + known + ")");
}

}  // namespace numgate
