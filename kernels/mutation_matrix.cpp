// The mutation matrix's table (mutation_matrix.h): one line per entry, one line per cell
// without one.
#include "mutation_matrix.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "cross_entropy/cross_entropy_oracle.h"
#include "dropout_add/dropout_add_oracle.h"
#include "fused_add_rmsnorm/fused_add_rmsnorm_oracle.h"
#include "glu/glu_oracle.h"
#include "layernorm/layernorm_oracle.h"
#include "numgate/dtype.h"
#include "offset_rmsnorm/offset_rmsnorm_oracle.h"
#include "rmsnorm/rmsnorm_oracle.h"
#include "rope/rope_oracle.h"
#include "softmax/softmax_oracle.h"

namespace numgate::matrix {

const char* class_name(Class c) {
  switch (c) {
    case Class::reduction_order: return "reduction order";
    case Class::low_precision_intermediates: return "FP32 vs low-precision intermediates";
    case Class::atomic_add_order: return "atomic-add order";
    case Class::cast_timing: return "cast timing";
    case Class::epsilon_placement: return "epsilon placement";
    case Class::rng_stream: return "RNG stream";
    case Class::mask_boundary: return "mask/boundary off-by-one";
  }
  return "?";
}

const char* check_name(Check c) {
  switch (c) {
    case Check::max_abs_gate: return "max-abs gate";
    case Check::decidable_rounding: return "decidable rounding";
    case Check::structure: return "structure";
    case Check::ulp_limit: return "ULP limit";
    case Check::envelope: return "envelope";
    case Check::length_sweep: return "length sweep";
    case Check::error_distribution: return "error distribution";
    case Check::poison: return "poison / two launches";
    case Check::guard_bands: return "guard bands";
    case Check::passes: return "passes (legitimate)";
  }
  return "?";
}

std::vector<Check> checks_fired(const GateResult& r) {
  std::vector<Check> out;
  if (!r.target_structure.ok) out.push_back(Check::structure);
  if (r.rounding_rule_valid && r.target_misrounded > 0) out.push_back(Check::decidable_rounding);
  if (r.params.ulp_limit >= 0 && r.max_ulp > r.params.ulp_limit) out.push_back(Check::ulp_limit);
  // The max-abs threshold, and where the order evidence was consulted, its threshold too.
  if (r.gate_valid && r.target_error > r.threshold && (r.order_evaluations == 0 || r.target_error > r.order_threshold))
    out.push_back(Check::max_abs_gate);
  if (!r.gate_valid && !r.target_in_envelope) out.push_back(Check::envelope);
  // SPEC §4's fallback (numgate/gate.h: the length sweep and the error distribution).
  if (r.verdict == Verdict::fail && r.decided_by.find("error distribution (a bias only the target has)") != std::string::npos)
    out.push_back(Check::error_distribution);
  if (r.verdict == Verdict::fail && (r.decided_by.find("length sweep (the target's error grows faster") != std::string::npos ||
                                     r.decided_by.rfind("length sweep (", 0) == 0))
    out.push_back(Check::length_sweep);
  return out;
}

namespace {

using Outputs = std::function<std::map<std::string, Tensor>(const CaseData&)>;

// A generic cast mutant for every op: every gated tensor is the golden rounded toward zero
// (a truncating conversion to the output dtype, e.g. bf16 as the high half of an fp32).
std::map<std::string, Tensor> truncated_golden(const CaseData& c) {
  std::map<std::string, Tensor> out;
  for (const auto& t : c.output_names) {
    const Tensor& g = c.golden.at(t).value;
    Tensor o(c.spec.dtype, g.shape);
    for (std::size_t i = 0; i < g.numel(); ++i) o.set(i, round_toward_zero(g.get(i), c.spec.dtype));
    out[t] = std::move(o);
  }
  return out;
}

// A generic boundary mutant: in every row-wise output (Layout::rows), the elements of each
// row past its last full 16-byte vector come out as 0 (a vectorized kernel whose scalar tail
// is masked off). Only rows whose length is not a multiple of the vector width change.
std::map<std::string, Tensor> zero_vector_tail(const CaseData& c) {
  std::map<std::string, Tensor> out = c.reference;
  const OpDescriptor& d = find_op(c.op).descriptor();
  const std::int64_t rows = d.rows(c.spec);
  for (auto& [t, o] : out) {
    if (d.tensor(t).layout != Layout::rows || rows <= 0) continue;
    const std::size_t len = o.numel() / static_cast<std::size_t>(rows), vec = 16 / dtype_size(o.dtype);
    const std::size_t tail = len % vec;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::size_t i = len - tail; i < len; ++i) o.set(static_cast<std::size_t>(r) * len + i, 0.0);
  }
  return out;
}

template <class M>
Outputs variant(std::map<std::string, Tensor> (*f)(const CaseSpec&, const std::map<std::string, Tensor>&, M,
                                                   const SumPolicy&),
                M m) {
  return [f, m](const CaseData& c) { return f(c.spec, c.inputs, m, SumPolicy{}); };
}
Outputs glu_variant(glu::Mutant m) {
  return [m](const CaseData& c) { return glu::reference_variant(c.op, c.spec, c.inputs, m); };
}
Outputs dropout_variant(dropout_add::Mutant m) {
  return [m](const CaseData& c) { return dropout_add::reference_variant(c.spec, c.inputs, m); };
}

constexpr const char* kCpuProof = "MutationMatrix.CpuEntriesAreCaughtByTheirCheck";

Entry cpu(std::string op, Class cls, std::string mutant, Check check, Outputs outputs) {
  return {std::move(op), cls, std::move(mutant), Where::cpu, check, kCpuProof, std::move(outputs)};
}
Entry gpu(std::string op, Class cls, std::string mutant, Check check, std::string proof) {
  return {std::move(op), cls, std::move(mutant), Where::gpu, check, std::move(proof), {}};
}
Entry legitimate(std::string op, Class cls, std::string what, std::string proof, Outputs outputs = {}) {
  return {std::move(op), cls, std::move(what), Where::cpu, Check::passes, std::move(proof), std::move(outputs)};
}
// A legitimate evaluation the matrix runs itself: the op's reference under a summation
// policy held out of the order evidence (blocked by 256, FMA on).
Outputs held_out_order() {
  return [](const CaseData& c) { return find_op(c.op).reference_under(c.spec, c.inputs, {SumOrder::blocked256, true}); };
}
// The GLU reference's scalar code in FP64 math for bf16/fp16 outputs (more accurate than its
// FP32 math); fp32 outputs already use FP64 math (glu_oracle.h), so there it is the reference.
Outputs glu_in_fp64_math() {
  return [](const CaseData& c) {
    if (c.spec.dtype == DType::fp32 || c.spec.dtype == DType::fp64) return c.reference;
    return glu::reference_in_math(c.op, c.spec, c.inputs, DType::fp64);
  };
}

}  // namespace

