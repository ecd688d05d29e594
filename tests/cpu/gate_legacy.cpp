// Test-only: a verbatim copy of evaluate_gate / check_structure (and their helpers) as
// they were before the gate was rewritten for speed (fixtures/src/gate.cpp at 7cd7d4c),
// so that tests can require the new implementation to give the same result bit for bit.
// Do not "fix" or speed up anything here: this is the yardstick.
#include "gate_legacy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <sstream>
#include <thread>
#include <vector>

namespace numgate::legacy {

namespace {
const char* kind_of(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return "finite";
}
}  // namespace

namespace {
// Position of a finite value on the ordered line of t-representable values (0 for +-0).
std::int64_t ordinal(double v, DType t) {
  std::uint64_t bits = 0, sign = 0;
  switch (t) {
    case DType::fp64: { std::memcpy(&bits, &v, 8); sign = bits >> 63; bits &= ~(1ull << 63); break; }
    case DType::fp32: { bits = fp32_bits(v); sign = bits >> 31; bits &= 0x7FFFFFFFull; break; }
    case DType::bf16: { bits = bf16_bits(v); sign = bits >> 15; bits &= 0x7FFFull; break; }
    case DType::fp16: { bits = fp16_bits(v); sign = bits >> 15; bits &= 0x7FFFull; break; }
    case DType::i64: throw std::invalid_argument("ULP distance: i64 (index) tensors are never gated");
  }
  const auto m = static_cast<std::int64_t>(bits);
  return sign ? -m : m;
}
}  // namespace

std::int64_t legacy_ulp_distance(double a, double b, DType t) {
  const std::int64_t d = ordinal(a, t) - ordinal(b, t);
  return d < 0 ? -d : d;
}

/// Runs f(lo, hi) on contiguous chunks of [0, n), in parallel on up to
/// hardware_concurrency() threads (one chunk below 2^16 elements), and returns the
/// per-chunk results in index order, so that merging them in order gives exactly the
/// sequential loop's result (first index on ties): the verdict never depends on the
/// thread count. A production tensor has up to ~5e8 elements and each is visited in
/// several sweeps; sequentially the gate dominated the GPU replay's wall time.
template <class R, class F>
std::vector<R> map_chunks(std::size_t n, F&& f) {
  constexpr std::size_t kMinChunk = std::size_t{1} << 16;
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunks = std::max<std::size_t>(1, std::min(hw, (n + kMinChunk - 1) / kMinChunk));
  std::vector<R> out(chunks);
  std::vector<std::exception_ptr> errors(chunks);
  auto work = [&](std::size_t c) {
    try {
      out[c] = f(n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t c = 1; c < chunks; ++c) threads.emplace_back(work, c);
  work(0);
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

/// A count of elements with a property and the first index that has it.
struct FirstCount {
  std::size_t count = 0, first = 0;
};
template <class Pred>
FirstCount count_first(std::size_t n, Pred&& bad) {
  FirstCount total;
  for (const FirstCount& c : map_chunks<FirstCount>(n, [&](std::size_t lo, std::size_t hi) {
         FirstCount r;
         for (std::size_t i = lo; i < hi; ++i)
           if (bad(i) && r.count++ == 0) r.first = i;
         return r;
       })) {
    if (c.count && total.count == 0) total.first = c.first;
    total.count += c.count;
  }
  return total;
}

/// The largest value and the first index reaching it (index -1: no element counted).
struct ArgMax {
  double value = 0.0;
  std::int64_t index = -1;
  void offer(double v, std::int64_t i) {
    if (index < 0 || v > value) { value = v; index = i; }
  }
};

StructureCheck legacy_check_structure(const Tensor& golden, DType dtype, const Tensor& actual) {
  StructureCheck s;
  if (actual.shape != golden.shape) {
    s.ok = false;
    s.message = "shape " + shape_to_string(actual.shape) + " != golden shape " + shape_to_string(golden.shape);
    return s;
  }
  if (actual.dtype != dtype) {
    s.ok = false;
    s.message = "dtype " + std::string(dtype_name(actual.dtype)) + " != declared " + std::string(dtype_name(dtype));
    return s;
  }
  const FirstCount wrong = count_first(golden.numel(), [&](std::size_t i) {
    return std::string_view(kind_of(round_to_dtype(golden.get(i), dtype))) != kind_of(actual.get(i));
  });
  const std::size_t mismatches = wrong.count, first = wrong.first;
  if (mismatches) {
    s.ok = false;
    std::ostringstream os;
    os << mismatches << " element(s) with NaN/Inf in the wrong place; first at "
       << unravel(static_cast<std::int64_t>(first), golden.shape) << ": expected "
       << kind_of(round_to_dtype(golden.get(first), dtype)) << " (golden " << golden.get(first) << "), got "
       << kind_of(actual.get(first)) << " (" << actual.get(first) << ")";
    s.message = os.str();
  }
  return s;
}

GateResult legacy_evaluate_gate(const std::string& tensor, const CaseSpec& spec, const GoldenTensor& golden,
                         const Tensor& reference, const Tensor* target) {
  GateResult r;
  r.tensor = tensor;
  r.shape = golden.value.shape;
  r.params = spec.gate;
  r.params.ulp_limit = spec.gate.ulp_limit_for(tensor);  // the rule for this tensor
  r.target_ran = target != nullptr;
  const DType out = spec.dtype;
  const Tensor& g = golden.value;
  r.reference_structure = legacy_check_structure(g, out, reference);
  if (target) r.target_structure = legacy_check_structure(g, out, *target);
  // Elements whose terms are all zero are exactly zero in any IEEE evaluation (a zero
  // row's output, say): no tolerance applies there.
  auto exact_zeros = [&](const Tensor& t, StructureCheck& s) {
    if (!s.ok || golden.abs_terms.numel() != g.numel()) return;
    const FirstCount nonzero = count_first(g.numel(), [&](std::size_t i) {
      return g.get(i) == 0.0 && golden.abs_terms.get(i) == 0.0 && t.get(i) != 0.0;
    });
    const std::size_t bad = nonzero.count, first = nonzero.first;
    if (bad) {
      std::ostringstream os;
      os << bad << " element(s) whose FP64 terms are all zero are not exactly 0; first at "
         << unravel(static_cast<std::int64_t>(first), g.shape) << ": " << t.get(first);
      s.ok = false;
      s.message = os.str();
    }
  };
  exact_zeros(reference, r.reference_structure);
  if (target) exact_zeros(*target, r.target_structure);

  const std::size_t n = g.numel();
  const bool ref_comparable = reference.shape == g.shape;
  const bool tgt_comparable = target && target->shape == g.shape;
  struct Sweep {
    double golden_scale = 0.0, rounding_floor = 0.0;
    ArgMax ref, tgt;
  };
  Sweep all;
  for (const Sweep& c : map_chunks<Sweep>(n, [&](std::size_t lo, std::size_t hi) {
         Sweep w;
         for (std::size_t i = lo; i < hi; ++i) {
           const double gi = g.get(i);
           const double rounded = round_to_dtype(gi, out);
           if (!std::isfinite(rounded)) continue;
           w.golden_scale = std::max(w.golden_scale, std::fabs(gi));
           w.rounding_floor = std::max(w.rounding_floor, std::fabs(rounded - gi));
           const auto idx = static_cast<std::int64_t>(i);
           if (ref_comparable && std::isfinite(reference.get(i))) w.ref.offer(std::fabs(reference.get(i) - gi), idx);
           if (tgt_comparable && std::isfinite(target->get(i))) w.tgt.offer(std::fabs(target->get(i) - gi), idx);
         }
         return w;
       })) {
    all.golden_scale = std::max(all.golden_scale, c.golden_scale);
    all.rounding_floor = std::max(all.rounding_floor, c.rounding_floor);
    if (c.ref.index >= 0) all.ref.offer(c.ref.value, c.ref.index);
    if (c.tgt.index >= 0) all.tgt.offer(c.tgt.value, c.tgt.index);
  }
  r.golden_scale = all.golden_scale;
  r.rounding_floor = all.rounding_floor;
  r.reference_error = all.ref.value;
  r.target_error = all.tgt.value;
  const std::int64_t worst_ref = all.ref.index, worst_tgt = all.tgt.index;
  r.absolute_floor = std::max(spec.gate.project_atol, r.rounding_floor);
  r.threshold = spec.gate.fudge_factor * r.reference_error + r.absolute_floor;
  r.reference_relative_error =
      r.reference_error / std::max({r.golden_scale, r.absolute_floor, DBL_MIN});

  if (worst_ref >= 0) {
    const double gv = std::fabs(g.get(worst_ref));
    const double terms = golden.abs_terms.numel() == n ? golden.abs_terms.get(worst_ref) : gv;
    r.condition = gv > 0 ? terms / gv : (terms > 0 ? INFINITY : 1.0);
  }
  r.worst_index = worst_tgt >= 0 ? worst_tgt : worst_ref;
  if (r.worst_index >= 0) {
    r.worst_golden = g.get(r.worst_index);
    if (ref_comparable) r.worst_reference = reference.get(r.worst_index);
    if (tgt_comparable) r.worst_target = target->get(r.worst_index);
  }

  // Conditioning-driven noise envelope: always computed. A reference outside its own
  // envelope is not a legitimate same-precision evaluation (a hand-edited or broken
  // oracle): it never sets a threshold, so the gate is then not valid (below) and the
  // verdict is INCONCLUSIVE, however small the relative error looks.
  if (r.reference_structure.ok) {
    const DType acc = out == DType::fp64 ? DType::fp64 : DType::fp32;
    const double m = 2.0 * static_cast<double>(golden.envelope_length + 4);
    const double u_acc = dtype_unit_roundoff(acc);
    const double gamma = m * u_acc / (1.0 - m * u_acc);
    const double u_out = dtype_unit_roundoff(out);
    // Half the smallest subnormal of the output dtype: 2^-1075, 2^-150, 2^-134 (bf16), 2^-25.
    const double half_subnormal = std::ldexp(1.0, out == DType::fp64 ? -1075
                                                   : out == DType::fp32 ? -150
                                                   : out == DType::bf16 ? -134 : -25);
    struct Inside {
      bool reference = true, target = true;
    };
    for (const Inside& c : map_chunks<Inside>(n, [&](std::size_t lo, std::size_t hi) {
           Inside w;
           for (std::size_t i = lo; i < hi; ++i) {
             const double gi = g.get(i);
             if (!std::isfinite(round_to_dtype(gi, out))) continue;
             const double terms = golden.abs_terms.numel() == n ? golden.abs_terms.get(i) : std::fabs(gi);
             const double e = gamma * terms;
             const double allowed = std::max(spec.gate.project_atol, e + u_out * (std::fabs(gi) + e) + half_subnormal);
             if (std::isfinite(reference.get(i)) && std::fabs(reference.get(i) - gi) > allowed) w.reference = false;
             if (tgt_comparable && std::isfinite(target->get(i)) && std::fabs(target->get(i) - gi) > allowed)
               w.target = false;
           }
           return w;
         })) {
      r.reference_in_envelope = r.reference_in_envelope && c.reference;
      r.target_in_envelope = r.target_in_envelope && c.target;
    }
  }

  r.gate_valid = r.reference_structure.ok && r.reference_in_envelope &&
                 r.reference_relative_error <= spec.gate.max_reference_relative_error;

  // ULP rule for elementwise ops.
  if (r.params.ulp_limit >= 0 && tgt_comparable) {
    struct Ulps {
      std::array<std::int64_t, 4> counts{};
      std::int64_t max = 0, index = -1;
    };
    r.max_ulp = 0;
    for (const Ulps& c : map_chunks<Ulps>(n, [&](std::size_t lo, std::size_t hi) {
           Ulps w;
           for (std::size_t i = lo; i < hi; ++i) {
             const double rounded = round_to_dtype(g.get(i), out), ti = target->get(i);
             if (!std::isfinite(rounded) || !std::isfinite(ti)) continue;
             const std::int64_t d = legacy_ulp_distance(ti, rounded, out);
             ++w.counts[static_cast<std::size_t>(std::min<std::int64_t>(d, 3))];
             if (d > w.max) { w.max = d; w.index = static_cast<std::int64_t>(i); }
           }
           return w;
         })) {
      for (std::size_t k = 0; k < 4; ++k) r.ulp_counts[k] += c.counts[k];
      if (c.max > r.max_ulp) { r.max_ulp = c.max; r.max_ulp_index = c.index; }
    }
  }
  const bool ulp_ok = r.params.ulp_limit < 0 || r.max_ulp <= r.params.ulp_limit;

  if (!target) {
    r.verdict = Verdict::not_run;
  } else if (!r.target_structure.ok) {
    r.verdict = Verdict::fail;
  } else if (!r.reference_structure.ok) {
    r.verdict = Verdict::inconclusive;
  } else if (!ulp_ok) {
    r.verdict = Verdict::fail;
  } else if (r.gate_valid) {
    r.verdict = r.target_error <= r.threshold ? Verdict::pass : Verdict::fail;
  } else if (!r.reference_in_envelope) {
    r.verdict = Verdict::inconclusive;
  } else {
    r.verdict = r.target_in_envelope ? Verdict::pass_with_limitations : Verdict::fail;
  }
  return r;
}

}  // namespace numgate::legacy
