// The kernel record of common/kernel_trace.h (host only): what the path tests
// (tests/gpu/test_aligned_paths.cpp) read to know which kernel a launcher chose. Its
// contract, checked here without a device: "" before any record, the last record per
// launcher, launchers independent of each other, and host threads independent of each other
// (two threads launching at once must not see each other's choices).
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <thread>

#include "common/kernel_trace.h"

namespace numgate::kernel_trace {
namespace {

constexpr Launcher kAll[] = {Launcher::row_norm_forward, Launcher::row_norm_backward, Launcher::glu_forward,
                             Launcher::glu_backward,     Launcher::softmax_forward,   Launcher::softmax_backward};
static_assert(std::size(kAll) == static_cast<std::size_t>(Launcher::count_), "kAll lists every launcher");

TEST(KernelTrace, AFreshThreadHasRecordedNothing) {
  std::string seen[std::size(kAll)];
  std::thread t([&] {
    for (std::size_t i = 0; i < std::size(kAll); ++i) seen[i] = last(kAll[i]);
  });
  t.join();
  for (std::size_t i = 0; i < std::size(kAll); ++i)
    EXPECT_EQ(seen[i], "") << "launcher " << i << " of a thread that never launched";
}

TEST(KernelTrace, EachLauncherKeepsItsOwnLastRecord) {
  std::thread t([] {
    record(Launcher::glu_forward, "aligned");
    record(Launcher::glu_backward, "general");
    record(Launcher::softmax_forward, "cached_64");
    record(Launcher::softmax_forward, "two_sweep");  // the later record replaces the earlier
    EXPECT_STREQ(last(Launcher::glu_forward), "aligned");
    EXPECT_STREQ(last(Launcher::glu_backward), "general");
    EXPECT_STREQ(last(Launcher::softmax_forward), "two_sweep");
    EXPECT_STREQ(last(Launcher::softmax_backward), "");  // never recorded
    EXPECT_STREQ(last(Launcher::row_norm_forward), "");
    // What the path tests do before a launch: clear the record.
    record(Launcher::glu_forward, "");
    EXPECT_STREQ(last(Launcher::glu_forward), "");
    EXPECT_STREQ(last(Launcher::glu_backward), "general");
  });
  t.join();
}

TEST(KernelTrace, RecordsOfOneHostThreadAreNotSeenByAnother) {
  record(Launcher::row_norm_forward, "cached");
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = last(Launcher::row_norm_forward);
    record(Launcher::row_norm_forward, "warp_rows");
    other_after = last(Launcher::row_norm_forward);
  });
  t.join();
  EXPECT_EQ(other_before, "") << "the other thread saw this thread's record";
  EXPECT_EQ(other_after, "warp_rows");
  EXPECT_STREQ(last(Launcher::row_norm_forward), "cached") << "the other thread's record replaced this thread's";
  record(Launcher::row_norm_forward, "");
}

}  // namespace
}  // namespace numgate::kernel_trace
