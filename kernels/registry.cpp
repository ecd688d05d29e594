// The ops numgate knows. Adding an op: implement numgate::Op next to its kernel and add
// one line here (see README: Adding an op).
#include <stdexcept>

#include "numgate/op.h"
#include "rmsnorm/rmsnorm_oracle.h"
// [include:glu]
// [include:rmsnorm_variants]
// [include:layernorm]

namespace numgate {

const std::vector<std::unique_ptr<Op>>& all_ops() {
  static const std::vector<std::unique_ptr<Op>> ops = [] {
    std::vector<std::unique_ptr<Op>> v;
    v.push_back(std::make_unique<rmsnorm::RMSNormOp>());
    // [ops:glu]
    // [ops:rmsnorm_variants]
    // [ops:layernorm]
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
