// The committed fixture cases (golden_data/*.h5), for value-parameterized CPU tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "numgate/fixture_file.h"

#ifndef NUMGATE_SOURCE_DIR
#error "NUMGATE_SOURCE_DIR must be defined by the build"
#endif

namespace numgate::testing {

struct CommittedCase {
  std::string file, name;
  friend std::ostream& operator<<(std::ostream& os, const CommittedCase& c) { return os << c.file << ":" << c.name; }
};

inline std::string golden_dir() { return std::string(NUMGATE_SOURCE_DIR) + "/golden_data"; }

inline std::vector<CommittedCase> committed_cases() {
  std::vector<CommittedCase> out;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir()))
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files)
    for (const auto& c : read_fixture_info(f).cases) out.push_back({f, c});
  return out;
}

/// "<op file stem>__<case>": unique across ops (case names are unique within an op only).
inline std::string case_test_name(const ::testing::TestParamInfo<CommittedCase>& info) {
  return std::filesystem::path(info.param.file).stem().string() + "__" + info.param.name;
}

}  // namespace numgate::testing
