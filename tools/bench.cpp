// numgate-bench — times the RMSNorm target kernels on the production cases that passed
// the numerics gate.
//
// Input: the JSON report written by the GPU replay tests,
//   {"cases": [{"op": "rmsnorm", "case": "bf16_2048x4096_seed11", "dtype": "bf16",
//               "shape": [4, 512, 4096], "production": true, "verdict": "PASS", ...}, ...]}
// Only cases with op == "rmsnorm", production == true and verdict == "PASS" are timed:
// speed only matters once the numbers are right. Non-production cases are ignored;
// production cases that did not PASS are listed as skipped. Cases with the same dtype
// and shape (e.g. different seeds) are timed once.
//
// Method. rows = product of all dims but the last, hidden = the last dim. Inputs are
// filled on the device with non-zero pseudo-random values. Enough independent buffer
// sets are allocated that one rotation through them touches more than 2x the device L2,
// and consecutive launches use consecutive sets, so every timed launch reads cold data
// from DRAM (as in a real model step). Each launch is bracketed by its own pair of CUDA
// events; after warm-up launches we report the median and the minimum.
// Bandwidth = minimal DRAM traffic / median time:
//   forward:  reads x, w; writes y          (2*rows*hidden + hidden) * sizeof(T)
//   backward: reads x, dy, w; writes dx, dw (3*rows*hidden + 2*hidden) * sizeof(T)
// and is compared with a device-to-device cudaMemcpyAsync (bytes read + written), the
// practical ceiling for a streaming kernel. A case with fewer rows than the device has
// multiprocessors cannot fill the GPU (the kernels work on whole rows per block): it is
// still timed, but its line ends with "(latency-bound: R rows < N SMs)" because its
// GB/s measures launch and latency, not bandwidth.
//
// Exit status: 0 done; 2 nothing to do (no CUDA device, report missing or unreadable,
// no qualifying case, bad command line); 1 a CUDA error while benchmarking.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_fill.h"
#include "rmsnorm/rmsnorm.cuh"

namespace {

using numgate::bench::FillType;

constexpr int kExitUsage = 2;
constexpr int kExitCuda = 1;
constexpr double kEps = 1e-6;  // Llama/Qwen3 default; the kernels' speed does not depend on it

/// A problem with the inputs (not a CUDA failure): printed, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    throw std::runtime_error(strf("%s failed at %s:%d: %s (%s)", what, file, line,
                                  cudaGetErrorName(err), cudaGetErrorString(err)));
  }
}
/// Checks a CUDA runtime call.
#define BENCH_CUDA(call) cuda_check((call), #call, __FILE__, __LINE__)
/// Checks a launcher's return value and then the last error.
#define BENCH_LAUNCH(call)                                                 \
  do {                                                                     \
    cuda_check((call), #call, __FILE__, __LINE__);                         \
    cuda_check(cudaGetLastError(), "launch of " #call, __FILE__, __LINE__); \
  } while (0)

// ------------------------------------------------------------------------------------
// report
// ------------------------------------------------------------------------------------

struct BenchCase {
  std::string name;   ///< first case name with this dtype and shape
  int duplicates = 0; ///< further qualifying cases with the same dtype and shape
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t rows = 0;
  int64_t hidden = 0;
};

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

bool known_dtype(const std::string& d) {
  return d == "fp32" || d == "bf16" || d == "fp16" || d == "fp64";
}

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError(strf("report '%s' not found or not readable. Run the GPU replay tests first "
                          "(they write the JSON report), or pass --report with its path.",
                          path.c_str()));
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(strf("report '%s' is not valid JSON (%s). Re-run the GPU replay tests to "
                          "regenerate it.",
                          path.c_str(), e.what()));
  }
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array()) {
    throw UsageError(strf("report '%s' has no \"cases\" array; it is not a numgate replay "
                          "report. Re-run the GPU replay tests to regenerate it.",
                          path.c_str()));
  }
  return j;
}

