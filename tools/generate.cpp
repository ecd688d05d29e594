// numgate-generate — writes the golden fixtures (HDF5) of every registered op from its
// declared case list, or checks that the files on disk are what the code would write.
//
//   numgate-generate                       committed cases -> golden_data/<op>.h5
//   numgate-generate --check               regenerate in memory, compare, name stale cases
//   numgate-generate --set production --out-dir build/golden_data
//                                          production shapes -> <dir>/<op>_production.h5
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <chrono>
#include <filesystem>
#include <set>

#include "numgate/fixture_file.h"
#include "numgate/op.h"

#ifndef NUMGATE_SOURCE_DIR
#define NUMGATE_SOURCE_DIR "."
#endif
#ifndef NUMGATE_BINARY_DIR
#define NUMGATE_BINARY_DIR "build"
#endif

namespace {

using namespace numgate;

std::string file_for(const std::string& dir, const std::string& op, bool production) {
  return dir + "/" + op + (production ? "_production" : "") + ".h5";
}

std::vector<CaseSpec> selected(const Op& op, bool production) {
  std::vector<CaseSpec> out;
  for (auto& c : op.cases())
    if (c.production == production) out.push_back(c);
  return out;
}

// Cheap provenance check (no data comparison): used to skip regenerating large
// production files that are already current.
bool provenance_current(const std::string& path, const Op& op, const std::vector<CaseSpec>& cases) {
  try {
    const FixtureFileInfo info = read_fixture_info(path);
    if (info.op != op.name() || info.formula_version != op.formula_version() ||
        info.generator_version != kGeneratorVersion)
      return false;
    std::vector<std::string> names;
    for (const auto& c : cases) names.push_back(c.name);
    std::sort(names.begin(), names.end());
    if (names != info.cases) return false;
    for (const auto& c : cases) {
      const CaseData d = read_case_attributes(path, c.name);
      if (d.spec.seed != c.seed || d.spec.shape != c.shape || d.spec.dtype != c.dtype || d.spec.params != c.params ||
          d.spec.pattern != c.pattern || d.spec.gate != c.gate)
        return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

int check(const Op& op, const std::string& path, const std::vector<CaseSpec>& cases) {
  int stale = 0;
  FixtureFileInfo info;
  try {
    info = read_fixture_info(path);
  } catch (const FixtureError& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(cases.size());
  }
  // A file-level formula_version that differs makes the file stale even where every
  // case's own attributes happen to match (a doctored or half-migrated file).
  const bool file_stale = info.formula_version != op.formula_version();
  if (file_stale)
    spdlog::error("{}: formula_version {} on disk, {} in code: every case is stale", path, info.formula_version,
                  op.formula_version());
  std::set<std::string> declared;
  for (const auto& c : cases) {
    declared.insert(c.name);
    if (!std::binary_search(info.cases.begin(), info.cases.end(), c.name)) {
      spdlog::error("STALE {}/{}: declared in code but missing from {}", op.name(), c.name, path);
      ++stale;
      continue;
    }
    std::vector<std::string> diffs;
    try {
      diffs = compare_cases(materialize(op, c), read_case(path, c.name));
    } catch (const FixtureError& e) {
      diffs = {e.what()};
    }
    if (diffs.empty()) {
      spdlog::info("ok    {}/{}", op.name(), c.name);
    } else {
      ++stale;
      std::string what;
      for (const auto& d : diffs) what += (what.empty() ? "" : "; ") + d;
      spdlog::error("STALE {}/{}: {}", op.name(), c.name, what);
    }
  }
  for (const auto& n : info.cases)
    if (!declared.count(n)) {
      spdlog::error("STALE {}/{}: in {} but no longer declared", op.name(), n, path);
      ++stale;
    }
  return stale == 0 && file_stale ? 1 : stale;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "numgate-generate: writes golden fixtures (inputs, FP64 promotions, golden and reference outputs, "
      "declared gate parameters) for every registered op, or checks them (--check)."};
  std::vector<std::string> ops;
  std::string set = "committed";
  std::string out_dir;
  bool do_check = false, require_device = false, force = false;
  app.add_option("--op", ops, "Only these ops (default: all registered)");
  app.add_option("--set", set, "Which cases: committed (small, in git) or production (large, build tree)")
      ->check(CLI::IsMember({"committed", "production"}))
      ->capture_default_str();
  app.add_option("--out-dir", out_dir,
                 "Folder of the <op>.h5 / <op>_production.h5 files (default: the source tree's golden_data/ "
                 "for committed, the build tree's golden_data/ for production)");
  app.add_flag("--check", do_check,
               "Regenerate in memory and compare bit for bit with the files on disk; name every stale case and "
               "exit 1 if any");
  app.add_flag("--require-device", require_device,
               "Exit 77 (skipped) without writing anything when no CUDA device is present (production fixtures "
               "are only needed for target replay)");
  app.add_flag("--force", force, "Regenerate production files even when their provenance is current");
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("--jobs,-j", jobs, "Cases generated in parallel, across all selected ops (the output does not depend on it)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (require_device) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      spdlog::warn("no CUDA device: {} fixtures not generated (they are only needed for target replay)", set);
      return 77;
    }
  }
  const bool production = set == "production";
  if (out_dir.empty()) out_dir = std::string(production ? NUMGATE_BINARY_DIR : NUMGATE_SOURCE_DIR) + "/golden_data";
  try {
    if (ops.empty())
      for (const auto& op : all_ops()) ops.push_back(op->name());
    int stale = 0;
    // One pool of work over every op that needs writing: cases are independent pure
    // functions of their declaration, so they are materialized on several threads (the
    // bits do not depend on the thread count or order); an op's file is written by
    // whichever thread finishes its last case.
    struct Job {
      const Op* op;
      std::string name, path;
      std::vector<CaseSpec> cases;
      std::vector<CaseData> data;
      std::size_t done = 0;
    };
    std::vector<Job> jobs_todo;
    for (const auto& name : ops) {
      const Op& op = find_op(name);
      auto cases = selected(op, production);
      const std::string path = file_for(out_dir, name, production);
      if (do_check) {
        stale += check(op, path, cases);
        continue;
      }
      if (production && !force && provenance_current(path, op, cases)) {
        spdlog::info("{} is current ({} cases); --force regenerates it", path, cases.size());
        continue;
      }
      std::filesystem::create_directories(out_dir);
      Job j{&op, name, path, std::move(cases), {}, 0};
      j.data.resize(j.cases.size());
      jobs_todo.push_back(std::move(j));
    }
    std::vector<std::pair<std::size_t, std::size_t>> work;  // (job, case)
    for (std::size_t j = 0; j < jobs_todo.size(); ++j)
      for (std::size_t i = 0; i < jobs_todo[j].cases.size(); ++i) work.emplace_back(j, i);
    auto numel_of = [&](const std::pair<std::size_t, std::size_t>& w) {
      std::int64_t n = 1;
      for (auto d : jobs_todo[w.first].cases[w.second].shape) n *= d;
      return n;
    };
    // Largest first within each op, one op after the other: an op's file is written (and
    // its data freed) soon after its cases are handed out, so at most about two ops'
    // production data are in memory at once, while idle threads move on to the next op.
    std::stable_sort(work.begin(), work.end(), [&](const auto& x, const auto& y) {
      return x.first != y.first ? x.first < y.first : numel_of(x) > numel_of(y);
    });
    // An op without cases in this set still gets its (empty) file written.
    for (auto& j : jobs_todo)
      if (j.cases.empty()) write_fixture_file(j.path, j.name, j.op->formula_version(), j.data, !production);

    std::exception_ptr failure;
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::mutex hdf5_mutex;  // the HDF5 library may be built without thread safety: one writer at a time
    auto worker = [&] {
      for (std::size_t k; (k = next++) < work.size();) {
        Job& j = jobs_todo[work[k].first];
        const std::size_t i = work[k].second;
        const auto t0 = std::chrono::steady_clock::now();
        CaseData d = materialize(*j.op, j.cases[i]);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bool last = false;
        {
          std::lock_guard<std::mutex> lock(mutex);
          j.data[i] = std::move(d);
          last = ++j.done == j.cases.size();
          spdlog::info("generated {}/{} ({:.2f} s)", j.name, j.cases[i].name, s);
        }
        if (last) {
          std::lock_guard<std::mutex> hdf5_lock(hdf5_mutex);
          write_fixture_file(j.path, j.name, j.op->formula_version(), j.data, /*compress=*/!production);
          std::vector<CaseData>().swap(j.data);
          spdlog::info("wrote {} ({} cases, {:.2f} MB)", j.path, j.cases.size(),
                       static_cast<double>(std::filesystem::file_size(j.path)) / 1e6);
        }
      }
    };
    std::vector<std::thread> pool;
    const unsigned threads = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(work.size())));
    for (unsigned t = 0; t < threads && !work.empty(); ++t) pool.emplace_back([&] {
      try {
        worker();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = work.size();
      }
    });
    for (auto& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);
    if (do_check) {
      if (stale) {
        spdlog::error("{} stale case(s): regenerate with `numgate-generate` (README: Regenerating golden data)", stale);
        return 1;
      }
      spdlog::info("all fixtures current");
    }
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  return 0;
}
