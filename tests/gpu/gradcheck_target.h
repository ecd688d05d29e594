// Gate 1 on the GPU (SPEC §6): the target's double kernels differentiated by central
// differences of its own forward kernel, against its backward kernel.
//
// The case is promoted to FP64: its dtype becomes fp64 and its inputs are the case's own,
// drawn in its dtype and widened exactly, so the points are the CPU gate 1's. The
// promoted case is an FP64 case throughout: the double kernels, the golden's rounding
// bounds and the op's declared non-differentiable elements all read it as one (softmax's
// fp16 mask value -65504, a mask in an fp16 case, is an ordinary bias in FP64).
// target_fp64() turns an op's target into the GoldenFn that numgate::gradcheck
// differentiates (numgate/gradcheck.h): every input is uploaded in its declared dtype for
// the FP64 case (index tensors stay i64), the target's passes are launched on the whole
// case (the Forward pass alone for the perturbed evaluations), and every tensor they
// write is downloaded as the value. The rounding bounds (abs_terms, envelope_length) that
// the gradcheck tolerance is built from are the golden's at the same point: the double
// kernels evaluate the same formulas in FP64, whose error bound gamma_k * sum|terms|
// holds for any order of the k terms.
//
// So a backward kernel that disagrees with its own forward kernel fails here even when
// the golden shares its mistake (gate 2 compares target, reference and golden with one
// another and cannot see an error all three make).
#pragma once

#include <memory>

#include "numgate/gradcheck.h"
#include "target.h"

namespace numgate::testing {

/// The target's double kernels as gradcheck's GoldenFn: `all_passes` every pass of the
/// descriptor in order (the gradients); otherwise the Forward pass only. Throws
/// std::runtime_error naming the op, case, pass and CUDA error when a launch or a copy
/// fails, and std::logic_error when a pass writes a tensor the golden does not return.
/// Device buffers are kept between calls (and uploads skipped for unchanged inputs), so
/// one function object serves the thousands of evaluations of a case. Each function
/// object launches on its own non-blocking stream: different objects may be called from
/// different host threads at once (one object from one thread at a time).
GoldenFn target_fp64(const Op& op, const TargetOp& target, bool all_passes);

/// Gate 1 of one case on the target's double kernels: gradcheck of the case promoted to
/// FP64 with the two functions above; implementation "target".
GradcheckResult gradcheck_target(const Op& op, const TargetOp& target, const CaseSpec& c,
                                 const GradcheckOptions& opt = {});

}  // namespace numgate::testing
