// What the row-by-row replay (Replay.RowsIndependent, tests/gpu/test_replay.cpp) finds,
// and how it reaches the case's report: host code only (no CUDA), so that the CPU unit
// tests check it (tests/cpu/test_descriptor.cpp, RowsAloneFindings.*).
//
// Every finding of a tensor or buffer (a lone row's slice that differs from the batched
// launch, a write outside a row_indexed output's own slice, an out-of-bounds write, a
// modified input, a damaged workspace, an exception) makes one FAIL row "<t> (rows alone)"
// whose message names the row(s) and the first differing element; the note says how many
// comparisons were made and how many differed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "numgate/gate.h"
#include "numgate/tensor.h"

namespace numgate::testing {

class RowsAloneFindings {
 public:
  static constexpr const char* kSuffix = " (rows alone)";

  /// Compares slice `row` (of `rows` equal slices) of the batched launch's output `batched`
  /// with `alone`, the same slice from the row's lone launch (slice bytes, batched.dtype).
  /// Counts one comparison; on a difference records a finding of tensor `t` naming the row
  /// and the first differing element (its index in the tensor and in the row, both values).
  /// Returns true when bitwise equal.
  bool compare(const std::string& t, const Tensor& batched, std::int64_t rows, std::int64_t row,
               const unsigned char* alone) {
    ++comparisons_;
    const std::size_t es = dtype_size(batched.dtype), per_row = batched.numel() / static_cast<std::size_t>(rows);
    const unsigned char* want = batched.bytes.data() + static_cast<std::size_t>(row) * per_row * es;
    for (std::size_t i = 0; i < per_row; ++i) {
      if (std::memcmp(alone + i * es, want + i * es, es) == 0) continue;
      ++differing_;
      const std::size_t flat = static_cast<std::size_t>(row) * per_row + i;
      add(t, "row " + std::to_string(row) + " launched alone differs from the batched launch, first at element " +
                 unravel(static_cast<std::int64_t>(flat), batched.shape) + " (element " + std::to_string(i) +
                 " of the row): " + value(batched.dtype, alone + i * es) + " alone vs " + std::to_string(batched.get(flat)) +
                 " batched");
      return false;
    }
    return true;
  }

  /// A row_indexed output's whole buffer after the lone launch of `row`: every byte outside
  /// the row's slice must still be `poison` (the launch writes its own slice only). Records
  /// a finding naming the first element written outside it. Returns true when untouched.
  bool untouched_outside(const std::string& t, const Tensor& batched, std::int64_t rows, std::int64_t row,
                         const std::vector<unsigned char>& whole, unsigned char poison) {
    const std::size_t es = dtype_size(batched.dtype), per_row = batched.numel() / static_cast<std::size_t>(rows);
    const std::size_t lo = static_cast<std::size_t>(row) * per_row * es, hi = lo + per_row * es;
    for (std::size_t b = 0; b < whole.size(); ++b) {
      if ((b >= lo && b < hi) || whole[b] == poison) continue;
      add(t, "row " + std::to_string(row) + " launched alone wrote outside its own slice, first at element " +
                 unravel(static_cast<std::int64_t>(b / es), batched.shape) + " (a row_indexed launch writes slice " +
                 std::to_string(row) + " only)");
      return false;
    }
    return true;
  }

  /// A memory-safety problem of buffer `buffer` ("x", "workspace") in `launch` ("row 3
  /// launched alone", "the batched launch").
  void memory_problem(const std::string& buffer, const std::string& launch, const std::string& what) {
    add(buffer, launch + ": " + what);
  }

  /// The replay could not complete (an exception): every tensor of `tensors` gets a finding.
  void error(const std::vector<std::string>& tensors, const std::string& what) {
    for (const auto& t : tensors) add(t, "the row-by-row replay could not complete: " + what);
  }

  int comparisons() const { return comparisons_; }
  int differing() const { return differing_; }
  bool clean() const { return findings_.empty(); }

  /// One FAIL row per tensor or buffer with a finding, in the order first found: tensor
  /// "<t> (rows alone)", target_structure {false, "<n> finding(s): <first>; <second>; ..."}
  /// (at most 4 findings spelled out).
  std::vector<GateResult> report_rows() const {
    std::vector<GateResult> v;
    for (const auto& [t, msgs] : findings_) {
      GateResult r;
      r.tensor = t + kSuffix;
      r.target_ran = true;
      r.verdict = Verdict::fail;
      std::string m = std::to_string(msgs.size()) + " finding(s): ";
      for (std::size_t i = 0; i < msgs.size() && i < 4; ++i) m += (i ? "; " : "") + msgs[i];
      if (msgs.size() > 4) m += "; ...";
      r.target_structure = {false, m};
      v.push_back(std::move(r));
    }
    return v;
  }

  /// Every finding, "<t>: <message>" (for the test's failure messages).
  std::vector<std::string> messages() const {
    std::vector<std::string> v;
    for (const auto& [t, msgs] : findings_)
      for (const auto& m : msgs) v.push_back(t + ": " + m);
    return v;
  }

  /// The case report's note for `tried` rows launched alone.
  std::string note(std::int64_t tried) const {
    std::string n = "row-wise outputs (Layout::rows, Layout::row_indexed) of the first " + std::to_string(tried) +
                    " row(s), each launched alone: ";
    if (comparisons_ == 0) n += "no row-wise output to compare (0 comparisons)";
    else if (differing_ == 0) n += "bitwise equal to the batched launch (" + std::to_string(comparisons_) + " comparisons)";
    else
      n += std::to_string(differing_) + " of " + std::to_string(comparisons_) +
           " comparisons DIFFER from the batched launch";
    std::size_t other = 0;
    for (const auto& [t, msgs] : findings_) other += msgs.size();
    other -= static_cast<std::size_t>(differing_);
    n += other == 0 ? "; guard bands, workspace and inputs intact"
                    : "; " + std::to_string(other) + " other finding(s) (memory safety, writes outside the slice, errors)";
    return n;
  }

 private:
  static std::string value(DType t, const unsigned char* p) {
    Tensor one(t, {1});
    std::memcpy(one.bytes.data(), p, dtype_size(t));
    return std::to_string(one.get(0));
  }
  void add(const std::string& t, std::string m) {
    for (auto& [name, msgs] : findings_)
      if (name == t) return msgs.push_back(std::move(m));
    findings_.push_back({t, {std::move(m)}});
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> findings_;
  int comparisons_ = 0, differing_ = 0;
};

}  // namespace numgate::testing
