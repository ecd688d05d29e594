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

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <chrono>
#include <filesystem>
#include <memory>
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

// --check of one op's file: regenerates every case in memory and compares bit for bit.
// Every problem (unreadable file or case, failed digest, an oracle that throws, out of
// memory) is reported with the file and case, and the remaining cases are still checked.
// Returns the number of stale cases (at least 1 when the file itself is stale).
int check(const Op& op, const std::string& path, const std::vector<CaseSpec>& cases) {
  int stale = 0;
  FixtureFileInfo info;
  try {
    info = read_fixture_info(path);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return std::max<int>(1, static_cast<int>(cases.size()));
  }
  // File-level attributes that differ make the file stale even where every case's own
  // attributes happen to match (a doctored or half-migrated file).
  bool file_stale = false;
  if (info.op != op.name()) {
    spdlog::error("STALE {}: file attribute op '{}' does not match the file name (op '{}'): regenerate it", path,
                  info.op, op.name());
    file_stale = true;
  }
  if (info.formula_version != op.formula_version()) {
    spdlog::error("STALE {}: formula_version {} on disk, {} in code: every case is stale", path, info.formula_version,
                  op.formula_version());
    file_stale = true;
  }
  if (info.generator_version != kGeneratorVersion) {
    spdlog::error("STALE {}: generator_version {} on disk, {} in code", path, info.generator_version, kGeneratorVersion);
    file_stale = true;
  }
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
    } catch (const std::bad_alloc&) {
      diffs = {"out of memory while regenerating or reading the case"};
    } catch (const std::exception& e) {
      diffs = {e.what()};
    }
    if (diffs.empty()) {
      spdlog::info("ok    {}/{}", op.name(), c.name);
    } else {
      ++stale;
      std::string what;
      for (const auto& d : diffs) what += (what.empty() ? "" : "; ") + d;
      spdlog::error("STALE {}/{} ({}): {}", op.name(), c.name, path, what);
    }
  }
  for (const auto& n : info.cases)
    if (!declared.count(n)) {
      spdlog::error("STALE {}/{}: in {} but no longer declared", op.name(), n, path);
      ++stale;
    }
  return stale == 0 && file_stale ? 1 : stale;
}

// Entries of the fixture folder that no registered op owns: *.h5 files other than
// <op>.h5 (committed set) / <op>_production.h5 (production set), and fixture names that
// are not regular files (a FIFO, a folder, a symlink loop). The replay would read or trip
// over them; --check refuses them. Returns the number found.
int stray_entries(const std::string& dir, bool production) {
  namespace fs = std::filesystem;
  std::set<std::string> expected;
  for (const auto& op : all_ops()) expected.insert(op->name() + (production ? "_production" : "") + ".h5");
  int found = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    if (p.extension() != ".h5") continue;
    const std::string name = p.filename().string();
    std::error_code sec;
    const fs::file_type type = fs::status(p, sec).type();
    if (!expected.count(name)) {
      // The other set's files may share a folder (--out-dir for both): not stray.
      bool other_set = false;
      for (const auto& op : all_ops()) other_set |= name == op->name() + (production ? "" : "_production") + ".h5";
      if (other_set) continue;
      spdlog::error("STRAY {}: no registered op owns this fixture name (expected <op>{}.h5); remove it", p.string(),
                    production ? "_production" : "");
      ++found;
    } else if (sec || type != fs::file_type::regular) {
      spdlog::error("STRAY {}: not a regular file ({}); remove it and regenerate", p.string(),
                    sec ? sec.message() : "FIFO, folder, socket or device");
      ++found;
    }
  }
  if (ec) {
    spdlog::error("cannot list {}: {}", dir, ec.message());
    ++found;
  }
  return found;
}

// Host memory of one case while it is materialized (inputs, their FP64 promotions, golden
// values and sums of |terms| in FP64, reference, the oracles' temporaries), per element of
// its declared shape: measured 127 bytes for softmax's 1x8x4096x4096 production case (17.1
// GB), 101 for RMSNorm's 1x8192x4096. An estimate for scheduling, not a limit.
constexpr double kBytesPerElement = 128;

