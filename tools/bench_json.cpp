#include "bench_json.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

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

Peers read_peers(const std::string& path) {
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("peers file '" + path + "': " + what +
                             " (write it with tools/bench_peers.py --bench ... --out " + path + ")");
  };
  std::ifstream in(path);
  if (!in) fail("cannot be opened");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) fail("the top level is not an object");
  if (!j.contains("schema_version") || !j["schema_version"].is_number_integer() || j["schema_version"].get<int>() != 1)
    fail("field 'schema_version' must be 1");
  if (!j.contains("rows") || !j["rows"].is_array()) fail("field 'rows' is missing or not an array");
  Peers p;
  p.file = path;
  if (j.contains("device") && j["device"].is_string()) p.device = j["device"].get<std::string>();
  if (j.contains("outputs")) {
    if (!j["outputs"].is_string() || (j["outputs"] != "reuse" && j["outputs"] != "rotate"))
      fail("field 'outputs' must be \"reuse\" or \"rotate\" (bench_peers.py --outputs)");
    p.outputs = j["outputs"].get<std::string>();
  }
  if (j.contains("launch")) {
    if (!j["launch"].is_string() || (j["launch"] != "per-call" && j["launch"] != "queued"))
      fail("field 'launch' must be \"queued\" or \"per-call\" (bench_peers.py --launch)");
    p.launch = j["launch"].get<std::string>();
  }
  if (j.contains("ce_ignored_every")) {
    if (!j["ce_ignored_every"].is_number_integer() || j["ce_ignored_every"].get<std::int64_t>() < 0 ||
        j["ce_ignored_every"].get<std::int64_t>() > INT_MAX)
      fail("field 'ce_ignored_every' must be an integer >= 0 (bench_peers.py --ce-ignored-every)");
    p.ce_ignored_every = j["ce_ignored_every"].get<int>();
  }
  std::size_t i = 0;
  for (const auto& r : j["rows"]) {
    const std::string at = "rows[" + std::to_string(i++) + "]";
    auto str = [&](const char* k) {
      if (!r.contains(k) || !r[k].is_string()) fail(at + ": field '" + k + "' is missing or not a string");
      return r[k].get<std::string>();
    };
    PeerRow row;
    row.op = str("op");
    row.pass = str("pass");
    row.peer = str("peer");
    if (row.pass != "forward" && row.pass != "backward" && row.pass != "fused")
      fail(at + ": field 'pass' is '" + row.pass + "', not forward, backward or fused");
    try {
      row.dtype = parse_dtype(str("dtype"));
    } catch (const std::invalid_argument& e) {
      fail(at + ": field 'dtype': " + e.what());
    }
    if (!r.contains("shape") || !r["shape"].is_array()) fail(at + ": field 'shape' is missing or not an array");
    for (const auto& d : r["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0) fail(at + ": field 'shape' holds a non-integer or negative extent");
      row.shape.push_back(d.get<std::int64_t>());
    }
    if (!r.contains("params") || !r["params"].is_object()) fail(at + ": field 'params' is missing or not an object");
    for (const auto& [k, v] : r["params"].items()) {
      if (!v.is_number()) fail(at + ": field 'params." + k + "' is not a number");
      row.params[k] = v.get<double>();
    }
    if (!r.contains("kernel_us") || !r["kernel_us"].is_number()) fail(at + ": field 'kernel_us' is missing or not a number");
    row.kernel_us = r["kernel_us"].get<double>();
    if (!(row.kernel_us > 0) || !std::isfinite(row.kernel_us)) fail(at + ": field 'kernel_us' must be a positive number");
    if (!r.contains("same_semantics") || !r["same_semantics"].is_boolean())
      fail(at + ": field 'same_semantics' is missing or not a boolean");
    row.same_semantics = r["same_semantics"].get<bool>();
    if (r.contains("note") && r["note"].is_string()) row.note = r["note"].get<std::string>();
    p.rows.push_back(std::move(row));
  }
  return p;
}

/// A line of the won / lost count: the main target, or cross-entropy's fused entry.
static bool counted(const Line& l) { return l.variant.empty() || l.variant == "fused"; }

std::string peer_pass(const Line& l) { return l.variant == "fused" ? "fused" : lower(l.pass); }

std::optional<PeerMatch> compare_with_peers(const Line& l, const Peers& peers) {
  const std::string pass = peer_pass(l);
  const PeerRow* best = nullptr;
  for (const PeerRow& r : peers.rows) {
    if (!r.same_semantics || r.op != l.op || r.pass != pass || r.dtype != l.dtype || r.shape != l.shape) continue;
    bool same = true;
    for (const auto& [k, v] : r.params) {
      auto it = l.params.find(k);
      same = same && it != l.params.end() && it->second == v;
    }
    if (same && (!best || r.kernel_us < best->kernel_us)) best = &r;
  }
  if (!best) return std::nullopt;
  PeerMatch m;
  m.best = *best;
  const double mine = l.kernel_us > 0 ? l.kernel_us : l.median_us;
  m.ratio = mine / best->kernel_us;
  m.event_ratio = l.median_us / best->kernel_us;
  m.counted = counted(l);
  m.won = m.ratio < 1.005;
  return m;
}

