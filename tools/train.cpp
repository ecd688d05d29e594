// numgate-train — gate 3 (SPEC §6): a short training run of a Qwen3-shaped decoder with the
// target kernels against the reference path (trainer/model.h), the loss-curve gate
// (trainer/loss_gate.h), the first-divergence finder, and the late-class mutants.
//
//   numgate-train curve   --seed S --steps N --target LIST [--mutant M] --csv FILE
//   numgate-train gate    --out-dir DIR [--seeds 1,2] [--steps 200] [--mutant M] [--diverge-at K]
//   numgate-train diverge --step K --seed S [--target LIST] [--mutant M] [--out FILE.md]
//   numgate-train mutants --out-dir DIR [--steps 200] [--seeds 1,2] [--diverge-at K]
//
// --target: "all", "none", or a list of rmsnorm, rope, softmax, swiglu, cross_entropy,
// dropout_add (the ops that run numgate's kernels; the rest run the reference path); the
// environment variable NUMGATE_TRAIN_TARGET gives the default of --target.
//
// gate: for every seed, the reference path (--target none) and the all-target path
// (--target all, with --mutant if given) train --steps steps on the seed's corpus; the
// reference path of the first seed runs twice and must give bitwise the same losses; then
// the loss-curve gate. Writes DIR/curves.csv, DIR/report.md and DIR/report.json (a numgate
// report holding gate 3 alone, merged by numgate-report) and DIR/loss_curves.png
// (tools/plot_loss.py, matplotlib) when python3 with matplotlib is there; with
// --diverge-at K also the first-divergence table at step K (DIR/divergence.md).
//
// Exit status: 0 gate PASS (curve, diverge, mutants: they ran; mutants' result is its table,
// a mutant gate 3 misses included); 1 FAIL or an error; 2 bad command line; 77 no CUDA
// device (nothing run; skipped by ctest). `gate` first removes the files of an earlier run
// from DIR, so a run that stops half way never leaves an old verdict to be merged.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "corpus.h"
#include "loss_gate.h"
#include "model.h"
#include "numgate/report.h"

namespace nt = numgate::train;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// repeat_batch: every step trains on batch 0 (the sanity check that the model can overfit
// one batch: its loss must fall far below the corpus's).
std::vector<double> train_curve(const nt::ModelConfig& cfg, std::uint64_t seed, int steps, nt::TargetSet t,
                                nt::Mutant m, bool repeat_batch = false) {
  nt::Trainer tr(cfg, seed, t, m);
  std::vector<double> losses;
  losses.reserve(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s)
    losses.push_back(tr.step(nt::make_batch(cfg.corpus, seed, repeat_batch ? 0 : static_cast<std::uint64_t>(s))));
  return losses;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// The first-divergence table at `step`: the reference path trains `step` steps; a trainer
// of `targets` (with `mutant`) takes its weights and optimizer state; both run forward and
// backward on batch `step` and every captured op output is compared, in execution order.
struct Divergence {
  std::vector<nt::DivergenceRow> rows;
  int first = -1;
};
Divergence find_divergence(const nt::ModelConfig& cfg, std::uint64_t seed, int step, nt::TargetSet targets,
                           nt::Mutant mutant) {
  nt::Trainer ref(cfg, seed, nt::TargetSet::none());
  for (int s = 0; s < step; ++s) ref.step(nt::make_batch(cfg.corpus, seed, static_cast<std::uint64_t>(s)));
  nt::Trainer tgt(cfg, seed, targets, mutant);
  tgt.copy_state_from(ref);
  const nt::Batch b = nt::make_batch(cfg.corpus, seed, static_cast<std::uint64_t>(step));
  const std::vector<nt::Capture> r = ref.capture(b), t = tgt.capture(b);
  if (r.size() != t.size()) throw std::runtime_error("divergence: the two paths captured different op lists");
  Divergence d;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i].name != t[i].name)
      throw std::runtime_error(fmt::format("divergence: capture {} is '{}' vs '{}'", i, r[i].name, t[i].name));
    d.rows.push_back(nt::difference(r[i].name, r[i].values, t[i].values));
  }
  d.first = nt::mark_jumps(d.rows);
  return d;
}

