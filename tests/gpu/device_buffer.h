// A device buffer for replay: guard bands on both sides, poisoning, and a deliberate
// misalignment option, so unwritten elements and out-of-bounds writes cannot pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace numgate::testing {

/// Throws std::runtime_error with the call site and CUDA's message.
void cuda_check(cudaError_t e, const char* what);

class DeviceBuffer {
 public:
  static constexpr std::size_t kGuard = 4096;            ///< bytes of guard band on each side
  /// Guard-band byte of output buffers: an out-of-bounds write changes it.
  static constexpr unsigned char kCanary = 0xA5;
  /// Guard-band byte of input buffers: NaN in every float dtype, so an out-of-bounds
  /// read poisons the result (and a write there is still seen as damage).
  static constexpr unsigned char kNaNGuard = 0xFF;
  /// bytes: payload size; offset: extra bytes before the payload (e.g. one element, to
  /// make the pointer deliberately not 16-byte aligned), filled like the guards.
  DeviceBuffer(std::size_t bytes, std::size_t offset = 0, unsigned char guard = kCanary);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return payload_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host);
  std::vector<unsigned char> download() const;
  /// Fills the payload with one repeated byte (0xFF: NaN in every float dtype; 0x55: finite).
  void poison(unsigned char byte);
  /// Empty when both guard bands still hold the canary; else where they were overwritten.
  std::string guard_damage() const;

 private:
  unsigned char* base_ = nullptr;
  unsigned char* payload_ = nullptr;
  std::size_t bytes_ = 0, total_ = 0;
  unsigned char guard_ = kCanary;
};

}  // namespace numgate::testing
