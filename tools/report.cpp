// numgate-report — merges per-op replay reports into one.
//
//   numgate-report --merge a.json b.json ... --out-dir DIR
//
// Reads every report.json with numgate::read_report, merges them with
// numgate::merge_reports (same device, no case twice, cases sorted by op, file and case
// name: the result does not depend on the argument order) and writes DIR/report.json and
// DIR/report.md (write_report), then prints the verdict summary table. An input may be
// DIR/report.json itself: every input is read before anything is written.
//
// Exit status: 0 merged (whatever the verdicts: the replays' own exit statuses say
// FAIL); 1 an input was refused or the output could not be written (message on stderr,
// naming the file, the field and the fix; nothing is written); 2 bad command line.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "numgate/report.h"

int main(int argc, char** argv) {
  CLI::App app{"numgate-report: merges per-op replay reports (report.json) into one report.json + report.md"};
  std::vector<std::string> inputs;
  std::string out_dir;
  app.add_option("--merge", inputs, "report.json files to merge (one or more)")->required()->expected(1, -1);
  app.add_option("--out-dir", out_dir, "folder for the merged report.json and report.md")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (out_dir.empty()) {
    std::fprintf(stderr, "numgate-report: --out-dir is empty; give the folder to write report.json and report.md to\n");
    return 2;
  }
  try {
    std::vector<numgate::Report> reports;
    for (const auto& path : inputs) reports.push_back(numgate::read_report(path));
    const numgate::Report merged = numgate::merge_reports(reports, inputs);
    numgate::write_report(merged, out_dir);
    std::printf("%sMerged %zu report(s) into %s/report.md, %s/report.json\n", numgate::summary_table(merged).c_str(),
                inputs.size(), out_dir.c_str(), out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numgate-report: %s\n", e.what());
    return 1;
  }
}
