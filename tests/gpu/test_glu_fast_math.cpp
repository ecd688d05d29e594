// The fast FP32 activation path of the SwiGLU / GeGLU kernels (kernels/glu/glu_fast.h),
// exhaustively: the device's act and act' of every one of the 65536 bf16 and the 65536 fp16
// inputs, for SiLU, the erf GELU and the tanh GELU, against long-double mathematics, with
// the bound that keeps every output inside the gate's rounding envelope (decidable rounding)
// and within 1 ULP (glu_fast_check.h states it and why it suffices). Deliberately worse
// versions must fail it, each check (bound (A), bound (D), the 2^-13 limit) on its own for the
// mutant built for it (WorseApproximationsFail).
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

// Each mutant counts its failing inputs per check (glu_fast_check.h: Check), and each check
// must fire on its own for the mutant built to violate it:
//   bound (A)  act rounded to 16 significant bits (2^-16: inside the 2^-13 limit), act' untouched
//   bound (D)  SiLU's root window with expm1 to degree 3 (error ~2^-18 of act' near the
//              window's edges: inside 2^-13), act untouched
//   2^-13      the sigmoid (Gaussian tail) held in bf16 (2^-9)
// and the mutants that touch one value only must leave the other's bound and the 2^-13 limit
// silent (each check isolated). Without root windows (the direct formula next to the gelu'
// roots, fp16 inputs there lose ~10 bits) the GELUs must fail some check.
TEST(GluFastMath, WorseApproximationsFail) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  using glu_fast::Check;
  const auto both = [](Fn f, Variant v) {  // bf16 and fp16 inputs together
    glu_fast::Result sum;
    for (bool fp16 : {false, true}) {
      const glu_fast::Result r = run(f, v, fp16);
      sum.failures += r.failures;
      for (int k = 0; k < glu_fast::kChecks; ++k) sum.failed[k] += r.failed[k];
    }
    return sum;
  };
  for (Fn f : {Fn::silu, Fn::gelu_erf, Fn::gelu_tanh}) {
    const glu_fast::Result r = both(f, Variant::mutant_act_16_bits);
    EXPECT_GT(r.failed_by(Check::bound_act), 0) << glu_fast::fn_name(f) << ": act in 16 bits passed bound (A)";
    EXPECT_EQ(r.failed_by(Check::rel_limit), 0) << glu_fast::fn_name(f) << ": act in 16 bits is inside 2^-13";
    EXPECT_EQ(r.failed_by(Check::bound_dact), 0) << glu_fast::fn_name(f) << ": act' is untouched";
    EXPECT_EQ(r.failed_by(Check::structure), 0) << glu_fast::fn_name(f);
  }
  {
    const glu_fast::Result r = both(Fn::silu, Variant::mutant_silu_window_degree3);
    EXPECT_GT(r.failed_by(Check::bound_dact), 0) << "silu: the degree-3 root window passed bound (D)";
    EXPECT_EQ(r.failed_by(Check::rel_limit), 0) << "silu: the degree-3 window is inside 2^-13";
    EXPECT_EQ(r.failed_by(Check::bound_act), 0) << "silu: act is untouched";
    EXPECT_EQ(r.failed_by(Check::structure), 0);
  }
  for (Fn f : {Fn::silu, Fn::gelu_erf, Fn::gelu_tanh})
    for (bool fp16 : {false, true})
      EXPECT_GT(run(f, Variant::mutant_sigmoid_bf16, fp16).failed_by(Check::rel_limit), 0)
          << glu_fast::fn_name(f) << (fp16 ? " fp16" : " bf16") << ": the bf16-sigmoid mutant passed 2^-13";
  for (Fn f : {Fn::gelu_erf, Fn::gelu_tanh})
    EXPECT_GT(both(f, Variant::mutant_no_window).failures, 0)
        << glu_fast::fn_name(f) << ": the mutant without root window passed";
}

}  // namespace
}  // namespace numgate::testing
