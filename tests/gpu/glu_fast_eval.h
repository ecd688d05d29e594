// Device evaluation of the GLU activations for the exhaustive test (test_glu_fast_math.cpp):
// the kernels' fast FP32 path (kernels/glu/glu_fast.h), deliberately worse versions of it
// (mutants the test must reject) and the accurate path (glu_math.h) for comparison.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "glu_fast_check.h"

namespace numgate::testing::glu_fast {

enum class Variant {
  fast,              ///< glu_fast.h as the kernels use it (exp by MUFU.EX2)
  mutant_no_window,  ///< mutant: the root windows of act' removed (direct formula everywhere)
  mutant_sigmoid_bf16,  ///< mutant: 1/(1+e) (SiLU, tanh GELU) or Phi(-|x|) (erf GELU) rounded to bf16
  mutant_act_16_bits,   ///< mutant: act (only) rounded to 16 significant bits: <= 2^-16 relative,
                        ///< inside the 2^-13 limit, outside bound (A); act' untouched
  mutant_silu_window_degree3,  ///< mutant: SiLU's root window with expm1 to degree 3 (glu_fast.h
                               ///< Window::silu_degree3): act' only, outside bound (D) near the
                               ///< window's edges; the GELUs as `fast`
  accurate,          ///< glu_math.h in FP32 (the CPU reference's functions), for comparison
};
const char* variant_name(Variant v);

/// act (forward-only function), act and act' (joint function) of `a` on the device.
cudaError_t evaluate(Fn f, Variant v, const std::vector<float>& a, std::vector<float>& act_fwd,
                     std::vector<float>& act, std::vector<float>& dact);

}  // namespace numgate::testing::glu_fast
