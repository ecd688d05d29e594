// The ops numgate knows. Adding an op: implement numgate::Op next to its kernel and add
// one line here (see README: Adding an op).
#include <stdexcept>

#include "numgate/op.h"
#include "rmsnorm/rmsnorm_oracle.h"
#include "glu/glu_oracle.h"
// [include:glu]
#include "offset_rmsnorm/offset_rmsnorm_oracle.h"
#include "fused_add_rmsnorm/fused_add_rmsnorm_oracle.h"
// [include:rmsnorm_variants]
#include "layernorm/layernorm_oracle.h"
// [include:layernorm]
#include "softmax/softmax_oracle.h"
// [include:softmax]
#include "rope/rope_oracle.h"
// [include:rope]
#include "cross_entropy/cross_entropy_oracle.h"
// [include:cross_entropy]

namespace numgate {

const std::vector<std::unique_ptr<Op>>& all_ops() {
  static const std::vector<std::unique_ptr<Op>> ops = [] {
    std::vector<std::unique_ptr<Op>> v;
    v.push_back(std::make_unique<rmsnorm::RMSNormOp>());
    v.push_back(std::make_unique<glu::SwiGLUOp>());
    v.push_back(std::make_unique<glu::GeGLUOp>());
    // [ops:glu]
    v.push_back(std::make_unique<offset_rmsnorm::OffsetRMSNormOp>());
    v.push_back(std::make_unique<fused_add_rmsnorm::FusedAddRMSNormOp>());
    // [ops:rmsnorm_variants]
    v.push_back(std::make_unique<layernorm::LayerNormOp>());
    // [ops:layernorm]
    v.push_back(std::make_unique<softmax::SoftmaxOp>());
    // [ops:softmax]
    v.push_back(std::make_unique<rope::RopeOp>());
    // [ops:rope]
    v.push_back(std::make_unique<cross_entropy::CrossEntropyOp>());
    // [ops:cross_entropy]
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
