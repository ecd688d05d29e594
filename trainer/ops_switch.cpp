// numgate-train — the per-op switch and the mutant names (model.h), host code.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "model.h"

namespace numgate::train {

const char* op_name(OpId op) {
  switch (op) {
    case OpId::rmsnorm: return "rmsnorm";
    case OpId::rope: return "rope";
    case OpId::softmax: return "softmax";
    case OpId::swiglu: return "swiglu";
    case OpId::cross_entropy: return "cross_entropy";
    case OpId::dropout_add: return "dropout_add";
  }
  return "?";
}

TargetSet TargetSet::parse(const std::string& list) {
  if (list == "all") return all();
  if (list == "none") return none();
  unsigned bits = 0;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    bool found = false;
    for (OpId op : kOps)
      if (name == op_name(op)) {
        bits |= 1u << static_cast<unsigned>(op);
        found = true;
      }
    if (!found) {
      std::string known;
      for (OpId op : kOps) known += std::string(known.empty() ? "" : ", ") + op_name(op);
      throw std::invalid_argument(fmt::format("--target: unknown op '{}' (known: all, none, {})", name, known));
    }
    start = end + 1;
  }
  return TargetSet(bits);
}

std::string TargetSet::str() const {
  if (*this == all()) return "all";
  if (*this == none()) return "none";
  std::string s;
  for (OpId op : kOps)
    if (has(op)) s += std::string(s.empty() ? "" : ",") + op_name(op);
  return s;
}

const char* mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::dropout_offset_fixed_across_steps: return "dropout_offset_fixed_across_steps";
    case Mutant::dropout_offset_fixed_across_layers: return "dropout_offset_fixed_across_layers";
    case Mutant::rmsnorm_eps: return "rmsnorm_eps";
    case Mutant::causal_off_by_one: return "causal_off_by_one";
    case Mutant::padding_not_ignored: return "padding_not_ignored";
  }
  return "?";
}

Mutant parse_mutant(const std::string& name) {
  if (name == "none") return Mutant::none;
  std::string known = "none";
  for (Mutant m : kMutants) {
    if (name == mutant_name(m)) return m;
    known += std::string(", ") + mutant_name(m);
  }
  throw std::invalid_argument(fmt::format("--mutant: unknown mutant '{}' (known: {})", name, known));
}

}  // namespace numgate::train
