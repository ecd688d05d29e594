// numgate-bench — times every op's target kernels (each pass: forward, backward) on the
// production cases that passed the numerics gate.
//
// Input: the JSON report written by the GPU replay tests (report.json, read with
// numgate::read_report: numgate/report.h documents its schema; a report it refuses is a
// usage error naming the file and field). Output: the console lines below and, unless
// --json "" is given, the same results as JSON (bench_json.h: schema), by default
// bench.json beside the report, written atomically on every exit but a bad command line
// (its "status" says whether the run completed).
// Only cases with production == true, verdict PASS, at least 2^20 elements and an op
// with a registered target (kernels/target_registry.cpp) are timed: speed only matters once the numbers are
// right. Non-production cases are ignored; production cases that did not PASS are listed
// as skipped. Cases of one op with the same dtype, shape and op parameters (e.g.
// different seeds) are timed once. The case's fixture file gives the op parameters (eps,
// the GELU variant, ...) and every tensor's shape; no tensor data is read from it.
// Benchmark shapes larger than any fixture (softmax 32 heads x 4096 x 4096, RoPE 4 x 4096
// tokens, cross-entropy 8192 x 151,936; kScaledShapes) are timed as copies of a passing
// case that differs from them in the first dimension only, and their lines say so.
//
// Method. Every input is filled on the device with non-zero pseudo-random values (1-D
// inputs such as weights: positive, in [0.5, 1.5); i64 index inputs: 0, a valid
// position / class). Enough independent buffer sets are
// allocated that one rotation through them touches more than 2x the device L2, and
// consecutive launches use consecutive sets, so every timed launch reads cold data from
// DRAM (as in a real model step). Each launch is bracketed by its own pair of CUDA
// events; after warm-up launches we report the median and the minimum.
// Outputs (--outputs): "rotate" (each launch writes the outputs and workspace of its own
// set) or "reuse" (the inputs rotate, but every launch writes set 0's outputs and
// workspace: the L2-warm blocks a peer gets from PyTorch's caching allocator when it drops
// each call's results). Without the option: the --peers file's handling (bench_peers.py
// --outputs), so the two sides of a comparison write alike; else rotate.
// Bandwidth = minimal DRAM traffic / median time, where the minimal traffic of a pass is
// the bytes of the inputs it reads (PassDecl::reads of the op descriptor, each once) plus the bytes of the
// outputs it writes (PassDecl::writes, each once); e.g. RMSNorm forward reads x, w and
// writes y; SwiGLU backward reads a, b, dy and writes da, db; where a pass must move less
// than that, its TargetPass::traffic_bytes says how much (softmax: the causal forward reads
// x, the causal backward y, only up to each row's causal limit). It is compared with a
// device-to-device cudaMemcpyAsync (bytes read + written), the practical ceiling for a
// streaming kernel. A case with fewer rows than the device has multiprocessors cannot
// fill the GPU with a row-per-block kernel: it is still timed, but its line ends with
// "(latency-bound: R rows < N SMs)" because its GB/s measures launch and latency.
//
// Kernel clock. Unless --no-kernel-clock, each pass is launched --iters more times (the
// rotation continuing, no events) while CUPTI records the GPU activities (kernels, memsets)
// they run; kernel_us = their summed durations / launches: GPU time only, no launch gaps
// and no event overhead, the method by which tools/bench_peers.py times torch.compile and
// Liger-Kernel (PyTorch's profiler reads the same CUPTI records). That is a mean; the JSON
// also has the median of one launch's summed durations and the window's wall time per
// launch (summarize_kernel_clock), and the line names the median where it differs by more
// than 1%, and the window where it is shorter than the kernel time (activities overlapping).
// Without CUPTI in the build (CMake: CUDA::cupti) the line has event times only and says so.
//
// Peers (--peers FILE, tools/bench_peers.py's JSON): after the timing, one "peer" line per
// timed line with the fastest peer of the same semantics at its op, pass, dtype, shape and
// parameters, numgate's ratio to it (kernel time / kernel time; the event median's ratio
// beside it), WON (ratio <= 1.00 as printed) or LOST, and a closing count over the main
// target's lines and the variant "fused" (cross-entropy's fused forward + backward, compared
// with the peers' "fused" rows); other variants are compared but not counted.
//
// Exit status: 0 done; 77 no CUDA device, or no production case of at least 2^20 elements
// (ctest: skipped); 2 nothing to do (report missing or unreadable, large production cases
// but none PASS, bad command line); 1 a CUDA error while benchmarking.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_fill.h"
#include "bench_json.h"
#include "bench_kernel_clock.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "numgate/fixture_file.h"
#include "numgate/report.h"
#include "target.h"

