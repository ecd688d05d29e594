#include "cuda_check.h"

#include <stdexcept>
#include <string>

namespace numgate {

void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::string m = std::string(what) + " failed";
  if (file) m += std::string(" at ") + file + ":" + std::to_string(line);
  m += std::string(": ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  throw std::runtime_error(m);
}

}  // namespace numgate