std::string divergence_markdown(const Divergence& d, std::uint64_t seed, int step, nt::TargetSet targets,
                                nt::Mutant mutant) {
  std::ostringstream o;
  o << fmt::format("### First divergence: seed {}, step {}, target {}, mutant {}\n\n", seed, step, targets.str(),
                   nt::mutant_name(mutant));
  o << fmt::format("Rule: an op jumps when rel_l2 > {} x max(2^-8, largest rel_l2 before it).\n\n", nt::kJumpFactor);
  o << (d.first >= 0 ? fmt::format("**First op beyond the inherited noise: `{}`** (rel_l2 {:.3g}, inherited {:.3g})\n\n",
                                   d.rows[static_cast<std::size_t>(d.first)].name,
                                   d.rows[static_cast<std::size_t>(d.first)].rel_l2,
                                   d.rows[static_cast<std::size_t>(d.first)].inherited)
                     : std::string("**No op jumps beyond the noise inherited from the ops before it.**\n\n"));
  o << "| # | op output | max abs diff | rel L2 diff | inherited noise | jump |\n|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < d.rows.size(); ++i) {
    const auto& r = d.rows[i];
    o << fmt::format("| {} | `{}` | {:.3g} | {:.3g} | {:.3g} | {} |\n", i, r.name, r.max_abs, r.rel_l2, r.inherited,
                     r.jump ? (static_cast<int>(i) == d.first ? "**FIRST**" : "yes") : "");
  }
  return o.str();
}

void write_text(const std::string& path, const std::string& text) { numgate::write_file_atomically(path, text); }

std::vector<std::uint64_t> parse_seeds(const std::string& s) {
  std::vector<std::uint64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || item[0] < '0' || item[0] > '9' || *end != '\0' || errno == ERANGE)
      throw std::invalid_argument("--seeds: '" + item + "' is not an integer in [0, 2^64)");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument("--seeds: give at least one seed");
  return out;
}

struct GateRun {
  numgate::Gate3Report report;
  std::map<std::uint64_t, std::pair<std::vector<double>, std::vector<double>>> curves;
};

// The loss-curve gate: both paths per seed; the first seed's reference twice (bitwise).
GateRun run_gate(const nt::ModelConfig& cfg, const std::vector<std::uint64_t>& seeds, int steps, nt::Mutant mutant,
                 const std::map<std::uint64_t, std::vector<double>>* reference_cache = nullptr) {
  GateRun g;
  g.report.steps = steps;
  g.report.mutant = nt::mutant_name(mutant);
  const nt::LossGateParams p;
  g.report.last_steps = p.last_steps;
  g.report.max_relative_difference = p.max_relative_difference;
  const auto t0 = Clock::now();
  for (std::uint64_t seed : seeds) {
    std::vector<double> ref;
    if (reference_cache && reference_cache->count(seed))
      ref = reference_cache->at(seed);
    else
      ref = train_curve(cfg, seed, steps, nt::TargetSet::none(), nt::Mutant::none);
    const std::vector<double> tgt = train_curve(cfg, seed, steps, nt::TargetSet::all(), mutant);
    const nt::SeedVerdict v = nt::compare_curves(seed, ref, tgt, p);
    g.report.seeds.push_back({v.seed, v.reference_mean, v.target_mean, v.relative_difference, v.pass, v.why});
    std::printf("gate3 seed %llu: %s: %s\n", static_cast<unsigned long long>(seed), v.pass ? "PASS" : "FAIL",
                v.why.c_str());
    g.curves[seed] = {ref, tgt};
  }
  if (!reference_cache) {
    const std::vector<double> again = train_curve(cfg, seeds.front(), steps, nt::TargetSet::none(), nt::Mutant::none);
    g.report.reference_reproducible = bitwise_equal(again, g.curves[seeds.front()].first);
    g.report.reproducibility_checked = true;
    std::printf("gate3 reference path run twice (seed %llu, %d steps): %s\n",
                static_cast<unsigned long long>(seeds.front()), steps,
                g.report.reference_reproducible ? "bitwise identical losses" : "LOSSES DIFFER");
  }
  g.report.seconds = seconds_since(t0);
  return g;
}

std::string curves_csv(const GateRun& g) {
  std::string s = "seed,step,reference_loss,target_loss\n";
  for (const auto& [seed, c] : g.curves)
    for (std::size_t i = 0; i < c.first.size(); ++i)
      s += fmt::format("{},{},{:.9g},{:.9g}\n", seed, i, c.first[i], c.second[i]);
  return s;
}