namespace {

using numgate::bench::FillType;

constexpr int kExitUsage = 2;
/// No CUDA device: nothing can be timed (ctest: SKIP_RETURN_CODE 77, reported as skipped).
constexpr int kExitNoDevice = 77;
constexpr int kExitCuda = 1;
/// Production cases with fewer elements (case shape) are boundary and adversarial shapes
/// generated into the build tree, not production workloads: not timed.
constexpr int64_t kMinElements = int64_t(1) << 20;
/// Upper bound on rotating buffer sets (enough for any shape above kMinElements).
constexpr std::size_t kMaxSets = 256;

/// A problem with the inputs (not a CUDA failure): printed, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// No CUDA device: printed, exit status 77.
struct NoDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// No production case large enough to time (by design): printed, exit status 77.
struct NothingToTime : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using numgate::bench::strf;

/// Checks a CUDA runtime call (numgate::cuda_check, kernels/cuda_check.h).
#define BENCH_CUDA(call) NUMGATE_CUDA_CHECK(call)
/// Checks a launcher's return value and then the last error.
#define BENCH_LAUNCH(call)                                                            \
  do {                                                                                \
    ::numgate::cuda_check((call), #call, __FILE__, __LINE__);                         \
    ::numgate::cuda_check(cudaGetLastError(), "launch of " #call, __FILE__, __LINE__); \
  } while (0)

// ------------------------------------------------------------------------------------
// report
// ------------------------------------------------------------------------------------

struct BenchCase {
  std::string op;
  std::string name;   ///< first case name with this op, dtype, shape and parameters
  std::vector<int64_t> scaled_from;  ///< non-empty: a benchmark shape scaled from that verified case shape
  std::string file;   ///< its fixture file (op parameters and tensor shapes come from there)
  int duplicates = 0; ///< further qualifying cases with the same op, dtype, shape and parameters
  numgate::CaseSpec spec;
  std::map<std::string, numgate::TensorInfo> tensors;  ///< every tensor, from the op's descriptor for spec
};

/// Every tensor's dtype and shape for a case, from the op's descriptor (no fixture data).
std::map<std::string, numgate::TensorInfo> tensors_of(const std::string& op, const numgate::CaseSpec& spec) {
  std::map<std::string, numgate::TensorInfo> out;
  for (const numgate::TensorDecl& t : numgate::find_op(op).descriptor().tensors) out[t.name] = {t.dtype_for(spec), t.shape(spec)};
  return out;
}

/// Benchmark shapes larger than any production fixture (their FP64 golden would need tens
/// of GB): each is timed with the op parameters of a passing production case of the same op
/// and dtype whose shape differs from it in the number of rows only (the leading
/// dimensions; for RoPE tokens, for softmax batch x heads); every tensor's shape for the
/// larger case comes from the op's descriptor. The kernels' launch and code path depend on
/// the row layout, not on the number of rows, so the verified case vouches for the
/// numbers; the bench line names it.
struct ScaledShape {
  const char* op;
  numgate::DType dtype;
  std::vector<int64_t> from, to;
};
const ScaledShape kScaledShapes[] = {
    {"softmax", numgate::DType::bf16, {1, 2, 4096, 4096}, {4, 8, 4096, 4096}},  // 32 heads x 4096 x 4096
    {"rope", numgate::DType::bf16, {1, 4096, 32, 128}, {4, 4096, 32, 128}},     // 4 x 4096 tokens x 32 x 128
    {"cross_entropy", numgate::DType::bf16, {512, 151936}, {8192, 151936}},     // 8192 tokens, Qwen3 vocab
    {"swiglu", numgate::DType::bf16, {1, 1024, 12288}, {4, 512, 12288}},        // 4 x 512 tokens, FFN 12288
    {"geglu", numgate::DType::bf16, {1, 1024, 12288}, {4, 512, 12288}},
};

/// The benchmark-shape copies of a qualifying case (kScaledShapes).
std::vector<BenchCase> scaled_copies(const BenchCase& bc) {
  std::vector<BenchCase> out;
  for (const ScaledShape& s : kScaledShapes) {
    if (bc.op != s.op || bc.spec.dtype != s.dtype || bc.spec.shape != s.from) continue;
    BenchCase big = bc;
    big.scaled_from = bc.spec.shape;
    big.spec.shape = s.to;
    big.duplicates = 0;
    big.tensors = tensors_of(bc.op, big.spec);
    out.push_back(std::move(big));
  }
  return out;
}

/// Prints a console line (no trailing newline in `line`) and records it for the JSON.
void skip_line(numgate::bench::Results& res, const std::string& line) {
  std::printf("%s\n", line.c_str());
  res.skipped.push_back(line);
}

/// The qualifying cases, deduplicated by (op, dtype, shape, parameters), in report order,
/// each followed by its benchmark-shape copies (kScaledShapes).
/// Prints (and records) one "skipped" line per production case that cannot be timed.

std::vector<BenchCase> select_cases(const numgate::Report& report, const std::string& path,
                                    numgate::bench::Results& res) {
  std::vector<BenchCase> out;
  int n_production = 0, n_pass = 0, n_small = 0;
  for (const numgate::CaseReport& c : report.cases) {
    const std::string& name = c.spec.name;
    const std::string& op = c.op;
    auto skip = [&](const std::string& why) {
      skip_line(res, strf("bench %s %s: skipped: %s", op.c_str(), name.c_str(), why.c_str()));
    };
    if (!c.spec.production) continue;
    ++n_production;
    const numgate::Verdict verdict = c.verdict();
    if (verdict != numgate::Verdict::pass) {
      skip(strf("numerics not PASS (verdict %s)", std::string(numgate::verdict_name(verdict)).c_str()));
      continue;
    }
    ++n_pass;
    if (c.file.empty()) {
      skip("no \"file\" (the fixture it was replayed from)");
      continue;
    }
    try {
      (void)numgate::find_target(op);
    } catch (const std::invalid_argument& e) {
      skip(e.what());
      continue;
    }
    BenchCase bc;
    bc.op = op;
    bc.name = name;
    bc.file = c.file;
    std::string file_op;
    try {
      const numgate::CaseData attrs = numgate::read_case_attributes(bc.file, name);
      file_op = attrs.op;
      bc.spec = attrs.spec;
    } catch (const numgate::FixtureError& e) {
      skip(e.what());
      continue;
    }
    if (file_op != op) {
      skip(strf("the report says op '%s' but %s holds op '%s' (stale or edited report: rerun the replay)",
                op.c_str(), bc.file.c_str(), file_op.c_str()));
      continue;
    }
    // The size filter uses the fixture's shape (the report's is not trusted); numel refuses
    // a negative extent or an overflowing product.
    int64_t elems = 0;
    try {
      elems = numgate::numel(bc.spec.shape);
    } catch (const std::exception& e) {
      skip(e.what());
      continue;
    }
    if (elems < kMinElements) {
      ++n_small;
      continue;
    }
    // Every tensor's shape comes from the descriptor; it must agree with the fixture's.
    try {
      bc.tensors = tensors_of(op, bc.spec);
      const auto stored = numgate::read_case_tensor_info(bc.file, name);
      std::string differ;
      for (const auto& [t, ti] : stored)
        if (!bc.tensors.count(t) || bc.tensors.at(t).shape != ti.shape || bc.tensors.at(t).dtype != ti.dtype)
          differ += " " + t;
      if (!differ.empty() || stored.size() != bc.tensors.size()) {
        skip("the fixture's tensors differ from the op's descriptor (stale fixture: regenerate):" + differ);
        continue;
      }
    } catch (const std::exception& e) {
      skip(e.what());
      continue;
    }
    auto same = std::find_if(out.begin(), out.end(), [&](const BenchCase& o) {
      return o.op == bc.op && o.spec.dtype == bc.spec.dtype && o.spec.shape == bc.spec.shape &&
             o.spec.params == bc.spec.params;
    });
    if (same != out.end()) {
      ++same->duplicates;
      continue;
    }
    std::vector<BenchCase> scaled = scaled_copies(bc);
    out.push_back(std::move(bc));
    for (auto& sc : scaled) out.push_back(std::move(sc));
  }
  if (n_small > 0)
    skip_line(res, strf("bench: %d passing production case(s) below %lld elements not timed (boundary and "
                        "adversarial shapes: their time is launch latency, not bandwidth)",
                        n_small, static_cast<long long>(kMinElements)));
  // Nothing to time by design (every production case is a small boundary shape, or the op
  // declares none): not a failure.
  bool any_large = false;
  for (const numgate::CaseReport& c : report.cases) {
    if (!c.spec.production) continue;
    int64_t n = 1;
    for (auto d : c.spec.shape) n = (d > 0 && n <= INT64_MAX / d) ? n * d : (d > 0 ? INT64_MAX : 0);
    any_large |= n >= kMinElements;
  }
  if (out.empty() && !any_large)
    throw NothingToTime(strf("report '%s' holds no production case of at least %lld elements: nothing to benchmark",
                             path.c_str(), static_cast<long long>(kMinElements)));
  if (out.empty()) {
    throw UsageError(strf("no case in report '%s' qualifies for benchmarking: need production == true, "
                          "verdict == \"PASS\", a registered target and a readable fixture file (found %d "
                          "production cases, %d of them PASS).",
                          path.c_str(), n_production, n_pass));
  }
  return out;
}

// ------------------------------------------------------------------------------------
// timing
// ------------------------------------------------------------------------------------

struct Timing {
  double median_us = 0;
  double min_us = 0;
};

/// Runs launch(i) `warmup` times, then `iters` times each between its own event pair
/// on `stream`; returns median and minimum of the per-launch times.
template <typename Launch>
Timing time_launches(cudaStream_t stream, int warmup, int iters, Launch&& launch) {
  for (int i = 0; i < warmup; ++i) launch(i);
  std::vector<cudaEvent_t> start(static_cast<std::size_t>(iters)), stop(start.size());
  for (std::size_t i = 0; i < start.size(); ++i) {
    BENCH_CUDA(cudaEventCreate(&start[i]));
    BENCH_CUDA(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < iters; ++i) {
    BENCH_CUDA(cudaEventRecord(start[static_cast<std::size_t>(i)], stream));
    launch(warmup + i);
    BENCH_CUDA(cudaEventRecord(stop[static_cast<std::size_t>(i)], stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> us(start.size());
  for (std::size_t i = 0; i < start.size(); ++i) {
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start[i], stop[i]));
    us[i] = 1000.0 * ms;
    BENCH_CUDA(cudaEventDestroy(start[i]));
    BENCH_CUDA(cudaEventDestroy(stop[i]));
  }
  Timing t;
  t.median_us = numgate::bench::median_of(us);  // sorts us
  t.min_us = us.front();
  return t;
}

/// Device-to-device copy bandwidth (bytes read + written per second, GB/s): median of
/// 20 cudaMemcpyAsync of a 2 GiB buffer (halved while it does not fit in free memory).
double measure_d2d_gbps(cudaStream_t stream) {
  std::size_t free_b = 0, total_b = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b));
  std::size_t size = std::size_t(2) << 30;
  while (size > (std::size_t(64) << 20) && 2 * size > free_b / 10 * 8) size /= 2;
  std::optional<numgate::DeviceBuffer> src, dst;
  for (;;) {
    try {
      src = numgate::DeviceBuffer::unguarded(size);
      dst = numgate::DeviceBuffer::unguarded(size);
      break;
    } catch (const std::runtime_error&) {
      src.reset();
      dst.reset();
      (void)cudaGetLastError();  // clear the allocation failure
      if (size <= (std::size_t(16) << 20)) throw;
      size /= 2;
    }
  }
  BENCH_CUDA(cudaMemsetAsync(src->data(), 0x5a, size, stream));
  const Timing t = time_launches(stream, 3, 20, [&](int) {
    BENCH_CUDA(cudaMemcpyAsync(dst->data(), src->data(), size, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * static_cast<double>(size) / (t.median_us * 1e3);
}

using Device = numgate::bench::DeviceInfo;

struct Options {
  std::string report;
  std::string peers;      ///< tools/bench_peers.py's JSON ("" = no comparison)
  bool kernel_clock = true;  ///< --no-kernel-clock: event times only
  std::string outputs;    ///< --outputs: "rotate", "reuse" or "" (numgate::bench::choose_outputs)
  std::string json;       ///< bench JSON path; "" = none
  bool json_given = false;  ///< --json was on the command line (else: beside the report)
  int iters = 200;
  int warmup = 20;
};

// ------------------------------------------------------------------------------------
// one case
// ------------------------------------------------------------------------------------

FillType fill_type(numgate::DType d) {
  switch (d) {
    case numgate::DType::fp32: return FillType::fp32;
    case numgate::DType::fp64: return FillType::fp64;
    case numgate::DType::fp16: return FillType::fp16;
    case numgate::DType::bf16: return FillType::bf16;
    case numgate::DType::i64: break;  // index inputs are zero-filled, never random (run_case)
  }
  throw UsageError("no random fill for i64 tensors (index inputs are zero-filled)");
}

void print_line(const BenchCase& bc, const std::string& pass, const std::string& variant, const Timing& t,
                const numgate::bench::KernelClockStats& kc, double bytes, int64_t rows, const Device& dev,
                numgate::bench::Results& res) {
  numgate::bench::Line l;
  l.op = bc.op;
  l.pass = pass;
  l.variant = variant;
  l.kernel_us = kc.mean_us;
  l.kernel_median_us = kc.median_us;
  l.kernel_span_us = kc.span_us;
  for (const auto& [k, v] : bc.spec.params) l.params[k] = v;
  l.case_name = bc.name;
  l.dtype = bc.spec.dtype;
  l.shape = bc.spec.shape;
  l.duplicates = bc.duplicates;
  l.scaled_from = bc.scaled_from;
  l.rows = rows;
  l.bytes = bytes;
  l.median_us = t.median_us;
  l.min_us = t.min_us;
  std::fputs(numgate::bench::console_line(l, dev).c_str(), stdout);
  std::fflush(stdout);
  res.lines.push_back(std::move(l));
}

void run_case(const BenchCase& bc, const Device& dev, const Options& opt, cudaStream_t stream,
              numgate::bench::Results& res) {
  const numgate::TargetOp& target = numgate::find_target(bc.op);
  const numgate::OpDescriptor& desc = numgate::find_op(bc.op).descriptor();
  const int64_t rows = desc.rows(bc.spec);
  auto count_of = [](const numgate::TensorInfo& ti) { return static_cast<std::size_t>(numgate::numel(ti.shape)); };
  auto size_of = [&](const numgate::TensorInfo& ti) { return count_of(ti) * numgate::dtype_size(ti.dtype); };
  auto bytes_of = [&](const std::string& t) {
    auto it = bc.tensors.find(t);
    if (it == bc.tensors.end())
      throw UsageError(strf("%s: pass tensor '%s' not in fixture case %s", bc.op.c_str(), t.c_str(), bc.name.c_str()));
    return size_of(it->second);
  };

  std::size_t ws_bytes = 0, set_bytes = 0, min_footprint = SIZE_MAX;
  for (const auto& pass : desc.passes) {
    const auto& tp = target.pass(pass.name);
    if (tp.workspace_bytes) ws_bytes = std::max(ws_bytes, tp.workspace_bytes(bc.spec));
    std::size_t fp = 0;
    for (const auto& t : pass.reads) fp += bytes_of(t);
    for (const auto& t : pass.writes) fp += bytes_of(t);
    min_footprint = std::min(min_footprint, fp);
  }
  const std::vector<const numgate::TargetOp*> variants = numgate::variants_of(bc.op);
  for (const numgate::TargetOp* v : variants)
    for (const auto& tp : v->passes)
      if (tp.workspace_bytes) ws_bytes = std::max(ws_bytes, tp.workspace_bytes(bc.spec));
  for (const auto& [n, ti] : bc.tensors) set_bytes += size_of(ti);
  set_bytes += ws_bytes;
  // Size the rotation by the smallest per-launch footprint, so that between two uses of a
  // set more than 2x L2 of other data has been touched (with --outputs reuse the outputs
  // are not other data: a rotation then covers about half as much fresh input; kept so,
  // since tools/bench_peers.py sizes its sets the same way).
  std::size_t nsets =
      std::min(kMaxSets, std::max<std::size_t>(2, 2 * dev.l2_bytes / std::max<std::size_t>(min_footprint, 1) + 1));
  std::size_t free_b = 0, total_b = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t budget = free_b / 10 * 8;
  if (nsets * set_bytes > budget) nsets = budget / set_bytes;
  if (nsets == 0) {
    skip_line(res, strf("bench %s %s: skipped: one buffer set needs %.1f MiB, only %.1f MiB free", bc.op.c_str(),
                        bc.name.c_str(), set_bytes / 1048576.0, free_b / 1048576.0));
    return;
  }
  if (nsets * min_footprint <= 2 * dev.l2_bytes) {
    std::printf("bench %s %s: note: only %zu buffer set(s) fit in memory; some launches may read L2-warm data\n",
                bc.op.c_str(), bc.name.c_str(), nsets);
  }

  // One set: a buffer per tensor and the workspace (none when no pass needs one), freed
  // when `sets` goes out of scope, also on an error.
  struct Set {
    std::map<std::string, numgate::DeviceBuffer> bufs;
    numgate::DevicePtrs ptrs;  ///< bufs' data()
    std::optional<numgate::DeviceBuffer> ws;
  };
  std::vector<Set> sets(nsets);
  const FillType ft = fill_type(bc.spec.dtype);
  for (std::size_t i = 0; i < nsets; ++i) {
    Set& st = sets[i];
    std::uint64_t seed = 1000 + 64 * i;
    for (const auto& [n, ti] : bc.tensors)
      st.ptrs[n] = st.bufs.emplace(n, numgate::DeviceBuffer::unguarded(size_of(ti))).first->second.data();
    if (ws_bytes) st.ws = numgate::DeviceBuffer::unguarded(ws_bytes);
    for (const auto& [n, ti] : bc.tensors) {
      const numgate::TensorDecl& decl = desc.tensor(n);
      if (!numgate::is_input(decl.role)) continue;
      if (ti.dtype == numgate::DType::i64) {  // index inputs: 0 is a valid position / class
        BENCH_CUDA(cudaMemsetAsync(st.ptrs[n], 0, size_of(ti), stream));
        continue;
      }
      // Per-column parameters (weights): positive in [0.5, 1.5); the rest in [0.25, 1.25) with random signs.
      const bool vector = decl.layout == numgate::Layout::per_column;
      BENCH_CUDA(numgate::bench::fill_random(st.ptrs[n], ft, count_of(ti), seed++, vector ? 0.5f : 0.25f,
                                             vector ? 1.5f : 1.25f, !vector, stream));
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  // The pointers each launch gets: set k's; with --outputs reuse, set k's inputs and set 0's
  // outputs (and workspace, in launch below), so every launch writes the same, L2-warm blocks.
  const bool reuse = opt.outputs == "reuse";
  std::vector<numgate::DevicePtrs> launch_ptrs;
  for (std::size_t k = 0; k < nsets; ++k) {
    numgate::DevicePtrs p = sets[k].ptrs;
    if (reuse)
      for (const auto& [n, ti] : bc.tensors)
        if (!numgate::is_input(desc.tensor(n).role)) p[n] = sets[0].ptrs.at(n);
    launch_ptrs.push_back(std::move(p));
  }

  // Index inputs were memset to 0 (valid); the target's host-side precheck (cross-entropy's
  // target validation) is the replay's business and is never timed here.
  // The main target's passes, then every variant's (TargetOp::variant), e.g. "Backward [atomic_dw]".
  auto time_pass = [&](const numgate::TargetPass& tp, const std::string& variant) {
    const numgate::PassDecl& pass = desc.pass(tp.name);
    const std::size_t pws = tp.workspace_bytes ? tp.workspace_bytes(bc.spec) : 0;
    double bytes = 0;
    for (const auto& t : pass.reads) bytes += static_cast<double>(bytes_of(t));
    for (const auto& t : pass.writes) bytes += static_cast<double>(bytes_of(t));
    if (tp.traffic_bytes) bytes = tp.traffic_bytes(bc.spec);
    auto launch = [&](int i) {
      const std::size_t k = static_cast<std::size_t>(i) % nsets;
      const Set& ws_set = reuse ? sets[0] : sets[k];
      BENCH_LAUNCH(tp.launch(
          numgate::Launch{bc.spec, launch_ptrs[k], ws_set.ws ? ws_set.ws->data() : nullptr, pws, stream, {}}));
    };
    const Timing tm = time_launches(stream, opt.warmup, opt.iters, launch);
    // The kernel clock: the same launches again, continuing the rotation, without events,
    // their GPU activity summed by CUPTI (the peers' method) and divided by the launches.
    numgate::bench::KernelClockStats kc;
    if (res.kernel_clock == "cupti") {
      BENCH_CUDA(cudaStreamSynchronize(stream));
      numgate::bench::KernelClock::begin();
      for (int i = 0; i < opt.iters; ++i) launch(opt.warmup + opt.iters + i);
      BENCH_CUDA(cudaStreamSynchronize(stream));
      const std::vector<numgate::bench::Activity> acts = numgate::bench::KernelClock::end();
      if (acts.size() < static_cast<std::size_t>(opt.iters))
        throw std::runtime_error(strf("kernel clock: %zu activities recorded for %d launches of %s %s", acts.size(),
                                      opt.iters, bc.op.c_str(), tp.name.c_str()));
      kc = numgate::bench::summarize_kernel_clock(acts, opt.iters);
    }
    print_line(bc, tp.name, variant, tm, kc, bytes, rows, dev, res);
  };
  for (const auto& pass : desc.passes) time_pass(target.pass(pass.name), "");
  for (const numgate::TargetOp* v : variants)
    for (const auto& tp : v->passes) time_pass(tp, v->variant);
}

int run(Options opt, numgate::bench::Results& res) {
  numgate::Report report;
  try {
    report = numgate::read_report(opt.report);
  } catch (const numgate::ReportError& e) {
    throw UsageError(e.what());
  }
  int ndev = 0;
  const cudaError_t derr = cudaGetDeviceCount(&ndev);
  if (derr != cudaSuccess || ndev == 0) {
    throw NoDevice(strf("no CUDA device available (%s). Run numgate-bench on a machine with an "
                        "NVIDIA GPU and a working driver.",
                        derr != cudaSuccess ? cudaGetErrorString(derr) : "device count is 0"));
  }
  if (!opt.peers.empty()) {
    try {
      res.peers = numgate::bench::read_peers(opt.peers);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
  }
  try {
    opt.outputs = numgate::bench::choose_outputs(opt.outputs, res.peers);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  res.outputs = opt.outputs;
  const std::vector<BenchCase> cases = select_cases(report, opt.report, res);

  BENCH_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  Device dev;
  dev.name = prop.name;
  dev.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  dev.sm_count = prop.multiProcessorCount;
  dev.d2d_gbps = measure_d2d_gbps(stream);
  res.have_device = true;
  res.device = dev;
  const double l2_mib = dev.l2_bytes / 1048576.0;
  std::printf("bench device: %s, L2 %s MiB, D2D copy %.1f GB/s (read+write)\n", dev.name.c_str(),
              (l2_mib == static_cast<double>(static_cast<int64_t>(l2_mib)) ? strf("%.0f", l2_mib)
                                                                          : strf("%.1f", l2_mib))
                  .c_str(),
              dev.d2d_gbps);
  std::string why;
  if (!opt.kernel_clock) res.kernel_clock = "off (--no-kernel-clock)";
  else if (numgate::bench::KernelClock::available(&why)) res.kernel_clock = "cupti";
  else res.kernel_clock = "unavailable: " + why;
  std::printf("bench kernel clock: %s\n", res.kernel_clock == "cupti" ? "CUPTI (GPU time per launch, the peers' method)"
                                                                     : res.kernel_clock.c_str());
  std::printf("bench outputs: %s\n",
              opt.outputs == "reuse"
                  ? "reuse (inputs rotate; every launch writes the same outputs and workspace, L2-warm, as a peer's "
                    "allocator hands it the block it just freed)"
                  : "rotate (every launch writes the outputs and workspace of its own buffer set)");
  std::fflush(stdout);

  for (const BenchCase& bc : cases) run_case(bc, dev, opt, stream, res);
  BENCH_CUDA(cudaStreamDestroy(stream));
  if (res.peers) {
    std::fputs(numgate::bench::peers_header_line(*res.peers, opt.outputs).c_str(), stdout);
    for (numgate::bench::Line& l : res.lines) {
      l.peer = numgate::bench::compare_with_peers(l, *res.peers);
      std::fputs(numgate::bench::peer_line(l).c_str(), stdout);
    }
    std::fputs(numgate::bench::peer_summary_line(numgate::bench::summarize_peers(res.lines)).c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

/// Writes the bench JSON (when wanted); a failure to write turns exit status 0 into 1.
int finish(const Options& opt, numgate::bench::Results& res, int rc, const std::string& message) {
  res.status = rc == 0 ? "ok" : rc == kExitUsage || rc == kExitNoDevice ? "nothing_to_do" : "error";
  res.message = message;
  std::string path = opt.json;
  if (!opt.json_given) {
    const std::filesystem::path dir = std::filesystem::path(opt.report).parent_path();
    path = (dir.empty() ? std::filesystem::path("bench.json") : dir / "bench.json").string();
  }
  if (path.empty()) return rc;
  try {
    numgate::bench::write_json(res, path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-bench: %s\n", e.what());
    return rc == 0 ? kExitCuda : rc;
  }
  return rc;
}

int main(int argc, char** argv) {
  CLI::App app{"numgate-bench: times every op's target kernels (forward and backward) on the production "
               "cases that passed the numerics gate (reads the replay tests' JSON report)."};
  Options opt;
  app.add_option("--report", opt.report, "JSON report written by the GPU replay tests")->required();
  auto* json_opt = app.add_option("--json", opt.json,
                                  "write the results as JSON to this file (default: bench.json beside the report; "
                                  "\"\" for none)");
  app.add_option("--peers", opt.peers,
                 "peers JSON of tools/bench_peers.py: print each line's best peer of the same semantics, "
                 "numgate's ratio to it and the rows won and lost");
  app.add_flag("!--no-kernel-clock", opt.kernel_clock, "CUDA-event times only (no CUPTI kernel clock)");
  app.add_option("--outputs", opt.outputs,
                 "rotate: every launch writes its own buffer set's outputs (cold L2); reuse: every launch writes "
                 "the same outputs, as a peer that drops its results gets them from PyTorch's allocator "
                 "(default: the --peers file's handling, else rotate)")
      ->check(CLI::IsMember({"rotate", "reuse"}));
  app.add_option("--iters", opt.iters, "timed launches per case and direction")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup, "untimed launches before timing")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  opt.json_given = json_opt->count() > 0;

  numgate::bench::Results res;
  res.report = opt.report;
  res.iters = opt.iters;
  res.warmup = opt.warmup;
  try {
    return finish(opt, res, run(opt, res), "");
  } catch (const NoDevice& e) {
    std::fprintf(stderr, "numgate-bench: %s\n", e.what());
    return finish(opt, res, kExitNoDevice, e.what());
  } catch (const NothingToTime& e) {
    std::printf("numgate-bench: %s\n", e.what());
    return finish(opt, res, kExitNoDevice, e.what());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "numgate-bench: %s\n", e.what());
    return finish(opt, res, kExitUsage, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-bench: error: %s\n", e.what());
    return finish(opt, res, kExitCuda, e.what());
  }
}
