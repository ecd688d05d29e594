// numgate-bench — what one benchmark run found, as console lines and as JSON (no CUDA
// here: tested on the CPU; the timing itself is in bench.cpp).
//
// bench.json, schema version 2 (written by numgate-bench, see README "Benchmark"):
//
//   {
//     "schema_version": 2,                 integer
//     "status": "ok" | "nothing_to_do" | "error",
//                                          ok: every qualifying case timed (exit 0);
//                                          nothing_to_do: no device or no qualifying case
//                                          (exit 2); error: a CUDA or other error (exit 1)
//     "message": string,                   why, when status is not "ok" ("" otherwise)
//     "report": string,                    the report.json the cases came from
//     "iters": integer, "warmup": integer, timed and untimed launches per pass
//     "kernel_clock": string,              "cupti" when kernel_us was measured, else why not
//     "outputs": "rotate" | "reuse",       numgate's output handling (--outputs; choose_outputs)
//     "device": null | {                   null when no device was opened
//       "name": string, "l2_bytes": integer (bytes), "sm_count": integer,
//       "d2d_copy_gbps": number            device-to-device copy, bytes read + written
//                                          per second / 1e9
//     },
//     "results": [{                        one per timed line, in console order
//       "op": string, "pass": string (lower case, e.g. "forward"), "dtype": string,
//       "variant": string,                 "" the op's main target, else the variant's name
//       "shape": [integer],                the timed shape
//       "params": {string: number},        the case's op parameters (eps, scale, ...)
//       "case": string,                    the verified case it was timed as
//       "duplicates": integer,             further passing cases with this op, dtype,
//                                          shape and parameters (not timed again)
//       "median_us", "min_us": number (microseconds per launch, CUDA events),
//       "kernel_us": number | null,        GPU time per launch: the summed durations of the
//                                          kernels and memsets of the timed launches (CUPTI),
//                                          / launches (a mean, as the peers are timed); null
//                                          without CUPTI (kernel_clock)
//       "kernel_median_us": number | null, the median over launches of one launch's summed
//                                          durations (null without CUPTI, or when the
//                                          activities do not split evenly over the launches,
//                                          or a record has no timestamps)
//       "kernel_span_us": number | null,   (last activity's end - first one's start) /
//                                          launches: the window's wall time per launch, gaps
//                                          included; below kernel_us only if activities
//                                          overlap or their timestamps are off (null: a
//                                          record without timestamps)
//       "bytes": number,                   minimal traffic of one launch (bytes)
//       "gbps": number,                    bytes / median time / 1e9
//       "fraction_of_d2d": number,         gbps / d2d_copy_gbps (a ratio, 0.5 = 50 %)
//       "rows": integer,                   rows of the case (TargetOp::rows)
//       "latency_bound": boolean,          rows < sm_count: the GB/s measures latency
//       "scaled_from": null | [integer],   a benchmark shape timed as a copy of the case
//                                          verified at this shape (kScaledShapes)
//       "peer": null | {                   with --peers: the fastest peer of the same
//                                          semantics at this op, pass, dtype, shape and
//                                          parameters (null: none in the peers file)
//         "name": string, "kernel_us": number, "note": string,
//         "ratio": number,                 numgate's time / the peer's: kernel_us / kernel_us
//                                          (median_us / kernel_us without CUPTI)
//         "event_ratio": number,           median_us / the peer's kernel_us
//         "counted": boolean,              a row of the won / lost count (main target or the
//                                          variant "fused"; other variants are compared only)
//         "won": boolean                   ratio <= 1.00 as printed (< 1.005)
//       }
//     }],
//     "peers": null | {                    with --peers
//       "file": string, "device": string, "outputs": string ("reuse" | "rotate"),
//       "same_outputs": boolean,           the peers' handling is numgate's ("outputs" above)
//       "launch": string,                  the peers' launch ("queued" | "per-call", bench_peers.py --launch)
//       "ce_ignored_every": integer,       the peers' cross-entropy targets: every N-th ignored (0: none,
//                                          as numgate-bench's; bench_peers.py --ce-ignored-every)
//       "won": integer, "lost": integer,
//       "event_won": integer,              rows won also by the event-timed median
//       "no_peer": integer                 counted lines without a peer row
//     },
//     "skipped": [string]                  the console's lines about cases not timed
//                                          ("bench <op> <case>: skipped: <why>", and the
//                                          count of cases below 2^20 elements)
//   }
//
// Non-finite numbers are the strings "nan", "-nan", "inf", "-inf" (as in report.json).
//
// The peers file (--peers FILE) is tools/bench_peers.py's JSON (schema_version 1; its file
// comment documents it): rows of op, pass ("forward", "backward" or "fused"), dtype, shape,
// params, peer, kernel_us and same_semantics. read_peers() checks every field it uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "numgate/dtype.h"

