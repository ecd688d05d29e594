// The fast FP32 activation path of the SwiGLU / GeGLU kernels (kernels/glu/glu_fast.h),
// exhaustively: the device's act and act' of every one of the 65536 bf16 and the 65536 fp16
// inputs, for SiLU, the erf GELU and the tanh GELU, against long-double mathematics, with
// the bound that keeps every output inside the gate's rounding envelope (decidable rounding)
// and within 1 ULP (glu_fast_check.h states it and why it suffices). Deliberately worse
// versions (the root windows of act' removed; the sigmoid rounded to bf16) must fail it.
// The accurate path (glu_math.h, the reference's functions) is evaluated the same way and
// reported beside. Runs when swiglu or geglu is selected; skipped without a device.
#include <gtest/gtest.h>

#include <iostream>

#include "glu_fast_eval.h"
#include "replay.h"

namespace numgate::testing {
namespace {

using glu_fast::Fn;
using glu_fast::Variant;

std::string skip_reason() {
  if (!selected("swiglu") && !selected("geglu")) return "neither swiglu nor geglu selected by --op";
  return config().have_device ? "" : config().no_device_reason;
}

glu_fast::Result run(Fn f, Variant v, bool fp16) {
  const std::vector<float> a = glu_fast::all_inputs(fp16);
  std::vector<float> af, ac, dc;
  const cudaError_t e = glu_fast::evaluate(f, v, a, af, ac, dc);
  EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  const glu_fast::Result r = glu_fast::check(f, a, af, ac, dc);
  std::cout << "[ glu fast math ] " << glu_fast::variant_name(v) << " " << r.summary(fp16 ? "fp16" : "bf16", f)
            << (r.failures ? "; first: " + r.first_failure : "") << "\n";
  return r;
}

TEST(GluFastMath, EveryBf16AndFp16InputWithinTheEnvelope) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  for (bool fp16 : {false, true})
    for (Fn f : {Fn::silu, Fn::gelu_erf, Fn::gelu_tanh}) {
      const glu_fast::Result r = run(f, Variant::fast, fp16);
      EXPECT_EQ(r.failures, 0) << r.first_failure;
      EXPECT_EQ(r.checked, 65536);
      run(f, Variant::accurate, fp16);  // for comparison only
    }
}

TEST(GluFastMath, WorseApproximationsFail) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  // No root window: act' cancels next to the gelu' roots (fp16 inputs there lose ~10 bits).
  for (Fn f : {Fn::gelu_erf, Fn::gelu_tanh}) {
    std::int64_t failures = 0;
    for (bool fp16 : {false, true}) failures += run(f, Variant::mutant_no_window, fp16).failures;
    EXPECT_GT(failures, 0) << glu_fast::fn_name(f) << ": the mutant without root window passed";
  }
  // The sigmoid (Gaussian tail) in bf16: 2^-9 relative, far outside the bound.
  for (Fn f : {Fn::silu, Fn::gelu_erf, Fn::gelu_tanh})
    for (bool fp16 : {false, true})
      EXPECT_GT(run(f, Variant::mutant_sigmoid_bf16, fp16).failures, 0)
          << glu_fast::fn_name(f) << (fp16 ? " fp16" : " bf16") << ": the bf16-sigmoid mutant passed";
}

}  // namespace
}  // namespace numgate::testing
