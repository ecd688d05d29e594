// numgate — the one device buffer (RAII over cudaMalloc / cudaFree) of the replay and the
// benchmark.
//
// Guarded (the replay): guard bands on both sides, poisoning, and a deliberate
// misalignment option, so unwritten elements and out-of-bounds writes cannot pass.
// Unguarded (the benchmark): a plain allocation, nothing around it, not initialized.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace numgate {

class DeviceBuffer {
 public:
  static constexpr std::size_t kGuard = 4096;            ///< bytes of guard band on each side
  /// Guard-band byte of output buffers: an out-of-bounds write changes it.
  static constexpr unsigned char kCanary = 0xA5;
  /// Guard-band byte of input buffers: NaN in every float dtype, so an out-of-bounds
  /// read poisons the result (and a write there is still seen as damage).
  static constexpr unsigned char kNaNGuard = 0xFF;
  /// Guarded: bytes: payload size; offset: extra bytes before the payload (e.g. one
  /// element, to make the pointer deliberately not 16-byte aligned), filled like the
  /// guards. Guards and offset are filled with `guard`; the payload is not initialized.
  /// Throws std::runtime_error (cuda_check) when allocating or filling fails.
  DeviceBuffer(std::size_t bytes, std::size_t offset = 0, unsigned char guard = kCanary);
  /// Unguarded: cudaMalloc of max(bytes, 1) bytes (never a null pointer), not
  /// initialized; bytes() is `bytes`, guard_damage() always empty.
  static DeviceBuffer unguarded(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* data() const { return payload_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host);
  std::vector<unsigned char> download() const;
  /// Fills the payload with one repeated byte (0xFF: NaN in every float dtype; 0x55: finite).
  void poison(unsigned char byte);
  /// Empty when both guard bands still hold the canary (or the buffer is unguarded); else
  /// where they were overwritten.
  std::string guard_damage() const;

 private:
  DeviceBuffer() = default;
  void release() noexcept;

  unsigned char* base_ = nullptr;
  unsigned char* payload_ = nullptr;
  std::size_t bytes_ = 0, total_ = 0;
  unsigned char guard_ = kCanary;
  bool guarded_ = true;
};

}  // namespace numgate
