#include "bench_json.h"

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "numgate/report.h"
#include "numgate/tensor.h"

namespace numgate::bench {

namespace {
std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

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

double gbps(const Line& l) { return l.bytes / (l.median_us * 1e3); }

bool latency_bound(const Line& l, const DeviceInfo& d) { return l.rows < d.sm_count; }

std::string console_line(const Line& l, const DeviceInfo& d) {
  const double g = gbps(l);
  std::string suffix = l.case_name;
  if (l.duplicates > 0) suffix += strf(" (+%d more with this dtype, shape and parameters)", l.duplicates);
  if (!l.scaled_from.empty())
    suffix += strf(" (benchmark shape; numerics verified on that case at [%s], same parameters)",
                   dims_str(l.scaled_from).c_str());
  // Fewer rows than SMs leaves SMs idle under one block per row, so the time is launch and
  // latency, not bandwidth; still timed, but flagged so nobody reads GB/s as bandwidth.
  if (latency_bound(l, d))
    suffix += strf(" (latency-bound: %lld rows < %d SMs)", static_cast<long long>(l.rows), d.sm_count);
  return strf("bench %-17s %-8s %s [%s]  median %.2f us  min %.2f us  %.1f GB/s  "
              "(%.1f%% of D2D copy %.1f GB/s)  case %s\n",
              l.op.c_str(), lower(l.pass).c_str(), std::string(dtype_name(l.dtype)).c_str(),
              dims_str(l.shape).c_str(), l.median_us, l.min_us, g, 100.0 * g / d.d2d_gbps, d.d2d_gbps,
              suffix.c_str());
}

nlohmann::ordered_json to_json(const Results& r) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["schema_version"] = kBenchSchemaVersion;
  j["status"] = r.status;
  j["message"] = r.message;
  j["report"] = r.report;
  j["iters"] = r.iters;
  j["warmup"] = r.warmup;
  if (r.have_device)
    j["device"] = {{"name", r.device.name},
                   {"l2_bytes", r.device.l2_bytes},
                   {"sm_count", r.device.sm_count},
                   {"d2d_copy_gbps", json_double(r.device.d2d_gbps)}};
  else
    j["device"] = nullptr;
  j["results"] = ojson::array();
  for (const Line& l : r.lines) {
    const double g = gbps(l);
    ojson e;
    e["op"] = l.op;
    e["pass"] = lower(l.pass);
    e["dtype"] = std::string(dtype_name(l.dtype));
    e["shape"] = l.shape;
    e["case"] = l.case_name;
    e["duplicates"] = l.duplicates;
    e["median_us"] = json_double(l.median_us);
    e["min_us"] = json_double(l.min_us);
    e["bytes"] = json_double(l.bytes);
    e["gbps"] = json_double(g);
    e["fraction_of_d2d"] = json_double(g / r.device.d2d_gbps);
    e["rows"] = l.rows;
    e["latency_bound"] = latency_bound(l, r.device);
    if (l.scaled_from.empty()) e["scaled_from"] = nullptr;
    else e["scaled_from"] = l.scaled_from;
    j["results"].push_back(std::move(e));
  }
  j["skipped"] = r.skipped;
  return j;
}

void write_json(const Results& r, const std::string& path) {
  write_file_atomically(path, to_json(r).dump(2) + "\n");
}

}  // namespace numgate::bench