/// The qualifying cases, deduplicated by (dtype, shape), in report order. Prints one
/// "skipped" line per production rmsnorm case that cannot be timed.
std::vector<BenchCase> select_cases(const nlohmann::json& report, const std::string& path) {
  std::vector<BenchCase> out;
  int n_rmsnorm = 0, n_production = 0, n_pass = 0;
  for (const auto& c : report["cases"]) {
    std::string name = "?";
    try {
      if (!c.is_object()) continue;
      if (c.contains("case") && c["case"].is_string()) name = c["case"].get<std::string>();
      if (!c.contains("op") || !c["op"].is_string() || c["op"].get<std::string>() != "rmsnorm")
        continue;
      ++n_rmsnorm;
      const bool production =
          c.contains("production") && c["production"].is_boolean() && c["production"].get<bool>();
      if (!production) continue;
      ++n_production;
      const std::string verdict =
          c.contains("verdict") && c["verdict"].is_string() ? c["verdict"].get<std::string>() : "?";
      const std::string dtype =
          c.contains("dtype") && c["dtype"].is_string() ? c["dtype"].get<std::string>() : "?";
      if (verdict != "PASS") {
        std::printf("bench rmsnorm %s: skipped: numerics not PASS (verdict %s)\n", name.c_str(),
                    verdict.c_str());
        continue;
      }
      ++n_pass;
      if (!known_dtype(dtype)) {
        std::printf("bench rmsnorm %s: skipped: unknown dtype '%s' (expected fp32, bf16, fp16, fp64)\n",
                    name.c_str(), dtype.c_str());
        continue;
      }
      if (!c.contains("shape") || !c["shape"].is_array() || c["shape"].empty()) {
        std::printf("bench rmsnorm %s: skipped: missing or empty \"shape\"\n", name.c_str());
        continue;
      }
      BenchCase bc;
      bc.name = name;
      bc.dtype = dtype;
      bool ok = true;
      for (const auto& d : c["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1) {
          ok = false;
          break;
        }
        bc.shape.push_back(d.get<int64_t>());
      }
      if (!ok) {
        std::printf("bench rmsnorm %s: skipped: \"shape\" must hold positive integers\n", name.c_str());
        continue;
      }
      bc.hidden = bc.shape.back();
      bc.rows = 1;
      for (std::size_t i = 0; i + 1 < bc.shape.size() && ok; ++i) {
        if (bc.rows > INT64_MAX / bc.shape[i]) ok = false;
        else bc.rows *= bc.shape[i];
      }
      if (!ok || bc.hidden > 65536 || bc.rows > 2147483647) {
        std::printf("bench rmsnorm %s: skipped: shape [%s] outside the kernel limits "
                    "(hidden <= 65536, rows <= 2^31-1)\n",
                    name.c_str(), shape_str(bc.shape).c_str());
        continue;
      }
      auto same = std::find_if(out.begin(), out.end(), [&](const BenchCase& o) {
        return o.dtype == bc.dtype && o.shape == bc.shape;
      });
      if (same != out.end()) {
        ++same->duplicates;
        continue;
      }
      out.push_back(std::move(bc));
    } catch (const nlohmann::json::exception& e) {
      std::printf("bench rmsnorm %s: skipped: malformed case entry (%s)\n", name.c_str(), e.what());
    }
  }
  if (out.empty()) {
    throw UsageError(strf("no case in report '%s' qualifies for benchmarking: need op == \"rmsnorm\", "
                          "production == true and verdict == \"PASS\" (found %d rmsnorm cases, %d "
                          "of them production, %d of those PASS).",
                          path.c_str(), n_rmsnorm, n_production, n_pass));
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
  std::sort(us.begin(), us.end());
  const std::size_t n = us.size();
  Timing t;
  t.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
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
  void* src = nullptr;
  void* dst = nullptr;
  for (;;) {
    cudaError_t e1 = cudaMalloc(&src, size);
    cudaError_t e2 = e1 == cudaSuccess ? cudaMalloc(&dst, size) : e1;
    if (e1 == cudaSuccess && e2 == cudaSuccess) break;
    if (src) cudaFree(src);
    src = nullptr;
    (void)cudaGetLastError();  // clear the allocation failure
    if (size <= (std::size_t(16) << 20)) BENCH_CUDA(e2);
    size /= 2;
  }
  BENCH_CUDA(cudaMemsetAsync(src, 0x5a, size, stream));
  const Timing t = time_launches(stream, 3, 20, [&](int) {
    BENCH_CUDA(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice, stream));
  });
  BENCH_CUDA(cudaFree(src));
  BENCH_CUDA(cudaFree(dst));
  return 2.0 * static_cast<double>(size) / (t.median_us * 1e3);
}