std::string choose_outputs(const std::string& requested, const std::optional<Peers>& peers) {
  if (requested == "rotate" || requested == "reuse") return requested;
  if (!requested.empty())
    throw std::invalid_argument("--outputs must be \"rotate\" or \"reuse\" (got \"" + requested + "\")");
  return peers ? peers->outputs : "rotate";
}

std::string peers_header_line(const Peers& peers, const std::string& numgate_outputs) {
  const std::string head =
      strf("bench peers: %s (%zu rows, device %s); ", peers.file.c_str(), peers.rows.size(), peers.device.c_str());
  const std::string launch = peers.launch == "queued" ? "; peers' calls queued (back to back, like numgate's)"
                                                      : "; peers launched per call (the GPU idles where the host is slower)";
  const std::string ce =
      peers.ce_ignored_every > 0
          ? strf("; the peers' cross-entropy targets ignore one token in %d, numgate-bench's none: NOT the same "
                 "inputs (see --ce-ignored-every)",
                 peers.ce_ignored_every)
          : "";
  if (peers.outputs == numgate_outputs)
    return head + strf("outputs %s on both sides%s%s\n", numgate_outputs.c_str(), launch.c_str(), ce.c_str());
  return head + strf("numgate's outputs %s, the peers' %s: NOT the same handling (see --outputs)%s%s\n",
                     numgate_outputs.c_str(), peers.outputs.c_str(), launch.c_str(), ce.c_str());
}

std::string peer_line(const Line& l) {
  std::string label = lower(l.pass) + (l.variant.empty() ? "" : " [" + l.variant + "]");
  std::string head = strf("peer %-17s %-8s %s [%s]", l.op.c_str(), label.c_str(), std::string(dtype_name(l.dtype)).c_str(),
                          dims_str(l.shape).c_str());
  std::string mine = l.kernel_us > 0 ? strf("numgate %.2f us (events %.2f)", l.kernel_us, l.median_us)
                                     : strf("numgate %.2f us (events; no kernel clock)", l.median_us);
  if (!l.peer) return head + "  " + mine + "  no peer of the same semantics\n";
  const PeerMatch& m = *l.peer;
  return head + "  " + mine +
         strf("  best peer %s %.2f us  ratio %.2f (events %.2f)  %s%s\n", m.best.peer.c_str(), m.best.kernel_us, m.ratio,
              m.event_ratio, m.won ? "WON" : "LOST", m.counted ? "" : " (variant: not counted)");
}

PeerSummary summarize_peers(const std::vector<Line>& lines) {
  PeerSummary s;
  for (const Line& l : lines) {
    if (!counted(l)) continue;
    if (!l.peer) {
      ++s.no_peer;
      continue;
    }
    (l.peer->won ? s.won : s.lost) += 1;
    s.event_won += l.peer->event_ratio < 1.005;
  }
  return s;
}

std::string peer_summary_line(const PeerSummary& s) {
  return strf("peers: %d of %d rows won or tied (kernel time, the peers' method), %d lost; by event-timed median %d "
              "won; %d line(s) without a peer of the same semantics\n",
              s.won, s.won + s.lost, s.lost, s.event_won, s.no_peer);
}

