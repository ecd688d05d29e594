#include "device_buffer.h"

namespace numgate::testing {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

DeviceBuffer::DeviceBuffer(std::size_t bytes, std::size_t offset, unsigned char guard) : bytes_(bytes), guard_(guard) {
  total_ = kGuard + offset + bytes + kGuard;
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, total_), "cudaMalloc");
  base_ = static_cast<unsigned char*>(p);
  payload_ = base_ + kGuard + offset;
  cuda_check(cudaMemset(base_, guard_, total_), "cudaMemset(guard)");
}

DeviceBuffer::~DeviceBuffer() { cudaFree(base_); }

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
  std::vector<unsigned char> all(total_);
  cuda_check(cudaMemcpy(all.data(), base_, total_, cudaMemcpyDeviceToHost), "cudaMemcpy(guards)");
  const std::size_t lo_end = static_cast<std::size_t>(payload_ - base_), hi_begin = lo_end + bytes_;
  for (std::size_t i = 0; i < lo_end; ++i)
    if (all[i] != guard_) return "write " + std::to_string(lo_end - i) + " bytes before the buffer";
  for (std::size_t i = total_; i-- > hi_begin;)
    if (all[i] != guard_) return "write " + std::to_string(i - hi_begin + 1) + " bytes past the end of the buffer";
  return {};
}

}  // namespace numgate::testing