struct Device {
  std::string name;
  std::size_t l2_bytes = 0;
  int sm_count = 0;  ///< multiprocessors: a case with fewer rows cannot fill the GPU
  double d2d_gbps = 0;
};

struct Options {
  std::string report;
  int iters = 200;
  int warmup = 20;
};

// ------------------------------------------------------------------------------------
// one case
// ------------------------------------------------------------------------------------

template <typename T>
struct FillTypeOf;
template <>
struct FillTypeOf<float> {
  static constexpr FillType value = FillType::fp32;
};
template <>
struct FillTypeOf<double> {
  static constexpr FillType value = FillType::fp64;
};
template <>
struct FillTypeOf<__half> {
  static constexpr FillType value = FillType::fp16;
};
template <>
struct FillTypeOf<__nv_bfloat16> {
  static constexpr FillType value = FillType::bf16;
};

template <typename T>
struct BufferSet {
  T* x = nullptr;
  T* w = nullptr;
  T* dy = nullptr;
  T* y = nullptr;
  T* dx = nullptr;
  T* dw = nullptr;
  void* ws = nullptr;
};

void print_line(const char* dir, const BenchCase& bc, const Timing& t, double bytes,
                const Device& dev) {
  const double gbps = bytes / (t.median_us * 1e3);
  std::string suffix = bc.name;
  if (bc.duplicates > 0) suffix += strf(" (+%d more with this dtype and shape)", bc.duplicates);
  // One block per row: fewer rows than SMs leaves SMs idle, so the time is launch and
  // latency, not bandwidth; still timed, but flagged so nobody reads GB/s as bandwidth.
  if (bc.rows < dev.sm_count)
    suffix += strf(" (latency-bound: %lld rows < %d SMs)", static_cast<long long>(bc.rows), dev.sm_count);
  std::printf("bench rmsnorm %-8s %s [%s]  median %.2f us  min %.2f us  %.1f GB/s  "
              "(%.1f%% of D2D copy %.1f GB/s)  case %s\n",
              dir, bc.dtype.c_str(), shape_str(bc.shape).c_str(), t.median_us, t.min_us, gbps,
              100.0 * gbps / dev.d2d_gbps, dev.d2d_gbps, suffix.c_str());
  std::fflush(stdout);
}

