#include "bench_kernel_clock.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifdef NUMGATE_HAVE_CUPTI
#include <cupti.h>
#endif

namespace numgate::bench {

#ifdef NUMGATE_HAVE_CUPTI
namespace {

std::mutex g_mu;
std::vector<Activity> g_activities;
std::size_t g_dropped = 0;
std::string g_error;

constexpr std::size_t kBufferBytes = std::size_t(8) << 20;
constexpr std::size_t kAlign = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = std::aligned_alloc(kAlign, kBufferBytes);
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  for (;;) {
    const CUptiResult st = cuptiActivityGetNextRecord(buffer, valid, &rec);
    if (st == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (st != CUPTI_SUCCESS) {
      g_error = "cuptiActivityGetNextRecord failed";
      break;
    }
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      g_activities.push_back({k->start, k->end > k->start ? k->end : k->start});
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      g_activities.push_back({m->start, m->end > m->start ? m->end : m->start});
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
}

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "unknown CUPTI error";
}

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw std::runtime_error(std::string("kernel clock: ") + what + ": " + cupti_error(r));
}

}  // namespace

bool KernelClock::available(std::string* why) {
  static int state = 0;  // 0 untried, 1 ok, 2 failed
  static std::string reason;
  if (state == 0) {
    const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    state = r == CUPTI_SUCCESS ? 1 : 2;
    if (state == 2) reason = "CUPTI cuptiActivityRegisterCallbacks: " + cupti_error(r);
  }
  if (state == 2 && why) *why = reason;
  return state == 1;
}

void KernelClock::begin() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_activities.clear();
    g_dropped = 0;
    g_error.clear();
  }
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel records");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset records");
}

std::vector<Activity> KernelClock::end() {
  check(cuptiActivityFlushAll(1), "flush");
  check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "disable kernel records");
  check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET), "disable memset records");
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_error.empty()) throw std::runtime_error("kernel clock: " + g_error);
  if (g_dropped) throw std::runtime_error("kernel clock: CUPTI dropped " + std::to_string(g_dropped) + " records");
  return std::move(g_activities);
}

#else  // no CUPTI in this build

bool KernelClock::available(std::string* why) {
  if (why) *why = "built without CUPTI (CMake found no CUDA::cupti)";
  return false;
}
void KernelClock::begin() { throw std::logic_error("kernel clock: built without CUPTI"); }
std::vector<Activity> KernelClock::end() { throw std::logic_error("kernel clock: built without CUPTI"); }

#endif

}  // namespace numgate::bench
