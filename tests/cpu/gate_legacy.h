// Test-only: the gate as it was before its speed rewrite (see gate_legacy.cpp), the
// yardstick of the bit-for-bit equivalence test and of the gate benchmark.
#pragma once

#include <cstdint>
#include <string>

#include "numgate/gate.h"

namespace numgate::legacy {

StructureCheck legacy_check_structure(const Tensor& golden, DType dtype, const Tensor& actual);
GateResult legacy_evaluate_gate(const std::string& tensor, const CaseSpec& spec, const GoldenTensor& golden,
                                const Tensor& reference, const Tensor* target);
std::int64_t legacy_ulp_distance(double a, double b, DType t);

}  // namespace numgate::legacy
