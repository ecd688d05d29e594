#include "common/kernel_trace.h"

namespace numgate::kernel_trace {
namespace {
constexpr int kLaunchers = 2;
thread_local const char* g_last[kLaunchers] = {"", ""};
}  // namespace

void record(Launcher launcher, const char* kernel) noexcept { g_last[static_cast<int>(launcher)] = kernel; }

const char* last(Launcher launcher) noexcept { return g_last[static_cast<int>(launcher)]; }

}  // namespace numgate::kernel_trace