double default_memory_budget_gb() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const double physical_gb = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) / 1e9 : 24;
  return std::min(20.0, physical_gb * 0.8);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "numgate-generate: writes golden fixtures (inputs, their FP64 promotions in committed files, golden and reference outputs, "
      "declared gate parameters) for every registered op, or checks them (--check)."};
  std::vector<std::string> ops;
  std::string set = "committed";
  std::string out_dir;
  bool do_check = false, require_device = false, force = false;
  app.add_option("--op", ops, "Only these ops (default: all registered)");
  app.add_option("--set", set, "Which cases: committed (small, in git) or production (large, build tree)")
      ->check(CLI::IsMember({"committed", "production"}))
      ->capture_default_str();
  bool out_dir_given = false;
  app.add_option("--out-dir", out_dir,
                 "Folder of the <op>.h5 / <op>_production.h5 files (default: the source tree's golden_data/ "
                 "for committed, the build tree's golden_data/ for production)")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("must not be empty (omit --out-dir for the default folder)") : std::string();
      })
      ->each([&](const std::string&) { out_dir_given = true; });
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
  double memory_budget_gb = default_memory_budget_gb();
  app.add_option("--memory-budget-gb", memory_budget_gb,
                 "Host memory for the cases in flight (materializing or waiting to be written), estimated at " +
                     std::to_string(static_cast<int>(kBytesPerElement)) +
                     " bytes per element of a case's shape; a case above it runs alone; 0 = no limit (default: "
                     "min(20, 80% of physical memory): one 17 GB case beside small ones, two never together)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  if (require_device) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      spdlog::warn("no CUDA device: {} fixtures not generated (they are only needed for target replay)", set);
      return 77;
    }
  }
  const bool production = set == "production";
  if (!out_dir_given) out_dir = std::string(production ? NUMGATE_BINARY_DIR : NUMGATE_SOURCE_DIR) + "/golden_data";
  try {
    const bool all_ops_selected = ops.empty();
    if (ops.empty())
      for (const auto& op : all_ops()) ops.push_back(op->name());
    int stale = 0;
    // One pool of work over every op that needs writing: cases are independent pure
    // functions of their declaration, so they are materialized on several threads (the
    // bits do not depend on the thread count or order). Each op's file is written
    // incrementally (FixtureWriter): a materialized case is appended as soon as every case
    // handed out before it in that op has been, and then freed, so only the cases in
    // flight (about one per thread) are in memory, not whole ops.
    struct Job {
      const Op* op;
      std::string name, path;
      std::vector<CaseSpec> cases;
      std::vector<std::size_t> order;                // case indices in the order handed out = written
      std::vector<std::unique_ptr<CaseData>> ready;  // by position in `order`, until written
      std::vector<std::size_t> work_index;           // by position: index into `work`
      std::size_t written = 0;                       // positions appended so far
      std::unique_ptr<FixtureWriter> writer;
    };
    std::vector<Job> jobs_todo;
    for (const auto& name : ops) find_op(name);  // an unknown --op is a usage error, before any work
    if (do_check && all_ops_selected) stale += stray_entries(out_dir, production);
    for (const auto& name : ops) {
      const Op& op = find_op(name);
      auto cases = selected(op, production);
      const std::string path = file_for(out_dir, name, production);
      if (do_check) {
        try {
          stale += check(op, path, cases);
        } catch (const std::exception& e) {  // never stops the check of the other ops
          spdlog::error("STALE {}: {}", path, e.what());
          ++stale;
        }
        continue;
      }
      if (production && !force) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string why = fixture_not_current(path, op, cases);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (why.empty()) {
          spdlog::info("{} is current ({} cases, digests verified in {:.2f} s); --force regenerates it", path,
                       cases.size(), s);
          continue;
        }
        spdlog::info("regenerating {}: {}", path, why);
      }
      std::filesystem::create_directories(out_dir);
      Job j{&op, name, path, std::move(cases), {}, {}, {}, 0, nullptr};
      jobs_todo.push_back(std::move(j));
    }
    auto numel_of = [&](const Job& j, std::size_t i) {
      std::int64_t n = 1;
      for (auto d : j.cases[i].shape) n *= d;
      return n;
    };
    // Ops one after the other. Committed files: cases in declared order (the files' bytes
    // stay those of every earlier build). Production: largest first within each op, so no
    // large case starts last while the other threads idle; that order is deterministic
    // (stable sort of the declared order), and it is also the order the cases are stored in.
    std::vector<std::pair<std::size_t, std::size_t>> work;  // (job, position in its order)
    for (std::size_t j = 0; j < jobs_todo.size(); ++j) {
      Job& job = jobs_todo[j];
      job.order.resize(job.cases.size());
      for (std::size_t i = 0; i < job.order.size(); ++i) job.order[i] = i;
      if (production)
        std::stable_sort(job.order.begin(), job.order.end(),
                         [&](std::size_t x, std::size_t y) { return numel_of(job, x) > numel_of(job, y); });
      job.ready.resize(job.cases.size());
      job.work_index.resize(job.cases.size());
      for (std::size_t k = 0; k < job.order.size(); ++k) {
        job.work_index[k] = work.size();
        work.emplace_back(j, k);
      }
    }
    // An op without cases in this set still gets its (empty) file written.
    for (auto& j : jobs_todo)
      if (j.cases.empty()) write_fixture_file(j.path, j.name, j.op->formula_version(), {}, !production);

    std::exception_ptr failure;
    std::atomic<bool> stop{false};
    std::mutex mutex;       // jobs' bookkeeping and the scheduler
    std::mutex hdf5_mutex;  // the HDF5 library may be built without thread safety: one writer at a time
    std::condition_variable changed;
    // The scheduler: a case starts when its estimated memory fits in what the cases in
    // flight (materializing, or materialized and not yet written) leave of the budget,
    // taking the first that fits in work order; when none fits, no case is materializing
    // and none is ready to be written, the first not started runs anyway (alone, or beside
    // cases that wait for it to be written first: never a deadlock). The files do not
    // depend on this order.
    const double budget = memory_budget_gb * 1e9;
    std::vector<double> cost(work.size());
    for (std::size_t k = 0; k < work.size(); ++k) {
      const Job& j = jobs_todo[work[k].first];
      cost[k] = static_cast<double>(numel_of(j, j.order[work[k].second])) * kBytesPerElement;
    }
    std::vector<bool> started(work.size(), false);
    std::size_t first_unstarted = 0, materializing = 0, appending = 0;
    double reserved = 0;
    auto take = [&]() -> std::size_t {  // work.size(): nothing left
      std::unique_lock<std::mutex> lock(mutex);
      for (;;) {
        if (stop) return work.size();
        while (first_unstarted < work.size() && started[first_unstarted]) ++first_unstarted;
        if (first_unstarted == work.size()) return work.size();
        std::size_t pick = work.size();
        for (std::size_t k = first_unstarted; k < work.size() && pick == work.size(); ++k)
          if (!started[k] && (budget <= 0 || reserved + cost[k] <= budget)) pick = k;
        // Over the budget only when nothing else can free memory: no case materializing
        // and none about to be written (every waiting case waits for one not started).
        bool writable = false;
        for (const Job& j : jobs_todo) writable |= j.written < j.order.size() && j.ready[j.written] != nullptr;
        if (pick == work.size() && materializing == 0 && appending == 0 && !writable) pick = first_unstarted;
        if (pick < work.size()) {
          started[pick] = true;
          reserved += cost[pick];
          ++materializing;
          return pick;
        }
        changed.wait(lock);
      }
    };
    // Appends every case of `j` that is next in its order and ready, then commits the file
    // after its last case. Whoever deposits a case calls it; one thread at a time writes.
    auto drain = [&](Job& j) {
      std::lock_guard<std::mutex> hdf5_lock(hdf5_mutex);
      for (;;) {
        std::unique_ptr<CaseData> d;
        std::size_t k = 0;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (stop || j.written == j.order.size() || !j.ready[j.written]) return;
          d = std::move(j.ready[j.written]);
          k = j.work_index[j.written];
          ++appending;
        }
        if (!j.writer)
          j.writer = std::make_unique<FixtureWriter>(j.path, j.name, j.op->formula_version(), /*compress=*/!production);
        j.writer->append(*d);
        d.reset();  // freed as soon as it is on disk
        bool last = false;
        {
          std::lock_guard<std::mutex> lock(mutex);
          last = ++j.written == j.order.size();
          reserved -= cost[k];
          --appending;
        }
        changed.notify_all();
        if (last) {
          j.writer->commit();
          j.writer.reset();
          spdlog::info("wrote {} ({} cases, {:.2f} MB)", j.path, j.cases.size(),
                       static_cast<double>(std::filesystem::file_size(j.path)) / 1e6);
        }
      }
    };
    auto worker = [&] {
      for (std::size_t k; (k = take()) < work.size();) {
        Job& j = jobs_todo[work[k].first];
        const std::size_t pos = work[k].second, i = j.order[pos];
        const auto t0 = std::chrono::steady_clock::now();
        auto d = std::make_unique<CaseData>();
        try {
          *d = materialize(*j.op, j.cases[i]);
        } catch (const std::bad_alloc&) {
          throw std::runtime_error("generating " + j.name + "/" + j.cases[i].name + ": out of memory (lower -j or --memory-budget-gb)");
        } catch (const std::exception& e) {
          throw std::runtime_error("generating " + j.name + "/" + j.cases[i].name + ": " + e.what());
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        {
          std::lock_guard<std::mutex> lock(mutex);
          j.ready[pos] = std::move(d);
          --materializing;
          spdlog::info("generated {}/{} ({:.2f} s)", j.name, j.cases[i].name, s);
        }
        changed.notify_all();
        drain(j);
      }
    };
    if (production && budget > 0 && !work.empty())
      spdlog::info("memory budget {:.1f} GB for the cases in flight (--memory-budget-gb)", memory_budget_gb);
    std::vector<std::thread> pool;
    const unsigned threads = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(work.size())));
    for (unsigned t = 0; t < threads && !work.empty(); ++t) pool.emplace_back([&] {
      try {
        worker();
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!failure) failure = std::current_exception();
          stop = true;  // no more cases, and no more HDF5 calls after a failed write
        }
        changed.notify_all();
      }
    });
    for (auto& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);  // unfinished writers remove their temporaries
    if (do_check) {
      if (stale) {
        spdlog::error("{} stale case(s) or stray file(s): regenerate with `numgate-generate` (README: Regenerating "
                      "golden data)", stale);
        return 1;
      }
      spdlog::info("all fixtures current");
    }
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    spdlog::info("peak host memory {:.2f} GB", static_cast<double>(ru.ru_maxrss) * 1024 / 1e9);
  } catch (const FixtureWriteError& e) {
    // HDF5 cannot be shut down cleanly after a failed flush (see FixtureWriteError).
    spdlog::error("{}", e.what());
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(2);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  return 0;
}
