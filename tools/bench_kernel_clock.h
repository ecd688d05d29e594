// numgate-bench's kernel clock: the GPU time of a series of launches as the PyTorch
// profiler measures its peers (tools/bench_peers.py), i.e. the summed durations of the
// kernels and memsets the launches ran, from CUPTI's activity records (no launch gaps, no
// host overhead, no event records). Built only when CMake finds CUPTI (CUDA::cupti);
// otherwise available() says so and numgate-bench reports event times only.
#pragma once

#include <string>
#include <vector>

#include "bench_json.h"

namespace numgate::bench {

class KernelClock {
 public:
  /// Whether CUPTI can record kernel activity in this process (registers the buffer
  /// callbacks on the first call); `why` gets the reason when not.
  static bool available(std::string* why);
  /// Starts recording kernel and memset activity (call with the stream idle).
  static void begin();
  /// Stops recording after the stream has been synchronized by the caller; returns the
  /// activities recorded since begin() (their start and end timestamps; summarize them
  /// with summarize_kernel_clock). Throws std::runtime_error on a CUPTI error or dropped
  /// records.
  static std::vector<Activity> end();
};

}  // namespace numgate::bench
