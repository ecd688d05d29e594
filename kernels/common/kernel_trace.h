// Which kernel a launcher chose: the row-norm launchers (common/row_norm.cuh) pick one of
// several kernels from the shape, the dtype, the tensors' 16-byte alignment and the device
// (compute capability, occupancy), and record its name here, per host thread. The path
// tests (tests/gpu/test_aligned_paths.cpp) compare two kernels' bits by launching one
// problem twice with different alignments; they read the record after each launch, so a
// launcher that stopped choosing the kernel a test means to compare fails the test instead
// of comparing a kernel with itself.
//
// Host only (no CUDA types): the record is written when the launcher chose, before the
// launch, and holds a string literal of the launcher (never freed). "" before any launch.
#pragma once

namespace numgate::kernel_trace {

/// The launchers that record their choice.
enum class Launcher {
  row_norm_forward,   ///< row_norm::launch_forward: "warp_rows", "aligned", "cached",
                      ///< "streaming", or "refused" (a row too long for LayerNorm's cache: nothing launched)
  row_norm_backward,  ///< row_norm::launch_backward: "warp_rows", "ring", "rows_fused" (the
                      ///< fused path's register kernel), "rows" (the separate path), "streaming", "refused"
};

/// Records `kernel` (a string literal) as the last choice of `launcher` on this host thread.
void record(Launcher launcher, const char* kernel) noexcept;

/// The kernel `launcher` last chose on this host thread; "" if it chose none yet.
const char* last(Launcher launcher) noexcept;

}  // namespace numgate::kernel_trace