double median_of(std::vector<double>& values) {
  if (values.empty()) throw std::invalid_argument("median_of: no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

KernelClockStats summarize_kernel_clock(std::vector<Activity> activities, int launches) {
  if (launches < 1) throw std::invalid_argument(strf("summarize_kernel_clock: launches = %d, expected >= 1", launches));
  KernelClockStats st;
  if (activities.empty()) return st;
  // CUPTI gives start = end = 0 for a record whose timestamps it could not collect: it
  // counts 0 in the mean (as before), but the window and the launches' groups are unknown.
  bool untimed = false;
  for (const Activity& a : activities) {
    if (a.end_ns < a.start_ns)
      throw std::invalid_argument(strf("summarize_kernel_clock: an activity ends (%llu ns) before it starts (%llu ns)",
                                       static_cast<unsigned long long>(a.end_ns),
                                       static_cast<unsigned long long>(a.start_ns)));
    untimed = untimed || (a.start_ns == 0 && a.end_ns == 0);
  }
  std::stable_sort(activities.begin(), activities.end(),
                   [](const Activity& x, const Activity& y) { return x.start_ns < y.start_ns; });
  double total_ns = 0;
  std::uint64_t last_end = 0;
  for (const Activity& a : activities) {
    total_ns += static_cast<double>(a.end_ns - a.start_ns);
    last_end = std::max(last_end, a.end_ns);
  }
  st.mean_us = total_ns / 1e3 / launches;
  if (untimed) return st;
  st.span_us = static_cast<double>(last_end - activities.front().start_ns) / 1e3 / launches;
  const std::size_t n = static_cast<std::size_t>(launches);
  if (activities.size() % n != 0) return st;
  const std::size_t per = activities.size() / n;
  std::vector<double> sums(n, 0.0);
  for (std::size_t i = 0; i < activities.size(); ++i)
    sums[i / per] += static_cast<double>(activities[i].end_ns - activities[i].start_ns) / 1e3;
  st.median_us = median_of(sums);
  return st;
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
  const std::string label = lower(l.pass) + (l.variant.empty() ? "" : " [" + l.variant + "]");
  std::string kernel = l.kernel_us > 0 ? strf("  kernel %.2f us", l.kernel_us) : "";
  // The kernel time is a mean over launches (the peers' method); say so where one launch's
  // median differs by more than 1%, or where the summed durations exceed the window's wall
  // time (overlapping activities or timestamps off: the kernel time is then suspect).
  if (l.kernel_us > 0 && l.kernel_median_us > 0 && std::fabs(l.kernel_median_us / l.kernel_us - 1.0) > 0.01)
    kernel += strf(" (per-launch median %.2f us)", l.kernel_median_us);
  if (l.kernel_us > 0 && l.kernel_span_us > 0 && l.kernel_span_us < l.kernel_us * 0.999)
    kernel += strf(" (window %.2f us per launch < kernel time: activities overlap or records off)", l.kernel_span_us);
  return strf("bench %-17s %-8s %s [%s]  median %.2f us  min %.2f us%s  %.1f GB/s  "
              "(%.1f%% of D2D copy %.1f GB/s)  case %s\n",
              l.op.c_str(), label.c_str(), std::string(dtype_name(l.dtype)).c_str(),
              dims_str(l.shape).c_str(), l.median_us, l.min_us, kernel.c_str(), g, 100.0 * g / d.d2d_gbps, d.d2d_gbps,
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
  j["kernel_clock"] = r.kernel_clock;
  j["outputs"] = r.outputs;
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
    e["variant"] = l.variant;
    e["shape"] = l.shape;
    e["params"] = ojson::object();
    for (const auto& [k, v] : l.params) e["params"][k] = json_double(v);
    e["case"] = l.case_name;
    e["duplicates"] = l.duplicates;
    e["median_us"] = json_double(l.median_us);
    e["min_us"] = json_double(l.min_us);
    if (l.kernel_us > 0) e["kernel_us"] = json_double(l.kernel_us);
    else e["kernel_us"] = nullptr;
    if (l.kernel_us > 0 && l.kernel_median_us > 0) e["kernel_median_us"] = json_double(l.kernel_median_us);
    else e["kernel_median_us"] = nullptr;
    if (l.kernel_us > 0 && l.kernel_span_us > 0) e["kernel_span_us"] = json_double(l.kernel_span_us);
    else e["kernel_span_us"] = nullptr;
    e["bytes"] = json_double(l.bytes);
    e["gbps"] = json_double(g);
    e["fraction_of_d2d"] = json_double(g / r.device.d2d_gbps);
    e["rows"] = l.rows;
    e["latency_bound"] = latency_bound(l, r.device);
    if (l.scaled_from.empty()) e["scaled_from"] = nullptr;
    else e["scaled_from"] = l.scaled_from;
    if (!l.peer) {
      e["peer"] = nullptr;
    } else {
      const PeerMatch& m = *l.peer;
      e["peer"] = {{"name", m.best.peer},          {"kernel_us", json_double(m.best.kernel_us)},
                   {"note", m.best.note},          {"ratio", json_double(m.ratio)},
                   {"event_ratio", json_double(m.event_ratio)}, {"counted", m.counted}, {"won", m.won}};
    }
    j["results"].push_back(std::move(e));
  }
  if (r.peers) {
    const PeerSummary s = summarize_peers(r.lines);
    j["peers"] = {{"file", r.peers->file},
                  {"device", r.peers->device},
                  {"outputs", r.peers->outputs},
                  {"same_outputs", r.peers->outputs == r.outputs},
                  {"launch", r.peers->launch},
                  {"ce_ignored_every", r.peers->ce_ignored_every},
                  {"won", s.won},
                  {"lost", s.lost},
                  {"event_won", s.event_won},
                  {"no_peer", s.no_peer}};
  } else {
    j["peers"] = nullptr;
  }
  j["skipped"] = r.skipped;
  return j;
}

void write_json(const Results& r, const std::string& path) {
  write_file_atomically(path, to_json(r).dump(2) + "\n");
}

}  // namespace numgate::bench
