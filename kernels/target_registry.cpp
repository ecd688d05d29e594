// The targets numgate replays. Adding an op's target: one line here.
#include <stdexcept>

#include "target.h"

namespace numgate {
namespace rmsnorm { TargetOp make_target(); }
namespace glu { TargetOp make_swiglu_target(); TargetOp make_geglu_target(); }
// [decl:glu]
namespace offset_rmsnorm { TargetOp make_target(); }
namespace fused_add_rmsnorm { TargetOp make_target(); }
// [decl:rmsnorm_variants]
namespace layernorm { TargetOp make_target(); }
// [decl:layernorm]
namespace softmax { TargetOp make_target(); }
// [decl:softmax]
namespace rope { TargetOp make_target(); }
// [decl:rope]
namespace cross_entropy { TargetOp make_target(); }
// [decl:cross_entropy]

const TargetOp& find_target(const std::string& name) {
  static const std::vector<TargetOp> targets = {
      rmsnorm::make_target(),
      glu::make_swiglu_target(),
      glu::make_geglu_target(),
      // [targets:glu]
      offset_rmsnorm::make_target(),
      fused_add_rmsnorm::make_target(),
      // [targets:rmsnorm_variants]
      layernorm::make_target(),
      // [targets:layernorm]
      softmax::make_target(),
      // [targets:softmax]
      rope::make_target(),
      // [targets:rope]
      cross_entropy::make_target(),
      // [targets:cross_entropy]
  };
  std::string known;
  for (const auto& t : targets) {
    if (t.op == name) return t;
    known += (known.empty() ? "" : ", ") + t.op;
  }
  throw std::invalid_argument("no target registered for op '" + name + "' (known: " + known + ")");
}

}  // namespace numgate
