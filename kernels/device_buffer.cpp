#include "device_buffer.h"

#include <algorithm>
#include <utility>

namespace numgate {

DeviceBuffer::DeviceBuffer(std::size_t bytes, std::size_t offset, unsigned char guard) : bytes_(bytes), guard_(guard) {
  total_ = kGuard + offset + bytes + kGuard;
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, total_), "cudaMalloc");
  base_ = static_cast<unsigned char*>(p);
  payload_ = base_ + kGuard + offset;
  try {
    cuda_check(cudaMemset(base_, guard_, total_), "cudaMemset(guard)");
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

DeviceBuffer DeviceBuffer::unguarded(std::size_t bytes) {
  DeviceBuffer b;
  b.guarded_ = false;
  b.bytes_ = bytes;
  b.total_ = std::max<std::size_t>(bytes, 1);
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, b.total_), "cudaMalloc");
  b.base_ = b.payload_ = static_cast<unsigned char*>(p);
  return b;
}

void DeviceBuffer::release() noexcept {
  if (base_) cudaFree(base_);
  base_ = payload_ = nullptr;
  bytes_ = total_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      payload_(std::exchange(o.payload_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      total_(std::exchange(o.total_, 0)),
      guard_(o.guard_),
      guarded_(o.guarded_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, nullptr);
    payload_ = std::exchange(o.payload_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    total_ = std::exchange(o.total_, 0);
    guard_ = o.guard_;
    guarded_ = o.guarded_;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host) {
  cuda_check(cudaMemcpy(payload_, host, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy(upload)");
}

std::vector<unsigned char> DeviceBuffer::download() const {
  std::vector<unsigned char> h(bytes_);
  cuda_check(cudaMemcpy(h.data(), payload_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy(download)");
  return h;
}

void DeviceBuffer::poison(unsigned char byte) { cuda_check(cudaMemset(payload_, byte, bytes_), "cudaMemset(poison)"); }

std::string DeviceBuffer::guard_damage() const {
  if (!guarded_) return {};
  std::vector<unsigned char> all(total_);
  cuda_check(cudaMemcpy(all.data(), base_, total_, cudaMemcpyDeviceToHost), "cudaMemcpy(guards)");
  const std::size_t lo_end = static_cast<std::size_t>(payload_ - base_), hi_begin = lo_end + bytes_;
  for (std::size_t i = 0; i < lo_end; ++i)
    if (all[i] != guard_) return "write " + std::to_string(lo_end - i) + " bytes before the buffer";
  for (std::size_t i = total_; i-- > hi_begin;)
    if (all[i] != guard_) return "write " + std::to_string(i - hi_begin + 1) + " bytes past the end of the buffer";
  return {};
}

}  // namespace numgate