namespace numgate::bench {

constexpr int kBenchSchemaVersion = 2;

struct DeviceInfo {
  std::string name;
  std::size_t l2_bytes = 0;
  int sm_count = 0;      ///< multiprocessors: a case with fewer rows cannot fill the GPU
  double d2d_gbps = 0;   ///< measured device-to-device copy bandwidth (read + write), GB/s
};

/// One row of a peers file (tools/bench_peers.py).
struct PeerRow {
  std::string op, pass, peer, note;  ///< pass: "forward", "backward" or "fused"
  DType dtype = DType::fp32;
  std::vector<std::int64_t> shape;
  std::map<std::string, double> params;
  double kernel_us = 0;              ///< GPU time per call (profiler-summed kernel durations)
  bool same_semantics = true;
};

struct Peers {
  std::string file, device;
  /// The peers' output handling (bench_peers.py --outputs): "reuse" (each call's results
  /// dropped: the allocator hands the next call the same, L2-warm output blocks; also what
  /// a file without the field means) or "rotate" (outputs rotate with the input sets).
  std::string outputs = "reuse";
  /// How the peers were launched (bench_peers.py --launch): "queued" (the timed calls queued
  /// behind a GPU spin: kernels back to back, as numgate-bench's loop launches its own) or
  /// "per-call" (each call issued when the previous returned: the GPU idles between kernels
  /// where the host is slower; also what a file without the field means, written before it).
  std::string launch = "per-call";
  /// The peers' cross-entropy targets (bench_peers.py --ce-ignored-every): every N-th token
  /// ignore_index, 0 for none, as numgate-bench's (its index inputs are 0, a valid class, so
  /// its kernels read every row). Liger does not read an ignored token's row, so N > 0 times
  /// the peers on less work than numgate's. A file without the field was written when the
  /// script ignored every 7th token: 7.
  int ce_ignored_every = 7;
  std::vector<PeerRow> rows;
};

/// Reads a peers file; throws std::runtime_error naming the file, the row and the field
/// (and what to do) for anything missing or malformed.
Peers read_peers(const std::string& path);

/// The comparison of one line with its best peer.
struct PeerMatch {
  PeerRow best;
  double ratio = 0;        ///< numgate / peer, by kernel time (event median when no kernel time)
  double event_ratio = 0;  ///< numgate's event median / peer
  bool counted = false;    ///< main target, or variant "fused"
  bool won = false;        ///< ratio < 1.005 (prints as <= 1.00)
};

/// The median of `values` (the mean of the middle two for an even count); sorts them.
/// Throws std::invalid_argument for an empty vector.
double median_of(std::vector<double>& values);

/// One GPU activity (kernel or memset) of a kernel-clock window: CUPTI's start and end
/// timestamps, nanoseconds.
struct Activity {
  std::uint64_t start_ns = 0, end_ns = 0;
};

/// What a kernel-clock window of `launches` launches measured (microseconds per launch).
struct KernelClockStats {
  double mean_us = -1;    ///< summed durations / launches (kernel_us; the peers' method)
  double median_us = -1;  ///< median of the per-launch sums; < 0 when not split (below)
  double span_us = -1;    ///< (last end - first start) / launches; < 0 without activities
};

/// Summarizes a window: the activities sorted by start are split into `launches`
/// consecutive groups of equal size (one launch's kernels and memsets each; one stream, so
/// a launch's activities are consecutive), each group's durations summed. When the count is
/// not a multiple of `launches` median_us stays -1. A record without timestamps (start =
/// end = 0: CUPTI could not collect them) counts 0 in mean_us and leaves median_us and
/// span_us at -1. Throws std::invalid_argument for launches < 1 or an activity that ends
/// before it starts.
KernelClockStats summarize_kernel_clock(std::vector<Activity> activities, int launches);

/// One timed pass of one case.
struct Line {
  std::string op, pass, case_name;   ///< pass as TargetPass::name ("Forward")
  std::string variant;               ///< "" main target
  std::map<std::string, double> params;  ///< the case's op parameters
  double kernel_us = -1;             ///< CUPTI GPU time per launch; < 0: not measured
  double kernel_median_us = -1;      ///< KernelClockStats::median_us; < 0: not measured / not split
  double kernel_span_us = -1;        ///< KernelClockStats::span_us; < 0: not measured
  std::optional<PeerMatch> peer;     ///< set by compare_with_peers
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

/// The peers file's pass name for a line: "fused" for the variant "fused", else the
/// lower-case pass ("forward", "backward").
std::string peer_pass(const Line& l);
/// The fastest same-semantics peer row at l's op, peer_pass, dtype, shape and parameters
/// (every parameter the row names must equal l's), or nothing.
std::optional<PeerMatch> compare_with_peers(const Line& l, const Peers& peers);
/// The console line for a compared line, ending in '\n':
/// "peer rmsnorm forward bf16 [4x512x4096]  numgate 9.10 us (events 11.20)  best peer liger 9.60 us  ratio 0.95  WON"
std::string peer_line(const Line& l);

struct PeerSummary {
  int won = 0, lost = 0, event_won = 0, no_peer = 0;
};
PeerSummary summarize_peers(const std::vector<Line>& lines);
/// "peers: 20 of 24 rows won or tied (kernel time, the peers' method), 4 lost; by event-timed median 12 won; 3 lines without a peer"
std::string peer_summary_line(const PeerSummary& s);

/// numgate-bench's output handling. "rotate": every launch writes the outputs and workspace
/// of its own buffer set (cold L2 for writes too). "reuse": the inputs rotate as always but
/// every launch writes set 0's outputs and workspace, as a peer gets from PyTorch's caching
/// allocator when it drops each call's results (tools/bench_peers.py --outputs reuse).
/// requested: "rotate", "reuse" or "" (not given: the peers file's handling when there is
/// one, so that the comparison is symmetric; else "rotate"). Throws std::invalid_argument
/// for anything else.
std::string choose_outputs(const std::string& requested, const std::optional<Peers>& peers);
/// The head of the comparison, ending in '\n': "bench peers: FILE (N rows, device D); outputs
/// reuse on both sides", or with different handlings "...; numgate's outputs rotate, the
/// peers' reuse: NOT the same handling (see --outputs)".
std::string peers_header_line(const Peers& peers, const std::string& numgate_outputs);

struct Results {
  std::string status = "ok";  ///< "ok", "nothing_to_do" or "error"
  std::string message;
  std::string report;
  int iters = 0, warmup = 0;
  std::string kernel_clock = "not measured";  ///< "cupti", or why kernel_us is missing
  std::string outputs = "rotate";             ///< numgate's output handling (choose_outputs)
  bool have_device = false;
  std::optional<Peers> peers;  ///< --peers
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