template <typename T>
void run_case(const BenchCase& bc, const Device& dev, const Options& opt, cudaStream_t stream) {
  namespace rms = numgate::rmsnorm;
  const int64_t rows = bc.rows, hidden = bc.hidden;
  const std::size_t elems = static_cast<std::size_t>(rows) * static_cast<std::size_t>(hidden);
  const std::size_t row_bytes = elems * sizeof(T);
  const std::size_t vec_bytes = static_cast<std::size_t>(hidden) * sizeof(T);
  const std::size_t ws_bytes = rms::backward_workspace_bytes(rows, hidden);
  const std::size_t set_bytes = 4 * row_bytes + 2 * vec_bytes + ws_bytes;
  // Size the rotation by the smallest per-launch footprint (forward: x, w, y), so that
  // between two uses of a set more than 2x L2 of other data has been touched.
  const std::size_t fwd_footprint = 2 * row_bytes + vec_bytes;
  std::size_t nsets = std::max<std::size_t>(2, 2 * dev.l2_bytes / fwd_footprint + 1);

  std::size_t free_b = 0, total_b = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t budget = free_b / 10 * 8;
  if (nsets * set_bytes > budget) nsets = budget / set_bytes;
  if (nsets == 0) {
    std::printf("bench rmsnorm %s: skipped: one buffer set needs %.1f MiB, only %.1f MiB free\n",
                bc.name.c_str(), set_bytes / 1048576.0, free_b / 1048576.0);
    return;
  }
  if (nsets * fwd_footprint <= 2 * dev.l2_bytes) {
    std::printf("bench rmsnorm %s: note: only %zu buffer set(s) fit in memory; some launches may "
                "read L2-warm data\n",
                bc.name.c_str(), nsets);
  }

  std::vector<BufferSet<T>> sets(nsets);
  auto alloc = [](auto** p, std::size_t bytes) {
    BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(p), std::max<std::size_t>(bytes, 1)));
  };
  auto free_all = [&]() {
    for (auto& s : sets) {
      for (void* p : {static_cast<void*>(s.x), static_cast<void*>(s.w), static_cast<void*>(s.dy),
                      static_cast<void*>(s.y), static_cast<void*>(s.dx), static_cast<void*>(s.dw),
                      s.ws}) {
        if (p) cudaFree(p);
      }
      s = BufferSet<T>{};
    }
  };
  try {
    const FillType ft = FillTypeOf<T>::value;
    for (std::size_t i = 0; i < nsets; ++i) {
      BufferSet<T>& s = sets[i];
      alloc(&s.x, row_bytes);
      alloc(&s.dy, row_bytes);
      alloc(&s.y, row_bytes);
      alloc(&s.dx, row_bytes);
      alloc(&s.w, vec_bytes);
      alloc(&s.dw, vec_bytes);
      alloc(&s.ws, ws_bytes);
      const std::uint64_t seed = 1000 + 8 * i;
      BENCH_CUDA(numgate::bench::fill_random(s.x, ft, elems, seed + 0, 0.25f, 1.25f, true, stream));
      BENCH_CUDA(numgate::bench::fill_random(s.dy, ft, elems, seed + 1, 0.25f, 1.25f, true, stream));
      BENCH_CUDA(numgate::bench::fill_random(s.w, ft, static_cast<std::size_t>(hidden), seed + 2,
                                             0.5f, 1.5f, false, stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));

    const Timing fwd = time_launches(stream, opt.warmup, opt.iters, [&](int i) {
      const BufferSet<T>& s = sets[static_cast<std::size_t>(i) % nsets];
      BENCH_LAUNCH(rms::forward<T>(s.x, s.w, s.y, rows, hidden, kEps, stream));
    });
    print_line("forward", bc, fwd, static_cast<double>(2 * row_bytes + vec_bytes), dev);

    const Timing bwd = time_launches(stream, opt.warmup, opt.iters, [&](int i) {
      const BufferSet<T>& s = sets[static_cast<std::size_t>(i) % nsets];
      BENCH_LAUNCH(rms::backward<T>(s.x, s.w, s.dy, s.dx, s.dw, rows, hidden, kEps, s.ws, ws_bytes,
                                    stream));
    });
    print_line("backward", bc, bwd, static_cast<double>(3 * row_bytes + 2 * vec_bytes), dev);
  } catch (...) {
    free_all();
    throw;
  }
  free_all();
}

int run(const Options& opt) {
  const nlohmann::json report = read_report(opt.report);
  const std::vector<BenchCase> cases = select_cases(report, opt.report);

  int ndev = 0;
  const cudaError_t derr = cudaGetDeviceCount(&ndev);
  if (derr != cudaSuccess || ndev == 0) {
    throw UsageError(strf("no CUDA device available (%s). Run numgate-bench on a machine with an "
                          "NVIDIA GPU and a working driver.",
                          derr != cudaSuccess ? cudaGetErrorString(derr) : "device count is 0"));
  }
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
  const double l2_mib = dev.l2_bytes / 1048576.0;
  std::printf("bench device: %s, L2 %s MiB, D2D copy %.1f GB/s (read+write)\n", dev.name.c_str(),
              (l2_mib == static_cast<double>(static_cast<int64_t>(l2_mib)) ? strf("%.0f", l2_mib)
                                                                          : strf("%.1f", l2_mib))
                  .c_str(),
              dev.d2d_gbps);
  std::fflush(stdout);

  for (const BenchCase& bc : cases) {
    if (bc.dtype == "fp32") run_case<float>(bc, dev, opt, stream);
    else if (bc.dtype == "bf16") run_case<__nv_bfloat16>(bc, dev, opt, stream);
    else if (bc.dtype == "fp16") run_case<__half>(bc, dev, opt, stream);
    else run_case<double>(bc, dev, opt, stream);
  }
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"numgate-bench: times the RMSNorm target kernels on the production cases that "
               "passed the numerics gate (reads the replay tests' JSON report)."};
  Options opt;
  app.add_option("--report", opt.report, "JSON report written by the GPU replay tests")->required();
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

  try {
    return run(opt);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "numgate-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-bench: error: %s\n", e.what());
    return kExitCuda;
  }
}