const std::vector<Entry>& entries() {
  using C = Class;
  using K = Check;
  namespace rms = rmsnorm;
  static const std::vector<Entry> table = [] {
    std::vector<Entry> v = {
        // ---- rmsnorm
        legitimate("rmsnorm", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.RMSNorm", held_out_order()),
        cpu("rmsnorm", C::low_precision_intermediates, "bf16_sum_of_squares", K::max_abs_gate,
            variant(rms::reference_variant, rms::Mutant::bf16_sum_of_squares)),
        gpu("rmsnorm", C::low_precision_intermediates, "kernel bf16_sum_of_squares", K::max_abs_gate,
            "ReplayMutants.Bf16SumOfSquaresIsCaughtByTheGate"),
        gpu("rmsnorm", C::atomic_add_order, "kernel dw atomics in bf16 (output_dtype_atomics)", K::decidable_rounding,
            "NondeterministicMutants.AtomicsInTheOutputDtypeAreCaught"),
        gpu("rmsnorm", C::atomic_add_order, "kernel dw lost update (plain read-modify-write)", K::max_abs_gate,
            "NondeterministicMutants.LostUpdatesAreCaught"),
        gpu("rmsnorm", C::atomic_add_order, "kernel dw FP32 atomics x 5 launches (legitimate)", K::passes,
            "NondeterministicMutants.FP32AtomicsPassEveryLaunch"),
        cpu("rmsnorm", C::cast_timing, "cast_before_weight: y = bf16(w * bf16(x r))", K::decidable_rounding,
            variant(rms::reference_variant, rms::Mutant::cast_before_weight)),
        cpu("rmsnorm", C::epsilon_placement, "eps_outside_sqrt", K::max_abs_gate,
            variant(rms::reference_variant, rms::Mutant::eps_outside_sqrt)),
        gpu("rmsnorm", C::epsilon_placement, "kernel eps_outside_sqrt", K::max_abs_gate,
            "ReplayMutants.EpsilonOutsideTheSquareRootIsCaughtByTheGate"),
        gpu("rmsnorm", C::epsilon_placement, "launch: eps 1e-5 instead of the case's (gate 3's rmsnorm_eps)",
            K::max_abs_gate, "FamilyMutants.RmsnormWithAnotherEpsilonIsCaught"),
        gpu("rmsnorm", C::mask_boundary, "kernel skip_last_element", K::poison,
            "ReplayMutants.UnwrittenElementIsCaughtByPoison"),
        gpu("rmsnorm", C::mask_boundary, "kernel write_past_end", K::guard_bands,
            "ReplayMutants.OutOfBoundsWriteIsCaughtByGuardBands"),
        // ---- offset_rmsnorm
        legitimate("offset_rmsnorm", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.OffsetRMSNorm", held_out_order()),
        cpu("offset_rmsnorm", C::cast_timing, "one_plus_w_in_weight_dtype", K::max_abs_gate,
            variant(offset_rmsnorm::reference_variant, offset_rmsnorm::Mutant::one_plus_w_in_weight_dtype)),
        cpu("offset_rmsnorm", C::epsilon_placement, "eps_outside_sqrt", K::max_abs_gate,
            variant(offset_rmsnorm::reference_variant, offset_rmsnorm::Mutant::eps_outside_sqrt)),
        cpu("offset_rmsnorm", C::low_precision_intermediates, "bf16_sum_of_squares", K::max_abs_gate,
            variant(offset_rmsnorm::reference_variant, offset_rmsnorm::Mutant::bf16_sum_of_squares)),
        // ---- fused_add_rmsnorm
        legitimate("fused_add_rmsnorm", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.FusedAddRMSNorm", held_out_order()),
        cpu("fused_add_rmsnorm", C::cast_timing, "variance_from_rounded_residual", K::max_abs_gate,
            variant(fused_add_rmsnorm::reference_variant, fused_add_rmsnorm::Mutant::variance_from_rounded_residual)),
        cpu("fused_add_rmsnorm", C::cast_timing, "residual_out_toward_zero", K::decidable_rounding,
            variant(fused_add_rmsnorm::reference_variant, fused_add_rmsnorm::Mutant::residual_out_toward_zero)),
        cpu("fused_add_rmsnorm", C::epsilon_placement, "eps_outside_sqrt", K::max_abs_gate,
            variant(fused_add_rmsnorm::reference_variant, fused_add_rmsnorm::Mutant::eps_outside_sqrt)),
        cpu("fused_add_rmsnorm", C::low_precision_intermediates, "bf16_sum_of_squares", K::max_abs_gate,
            variant(fused_add_rmsnorm::reference_variant, fused_add_rmsnorm::Mutant::bf16_sum_of_squares)),
        // ---- layernorm
        legitimate("layernorm", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.LayerNorm", held_out_order()),
        cpu("layernorm", C::reduction_order, "naive_variance: one pass E[x^2] - E[x]^2", K::max_abs_gate,
            variant(layernorm::reference_variant, layernorm::Mutant::naive_variance)),
        cpu("layernorm", C::epsilon_placement, "eps_outside_sqrt", K::max_abs_gate,
            variant(layernorm::reference_variant, layernorm::Mutant::eps_outside_sqrt)),
        cpu("layernorm", C::low_precision_intermediates, "mean_in_bf16 (the mean rounded before centering)",
            K::max_abs_gate, variant(layernorm::reference_variant, layernorm::Mutant::mean_in_bf16)),
        cpu("layernorm", C::mask_boundary, "padded_lanes counted in mean and variance", K::max_abs_gate,
            variant(layernorm::reference_variant, layernorm::Mutant::padded_lanes)),
        // ---- swiglu, geglu
        legitimate("swiglu", C::low_precision_intermediates, "bf16/fp16: the scalar code in FP64 math (the reference: FP32 math)",
                   "LegitimateVariation.GluInTheOtherMathPrecisionPassesDecidableRounding", glu_in_fp64_math()),
        cpu("swiglu", C::low_precision_intermediates, "sigmoid_in_bf16", K::decidable_rounding,
            glu_variant(glu::Mutant::sigmoid_in_bf16)),
        cpu("swiglu", C::cast_timing, "activation_in_bf16: y = bf16(silu(a)) * b", K::decidable_rounding,
            glu_variant(glu::Mutant::activation_in_bf16)),
        gpu("swiglu", C::low_precision_intermediates, "kernel: sigmoid held in bf16 (FP32 control passes)",
            K::decidable_rounding, "FamilyMutants.SwigluSigmoidInBf16IsCaughtByDecidableRounding"),
        legitimate("geglu", C::low_precision_intermediates, "bf16/fp16: the scalar code in FP64 math (the reference: FP32 math)",
                   "LegitimateVariation.GluInTheOtherMathPrecisionPassesDecidableRounding", glu_in_fp64_math()),
        cpu("geglu", C::low_precision_intermediates, "activation_in_bf16: gelu(a) held in bf16", K::decidable_rounding,
            glu_variant(glu::Mutant::activation_in_bf16)),
        // ---- softmax
        legitimate("softmax", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.Softmax", held_out_order()),
        cpu("softmax", C::mask_boundary, "causal_top_left (j <= i instead of bottom-right)", K::max_abs_gate,
            variant(softmax::reference_variant, softmax::Mutant::causal_top_left)),
        cpu("softmax", C::mask_boundary, "nan_fully_masked (no empty-row rule)", K::structure,
            variant(softmax::reference_variant, softmax::Mutant::nan_fully_masked)),
        cpu("softmax", C::low_precision_intermediates, "exp_in_output_dtype (exp(z - max) stored before the sum)",
            K::decidable_rounding, variant(softmax::reference_variant, softmax::Mutant::exp_in_output_dtype)),
        gpu("softmax", C::mask_boundary, "launch: causal mask dropped (mask_mode none)", K::structure,
            "FamilyMutants.SoftmaxWithTheCausalMaskDroppedIsCaught"),
        gpu("softmax", C::mask_boundary, "launch: causal mask one key too wide (gate 3's causal_off_by_one)",
            K::structure, "FamilyMutants.SoftmaxWithTheCausalMaskOffByOneIsCaught"),
        // ---- rope
        gpu("rope", C::mask_boundary, "launch: every position + 1", K::max_abs_gate,
            "FamilyMutants.RopeWithPositionsOffByOneIsCaught"),
        cpu("rope", C::low_precision_intermediates, "angle_in_bf16", K::max_abs_gate,
            variant(rope::reference_variant, rope::Mutant::angle_in_bf16)),
        cpu("rope", C::low_precision_intermediates, "angle_in_fp16", K::max_abs_gate,
            variant(rope::reference_variant, rope::Mutant::angle_in_fp16)),
        cpu("rope", C::mask_boundary, "inv_freq_wrong_head_dim", K::max_abs_gate,
            variant(rope::reference_variant, rope::Mutant::inv_freq_wrong_head_dim)),
        // ---- cross_entropy
        legitimate("cross_entropy", C::reduction_order, "FP32 sums blocked by 256 with FMA (held out of the order evidence; LegitimateVariation: 16 policies x 200 seeds)",
                   "LegitimateVariation.CrossEntropy", held_out_order()),
        cpu("cross_entropy", C::mask_boundary, "mean_over_all_tokens (ignore_index counted)", K::max_abs_gate,
            variant(cross_entropy::reference_variant, cross_entropy::Mutant::mean_over_all_tokens)),
        cpu("cross_entropy", C::mask_boundary, "smoothing_counts_ignored", K::max_abs_gate,
            variant(cross_entropy::reference_variant, cross_entropy::Mutant::smoothing_counts_ignored)),
        cpu("cross_entropy", C::low_precision_intermediates, "probs_in_logits_dtype (p rounded before p - onehot)",
            K::decidable_rounding,
            variant(cross_entropy::reference_variant, cross_entropy::Mutant::probs_in_logits_dtype)),
        gpu("cross_entropy", C::mask_boundary, "launch: targets shifted by one token", K::max_abs_gate,
            "FamilyMutants.CrossEntropyWithTargetsShiftedByOneTokenIsCaught"),
        // ---- dropout_add (the one op that draws random numbers: the RNG class applies)
        cpu("dropout_add", C::rng_stream, "stream_ignores_offset (philox_offset dropped from the counter)",
            K::max_abs_gate, dropout_variant(dropout_add::Mutant::stream_ignores_offset)),
        cpu("dropout_add", C::rng_stream, "counter_per_element (ctr = i instead of i >> 2)", K::max_abs_gate,
            dropout_variant(dropout_add::Mutant::counter_per_element)),
        cpu("dropout_add", C::rng_stream, "lanes_permuted (lane 3 - (i & 3) of group i >> 2)", K::max_abs_gate,
            dropout_variant(dropout_add::Mutant::lanes_permuted)),
        cpu("dropout_add", C::rng_stream, "key_high_word_dropped (key = {lo32(seed), 0}; seen where seed >= 2^32)",
            K::max_abs_gate, dropout_variant(dropout_add::Mutant::key_high_word_dropped)),
        cpu("dropout_add", C::rng_stream,
            "threshold_strict (keep iff r > t; differs only where r == t: caught on the tie case only)",
            K::max_abs_gate, dropout_variant(dropout_add::Mutant::threshold_strict)),
        gpu("dropout_add", C::rng_stream, "launch: philox_offset + 1", K::max_abs_gate,
            "FamilyMutants.DropoutAddWithTheOffsetPlusOneIsCaught"),
        gpu("dropout_add", C::rng_stream,
            "kernels: counter per element, lanes permuted, key high word dropped (unbroken control passes)",
            K::max_abs_gate, "FamilyMutants.DropoutAddKernelStreamMutantsAreCaught"),
        cpu("dropout_add", C::mask_boundary,
            "stream_restarts_each_row (what a kernel ignoring element_offset gives launched row by row)",
            K::max_abs_gate, dropout_variant(dropout_add::Mutant::stream_restarts_each_row)),
        cpu("dropout_add", C::mask_boundary, "mask_by_multiplication (x m s, not a select: dropped NaN / Inf leak)",
            K::structure, dropout_variant(dropout_add::Mutant::mask_by_multiplication)),
        gpu("dropout_add", C::mask_boundary, "launch: every row alone with element_offset 0", K::max_abs_gate,
            "FamilyMutants.DropoutAddIgnoringElementOffsetIsCaught"),
        cpu("dropout_add", C::low_precision_intermediates, "scale_in_bf16 (s rounded to bf16)", K::max_abs_gate,
            dropout_variant(dropout_add::Mutant::scale_in_bf16)),
        cpu("dropout_add", C::cast_timing, "product_in_dtype: y = T(T(x s) + residual)", K::decidable_rounding,
            dropout_variant(dropout_add::Mutant::product_in_dtype)),
    };
    // The generic boundary mutant, on the row-wise ops with vectorized tails.
    for (const char* op : {"rmsnorm", "offset_rmsnorm", "fused_add_rmsnorm", "layernorm", "swiglu", "geglu", "dropout_add"})
      v.push_back(cpu(op, C::mask_boundary, "row tail past the last 16-byte vector computed as 0", K::max_abs_gate,
                      zero_vector_tail));
    // The generic cast mutant, on every op.
    for (const char* op : {"rmsnorm", "offset_rmsnorm", "fused_add_rmsnorm", "layernorm", "swiglu", "geglu", "softmax",
                           "rope", "cross_entropy", "dropout_add"})
      v.push_back(cpu(op, C::cast_timing, "every output rounded toward zero (truncating conversion)",
                      K::decidable_rounding, truncated_golden));
    std::stable_sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.op, a.cls) < std::tie(b.op, b.cls);
    });
    return v;
  }();
  return table;
}

const std::vector<Reason>& reasons() {
  using C = Class;
  static const std::vector<Reason> table = [] {
    std::vector<Reason> v;
    auto na = [&](const std::string& op, C c, const std::string& why) { v.push_back({op, c, false, why}); };
    auto gap = [&](const std::string& op, C c, const std::string& why) { v.push_back({op, c, true, why}); };
    const char* no_rng = "the op draws no random numbers (dropout_add is the op that does)";
    for (const char* op : {"rmsnorm", "offset_rmsnorm", "fused_add_rmsnorm", "layernorm", "swiglu", "geglu", "softmax",
                           "rope", "cross_entropy"})
      na(op, C::rng_stream, no_rng);
    const char* elementwise = "elementwise: no reduction";
    const char* no_atomics = "no nondeterministic implementation of this op is registered (the class is exercised "
                             "on rmsnorm [atomic_dw])";
    const char* no_eps = "no epsilon in the formula";
    na("offset_rmsnorm", C::atomic_add_order, no_atomics);
    na("fused_add_rmsnorm", C::atomic_add_order, no_atomics);
    na("layernorm", C::atomic_add_order, no_atomics);
    na("softmax", C::atomic_add_order, no_atomics);
    na("cross_entropy", C::atomic_add_order, no_atomics);
    for (const char* op : {"swiglu", "geglu", "rope"}) {
      na(op, C::atomic_add_order, elementwise);
      na(op, C::epsilon_placement, no_eps);
    }
    na("rope", C::reduction_order, "each output is one rotation of two inputs: no reduction");
    na("swiglu", C::reduction_order, elementwise);
    na("geglu", C::reduction_order, elementwise);
    na("softmax", C::epsilon_placement, no_eps);
    na("cross_entropy", C::epsilon_placement, no_eps);
    na("dropout_add", C::reduction_order, elementwise);
    na("dropout_add", C::atomic_add_order, elementwise);
    na("dropout_add", C::epsilon_placement, no_eps);
    return v;
  }();
  return table;
}

Outcome run_cpu_entry(const Entry& e, const std::vector<CaseData>& committed) {
  Outcome o;
  if (e.check == Check::passes) {
    // A legitimate evaluation: proven when no case gives a FAIL or INCONCLUSIVE (o.caught).
    std::string first;
    for (const CaseData& c : committed) {
      if (c.op != e.op) continue;
      ++o.cases;
      const std::map<std::string, Tensor> out = e.outputs(c);
      const CaseGate gate(find_op(c.op), c);
      bool failed = false;
      for (const auto& t : c.output_names) {
        const GateResult r = gate(t, &out.at(t));
        if (r.verdict == Verdict::pass || r.verdict == Verdict::pass_with_limitations) continue;
        failed = true;
        if (first.empty()) first = c.spec.name + ", " + t + ": " + std::string(verdict_name(r.verdict)) + " (" + r.decided_by + ")";
      }
      o.failed += failed;
    }
    o.caught = o.cases > 0 && o.failed == 0;
    o.detail = o.cases == 0 ? "no case of the op" : o.failed == 0 ? "passes on every case" : "FALSE FAIL: " + first;
    return o;
  }
  for (const CaseData& c : committed) {
    if (c.op != e.op) continue;
    ++o.cases;
    const std::map<std::string, Tensor> out = e.outputs(c);
    bool failed = false;
    const CaseGate gate(find_op(c.op), c);  // with the order evidence, as the replay gates
    for (const auto& t : c.output_names) {
      const GateResult r = gate(t, &out.at(t));
      if (r.verdict != Verdict::fail) continue;
      failed = true;
      const std::vector<Check> fired = checks_fired(r);
      const bool by_declared = std::find(fired.begin(), fired.end(), e.check) != fired.end();
      if (by_declared && !o.caught) {
        o.caught = true;
        std::string checks;
        for (Check k : fired) checks += std::string(checks.empty() ? "" : ", ") + check_name(k);
        o.detail = c.spec.name + ", " + t + ": " + checks;
        if (r.rounding_rule_valid && r.target_misrounded > 0)
          o.detail += " (" + std::to_string(r.target_misrounded) + " of " + std::to_string(r.decidable) +
                      " decidable misrounded)";
      }
    }
    if (failed) ++o.failed;
  }
  if (!o.caught)
    o.detail = o.cases == 0 ? "no committed case of the op"
                            : "FAIL on " + std::to_string(o.failed) + " of " + std::to_string(o.cases) +
                                  " cases, never by the declared check (" + check_name(e.check) + ")";
  return o;
}

}  // namespace numgate::matrix
