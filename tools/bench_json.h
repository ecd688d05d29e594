// numgate-bench — what one benchmark run found, as console lines and as JSON (no CUDA
// here: tested on the CPU; the timing itself is in bench.cpp).
//
// bench.json, schema version 1 (written by numgate-bench, see README "Benchmark"):
//
//   {
//     "schema_version": 1,                 integer
//     "status": "ok" | "nothing_to_do" | "error",
//                                          ok: every qualifying case timed (exit 0);
//                                          nothing_to_do: no device or no qualifying case
//                                          (exit 2); error: a CUDA or other error (exit 1)
//     "message": string,                   why, when status is not "ok" ("" otherwise)
//     "report": string,                    the report.json the cases came from
//     "iters": integer, "warmup": integer, timed and untimed launches per pass
//     "device": null | {                   null when no device was opened
//       "name": string, "l2_bytes": integer (bytes), "sm_count": integer,
//       "d2d_copy_gbps": number            device-to-device copy, bytes read + written
//                                          per second / 1e9
//     },
//     "results": [{                        one per timed line, in console order
//       "op": string, "pass": string (lower case, e.g. "forward"), "dtype": string,
//       "shape": [integer],                the timed shape
//       "case": string,                    the verified case it was timed as
//       "duplicates": integer,             further passing cases with this op, dtype,
//                                          shape and parameters (not timed again)
//       "median_us", "min_us": number (microseconds per launch),
//       "bytes": number,                   minimal traffic of one launch (bytes)
//       "gbps": number,                    bytes / median time / 1e9
//       "fraction_of_d2d": number,         gbps / d2d_copy_gbps (a ratio, 0.5 = 50 %)
//       "rows": integer,                   rows of the case (TargetOp::rows)
//       "latency_bound": boolean,          rows < sm_count: the GB/s measures latency
//       "scaled_from": null | [integer]    a benchmark shape timed as a copy of the case
//                                          verified at this shape (kScaledShapes)
//     }],
//     "skipped": [string]                  the console's lines about cases not timed
//                                          ("bench <op> <case>: skipped: <why>", and the
//                                          count of cases below 2^20 elements)
//   }
//
// Non-finite numbers are the strings "nan", "-nan", "inf", "-inf" (as in report.json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "numgate/dtype.h"

namespace numgate::bench {

constexpr int kBenchSchemaVersion = 1;

struct DeviceInfo {
  std::string name;
  std::size_t l2_bytes = 0;
  int sm_count = 0;      ///< multiprocessors: a case with fewer rows cannot fill the GPU
  double d2d_gbps = 0;   ///< measured device-to-device copy bandwidth (read + write), GB/s
};

/// One timed pass of one case.
struct Line {
  std::string op, pass, case_name;   ///< pass as TargetPass::name ("Forward")
  DType dtype = DType::fp32;
  std::vector<std::int64_t> shape;   ///< the timed shape
  int duplicates = 0;
  std::vector<std::int64_t> scaled_from;  ///< non-empty: benchmark shape copied from that case shape
  std::int64_t rows = 0;
  double bytes = 0;                   ///< minimal traffic of one launch
  double median_us = 0, min_us = 0;
};

/// printf into a std::string (the benchmark's console lines and messages).
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

double gbps(const Line& l);
bool latency_bound(const Line& l, const DeviceInfo& d);
/// The console line for `l`, ending in '\n' ("bench rmsnorm           forward  bf16 [...]  median ...").
std::string console_line(const Line& l, const DeviceInfo& d);

struct Results {
  std::string status = "ok";  ///< "ok", "nothing_to_do" or "error"
  std::string message;
  std::string report;
  int iters = 0, warmup = 0;
  bool have_device = false;
  DeviceInfo device;
  std::vector<Line> lines;
  std::vector<std::string> skipped;  ///< console lines without the trailing newline
};

/// bench.json (schema above).
nlohmann::ordered_json to_json(const Results& r);
/// Writes to_json(r) to `path` atomically (numgate::write_file_atomically); throws
/// std::runtime_error naming the file.
void write_json(const Results& r, const std::string& path);

}  // namespace numgate::bench