// tools/plot_loss.py next to this source tree (NUMGATE_SOURCE_DIR); empty when no plot.
std::string plot(const std::string& csv, const std::string& png, std::string* why) {
  const std::string script = std::string(NUMGATE_SOURCE_DIR) + "/tools/plot_loss.py";
  auto quoted = [](const std::string& s) {  // one shell word, whatever s holds
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  const std::string cmd = "python3 " + quoted(script) + " " + quoted(csv) + " " + quoted(png) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  if (pipe) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  }
  const int rc = pipe ? pclose(pipe) : -1;
  if (rc != 0) {
    while (!out.empty() && out.back() == '\n') out.pop_back();
    const std::size_t nl = out.rfind('\n');  // the last line says why (a traceback ends with it)
    *why = "no plot: " + (out.empty() ? std::string("python3 could not run ") + script
                                      : (nl == std::string::npos ? out : out.substr(nl + 1)));
    return "";
  }
  return png;
}

// The files `gate` writes; removed first (see the file comment).
const char* const kGateFiles[] = {"report.json", "report.md", "curves.csv", "loss_curves.png", "divergence.md"};

int cmd_gate(const nt::ModelConfig& cfg, const std::string& dir, const std::vector<std::uint64_t>& seeds, int steps,
             nt::Mutant mutant, int diverge_at) {
  GateRun g = run_gate(cfg, seeds, steps, mutant);
  const std::string csv = dir + "/curves.csv";
  write_text(csv, curves_csv(g));
  g.report.curves_csv = csv;
  std::string why;
  g.report.plot = plot(csv, dir + "/loss_curves.png", &why);
  if (g.report.plot.empty()) g.report.notes.push_back(why);
  if (diverge_at >= 0) {
    const Divergence d = find_divergence(cfg, seeds.front(), diverge_at, nt::TargetSet::all(), mutant);
    const std::string md = divergence_markdown(d, seeds.front(), diverge_at, nt::TargetSet::all(), mutant);
    write_text(dir + "/divergence.md", md);
    g.report.first_divergence = d.first >= 0 ? d.rows[static_cast<std::size_t>(d.first)].name : "";
    g.report.divergence_step = diverge_at;
    std::printf("%s\n", md.c_str());
  }
  numgate::Report r;
  r.device = nt::device_name();
  r.gate3.push_back(g.report);
  numgate::write_report(r, dir);
  std::printf("%s", numgate::gate3_markdown(g.report).c_str());
  std::printf("gate 3: %s (%.1f s); report %s/report.md\n", std::string(numgate::verdict_name(g.report.verdict())).c_str(), g.report.seconds,
              dir.c_str());
  return g.report.verdict() == numgate::Verdict::pass ? 0 : 1;
}

// Every late-class mutant (model.h: Mutant) through gate 3 (both seeds, the reference
// curves computed once) and the first-divergence finder. What gates 1 and 2 see of each is
// declared beside it (what_gates_1_and_2_see) from the numgate tests that show it.
const char* what_gates_1_and_2_see(nt::Mutant m) {
  switch (m) {
    case nt::Mutant::dropout_offset_fixed_across_steps:
    case nt::Mutant::dropout_offset_fixed_across_layers:
      return "gate 1 and 2: invisible by construction — the dropout_add kernel is right and is called with a "
             "wrong offset; each call is a correct dropout at the offset it is given (the op's RNG-stream "
             "mutants, a kernel that ignores its offset, are gate 2's: mutation matrix, dropout_add)";
    case nt::Mutant::rmsnorm_eps:
      return "gate 1: invisible (the kernel with eps 1e-5 is a consistent function: its backward is its forward's "
             "derivative); gate 2: FamilyMutants.RmsnormWithAnotherEpsilonIsCaught (the kernel launched with eps 1e-5 on the "
             "rmsnorm fixtures)";
    case nt::Mutant::causal_off_by_one:
      return "gate 1: invisible (a consistent function); gate 2: FamilyMutants.SoftmaxWithTheCausalMaskOffByOneIsCaught "
             "on the causal softmax fixtures";
    case nt::Mutant::padding_not_ignored:
      return "gate 1 and 2: invisible by construction — the cross-entropy kernel is right; the caller passes PAD "
             "where the collator should write ignore_index";
    case nt::Mutant::none: break;
  }
  return "";
}

