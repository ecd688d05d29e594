#include "common/kernel_trace.h"

namespace numgate::kernel_trace {
namespace {
constexpr int kLaunchers = static_cast<int>(Launcher::count_);
thread_local const char* g_last[kLaunchers] = {};  // nullptr: no launch yet (read as "")
}  // namespace

void record(Launcher launcher, const char* kernel) noexcept { g_last[static_cast<int>(launcher)] = kernel; }

const char* last(Launcher launcher) noexcept {
  const char* k = g_last[static_cast<int>(launcher)];
  return k != nullptr ? k : "";
}

}  // namespace numgate::kernel_trace
