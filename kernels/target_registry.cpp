// The targets numgate replays. Adding an op's target: one line here.
#include <stdexcept>

#include "target.h"

namespace numgate {
namespace rmsnorm { TargetOp make_target(); }
// [decl:glu]
// [decl:rmsnorm_variants]
// [decl:layernorm]

const TargetOp& find_target(const std::string& name) {
  static const std::vector<TargetOp> targets = {
      rmsnorm::make_target(),
      // [targets:glu]
      // [targets:rmsnorm_variants]
      // [targets:layernorm]
  };
  std::string known;
  for (const auto& t : targets) {
    if (t.op == name) return t;
    known += (known.empty() ? "" : ", ") + t.op;
  }
  throw std::invalid_argument("no target registered for op '" + name + "' (known: " + known + ")");
}

}  // namespace numgate