int cmd_mutants(const nt::ModelConfig& cfg, const std::string& dir, const std::vector<std::uint64_t>& seeds, int steps,
                int diverge_at) {
  std::map<std::uint64_t, std::vector<double>> ref;
  for (std::uint64_t seed : seeds) ref[seed] = train_curve(cfg, seed, steps, nt::TargetSet::none(), nt::Mutant::none);
  std::ostringstream md;
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  md << "## Late-class mutants through the three gates\n\n"
     << fmt::format("Gate 3: {} steps per run, seeds", steps);
  for (auto s : seeds) md << " " << s;
  md << fmt::format("; first divergence at step {} (seed {}).\n\n", diverge_at, seeds.front())
     << "| Mutant | Gate 3 relative differences | Gate 3 | First divergence | Gates 1 and 2 |\n|---|---|---|---|---|\n";
  std::string tables;
  for (nt::Mutant m : nt::kMutants) {
    const GateRun g = run_gate(cfg, seeds, steps, m, &ref);
    std::string diffs;
    for (const auto& sd : g.report.seeds) diffs += fmt::format("{}{:.3f}%", diffs.empty() ? "" : ", ", 100 * sd.relative_difference);
    const Divergence d = find_divergence(cfg, seeds.front(), diverge_at, nt::TargetSet::all(), m);
    const std::string first = d.first >= 0 ? d.rows[static_cast<std::size_t>(d.first)].name : "none";
    const bool caught = g.report.verdict() != numgate::Verdict::pass;
    md << fmt::format("| `{}` | {} | {} | `{}` | {} |\n", nt::mutant_name(m), diffs, caught ? "caught (FAIL)" : "MISSED (PASS)",
                      first, what_gates_1_and_2_see(m));
    tables += "\n" + divergence_markdown(d, seeds.front(), diverge_at, nt::TargetSet::all(), m);
    nlohmann::ordered_json seeds_j = nlohmann::ordered_json::array();
    for (const auto& sd : g.report.seeds)
      seeds_j.push_back({{"seed", sd.seed}, {"relative_difference", sd.relative_difference}, {"pass", sd.pass}, {"why", sd.why}});
    j.push_back({{"mutant", nt::mutant_name(m)}, {"gate3", caught ? "caught" : "missed"}, {"seeds", seeds_j},
                 {"first_divergence", first}, {"gates_1_and_2", what_gates_1_and_2_see(m)}});
    std::printf("mutant %s: gate 3 %s (%s); first divergence %s\n", nt::mutant_name(m), caught ? "caught" : "MISSED",
                diffs.c_str(), first.c_str());
  }
  write_text(dir + "/mutants.md", md.str() + tables);
  write_text(dir + "/mutants.json", j.dump(2) + "\n");
  std::printf("%s\nwritten: %s/mutants.md, %s/mutants.json\n", md.str().c_str(), dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"numgate-train: gate 3, a short training run, target kernels vs the reference path"};
  app.require_subcommand(1);
  nt::ModelConfig cfg;
  std::uint64_t seed = 1;
  int steps = 200, step = 0, diverge_at = -1;
  std::string target_list = std::getenv("NUMGATE_TRAIN_TARGET") ? std::getenv("NUMGATE_TRAIN_TARGET") : "all";
  std::string mutant_name = "none", csv, out_dir, out_file, seeds_arg = "1,2";
  auto* curve = app.add_subcommand("curve", "one training run: its loss per step as CSV");
  curve->add_option("--seed", seed, "model, data and dropout seed");
  curve->add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  curve->add_option("--target", target_list, "ops on the target path: all, none, or a list (env NUMGATE_TRAIN_TARGET)");
  curve->add_option("--mutant", mutant_name, "a late-class mutant on the target path");
  curve->add_option("--csv", csv, "output CSV (step,loss)")->required();
  bool repeat_batch = false;
  curve->add_flag("--repeat-batch", repeat_batch, "train on batch 0 every step (can the model overfit one batch?)");
  curve->add_option("--lr", cfg.lr, "peak learning rate (AdamW)");
  curve->add_option("--vocab", cfg.corpus.vocab, "vocabulary size (vocab - 3 prime)");
  curve->add_option("--zipf", cfg.corpus.zipf_exponent, "Zipf exponent of the Markov language");
  auto* gate = app.add_subcommand("gate", "the loss-curve gate: reference vs all-target, per seed");
  gate->add_option("--out-dir", out_dir, "folder for curves.csv, report.md, report.json, loss_curves.png, divergence.md")->required();
  gate->add_option("--seeds", seeds_arg, "comma-separated seeds (default 1,2)");
  gate->add_option("--steps", steps, "training steps per run (>= 200 for the gate)")->check(CLI::PositiveNumber);
  gate->add_option("--mutant", mutant_name, "a late-class mutant on the target path");
  gate->add_option("--diverge-at", diverge_at, "also the first-divergence table at this step")->check(CLI::NonNegativeNumber);
  auto* diverge = app.add_subcommand("diverge", "the first-divergence table at one step");
  diverge->add_option("--step", step, "steps the reference path trains first")->required()->check(CLI::NonNegativeNumber);
  diverge->add_option("--seed", seed, "seed");
  diverge->add_option("--target", target_list, "ops on the target path (default all)");
  diverge->add_option("--mutant", mutant_name, "a late-class mutant on the target path");
  diverge->add_option("--out", out_file, "also write the table to this Markdown file");
  auto* mutants = app.add_subcommand("mutants", "every late-class mutant through gate 3 and the divergence finder");
  mutants->add_option("--out-dir", out_dir, "folder for mutants.md and mutants.json")->required();
  mutants->add_option("--seeds", seeds_arg, "comma-separated seeds (default 1,2)");
  mutants->add_option("--steps", steps, "training steps per run")->check(CLI::PositiveNumber);
  mutants->add_option("--diverge-at", diverge_at, "step of the first-divergence tables (default 100)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  nt::TargetSet targets = nt::TargetSet::none();
  nt::Mutant mutant = nt::Mutant::none;
  std::vector<std::uint64_t> seeds;
  try {
    if (*curve || *diverge) targets = nt::TargetSet::parse(target_list);  // gate and mutants compare none vs all
    mutant = nt::parse_mutant(mutant_name);
    seeds = parse_seeds(seeds_arg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-train: %s\n", e.what());
    return 2;
  }
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "numgate-train: cannot create --out-dir '%s': %s\n", out_dir.c_str(), ec.message().c_str());
      return 2;
    }
  }
  if (*gate)  // before the device check: a run without a device leaves only its NOT RUN report
    for (const char* f : kGateFiles) std::filesystem::remove(std::filesystem::path(out_dir) / f);
  std::string why;
  if (!nt::cuda_device_available(&why)) {
    std::printf("numgate-train: no CUDA device (%s): gate 3 NOT run (skipped)\n", why.c_str());
    if (*gate) {  // the merged report then says gate 3 was not run, and why
      numgate::Report r;
      r.device = "no CUDA device";
      numgate::Gate3Report g;
      const nt::LossGateParams params;
      g.steps = steps;
      g.last_steps = params.last_steps;
      g.max_relative_difference = params.max_relative_difference;
      g.mutant = mutant_name;
      g.not_run_reason = "no CUDA device (" + why + ")";
      r.gate3.push_back(g);
      try {
        numgate::write_report(r, out_dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "numgate-train: %s\n", e.what());
        return 1;
      }
    }
    return 77;
  }
  try {
    if (*curve) {
      const auto t0 = Clock::now();
      const std::vector<double> l = train_curve(cfg, seed, steps, targets, mutant, repeat_batch);
      std::string s = "step,loss\n";
      for (std::size_t i = 0; i < l.size(); ++i) s += fmt::format("{},{:.9g}\n", i, l[i]);
      for (std::size_t i = 0; i < l.size(); i += std::max<std::size_t>(1, l.size() / 10))
        std::printf("  step %zu: loss %.4f\n", i, l[i]);
      write_text(csv, s);
      std::printf("%d steps (target %s, mutant %s) in %.2f s: loss %.4f -> %.4f; %s\n", steps, targets.str().c_str(),
                  nt::mutant_name(mutant), seconds_since(t0), l.front(), l.back(), csv.c_str());
      return 0;
    }
    if (*gate) return cmd_gate(cfg, out_dir, seeds, steps, mutant, diverge_at);
    if (*diverge) {
      const Divergence d = find_divergence(cfg, seed, step, targets, mutant);
      const std::string md = divergence_markdown(d, seed, step, targets, mutant);
      if (!out_file.empty()) write_text(out_file, md);
      std::printf("%s", md.c_str());
      return 0;
    }
    if (*mutants) return cmd_mutants(cfg, out_dir, seeds, steps, diverge_at < 0 ? 100 : diverge_at);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-train: %s\n", e.what());
    return 1;
  }
  return 2;
}
