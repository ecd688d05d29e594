// Which kernel a launcher chose: the row-norm launchers (common/row_norm.cuh), the GLU
// launchers (glu/glu_kernels.cu) and the softmax launchers (softmax/softmax_kernels.cu)
// pick one of several kernels from the shape, the dtype, the tensors' 16-byte alignment
// and (row norms) the device's compute capability and occupancy, and record its name here,
// per host thread. The path tests (tests/gpu/test_aligned_paths.cpp) compare two kernels'
// bits by launching one problem twice with different alignments or block widths; they read
// the record after each launch, so a launcher that stopped choosing the kernel a test
// means to compare fails the test instead of comparing a kernel with itself.
//
// Host only (no CUDA types): the record is written on the host by the call that launched
// (no device synchronization) and holds a string literal of the launcher (never freed).
// "" before any launch.
#pragma once

namespace numgate::kernel_trace {

/// The launchers that record their choice.
enum class Launcher {
  row_norm_forward,   ///< row_norm::launch_forward: "warp_rows", "aligned", "cached",
                      ///< "streaming", or "refused" (a row too long for LayerNorm's cache: nothing launched)
  row_norm_backward,  ///< row_norm::launch_backward: "warp_rows", "ring", "rows_fused" (the
                      ///< fused path's register kernel), "rows" (the separate path), "streaming", "refused"
  glu_forward,        ///< SwiGLU / GeGLU forward: "aligned" (n % VEC == 0, every tensor 16-byte
                      ///< aligned), "general" (the virtual 16-byte grid anchored at a)
  glu_backward,       ///< SwiGLU / GeGLU backward: "aligned", "general"
  softmax_forward,    ///< softmax forward: "cached_32", "cached_64", "cached_128" (one unit per
                      ///< thread, that many threads), "cached_256x1", "cached_256x2",
                      ///< "cached_256x4", "cached_256x8" (256 threads, that many units each),
                      ///< "two_sweep" (longer rows), "forced" (the forward_with_block test hook)
  softmax_backward,   ///< softmax backward: "cached_32", "cached_64", "cached_128x1",
                      ///< "cached_128x2", "cached_128x4", "cached_128x8", "two_sweep", "forced"
  count_              ///< the number of launchers (not a launcher)
};

/// Records `kernel` (a string literal) as the last choice of `launcher` on this host thread.
/// A call that returns before choosing (its argument checks refuse it with
/// cudaErrorInvalidValue, or there is nothing to launch) leaves the record as it was, so a
/// test clears it first with record(launcher, ""); row_norm's "refused" is a choice (a
/// LayerNorm row too long for the cache), recorded before it returns cudaErrorInvalidValue.
void record(Launcher launcher, const char* kernel) noexcept;

/// The kernel `launcher` last chose on this host thread; "" if it chose none yet.
const char* last(Launcher launcher) noexcept;

}  // namespace numgate::kernel_trace
