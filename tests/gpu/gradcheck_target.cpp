// Gate 1 on the target's double kernels (see gradcheck_target.h).
#include "gradcheck_target.h"

#include <stdexcept>

#include "device_buffer.h"
#include "numgate/report.h"

namespace numgate::testing {
namespace {

// One function object's device state: its own stream (so that several cases can be
// checked at once from several host threads), buffers kept between calls.
struct TargetState {
  TargetState(const Op& o, const TargetOp& t, bool all) : op(o), target(t), all_passes(all) {
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "gate 1 on the target: cudaStreamCreate");
  }
  ~TargetState() { cudaStreamDestroy(stream); }
  TargetState(const TargetState&) = delete;
  TargetState& operator=(const TargetState&) = delete;

  const Op& op;
  const TargetOp& target;
  bool all_passes;
  cudaStream_t stream = nullptr;
  std::map<std::string, DeviceBuffer> buffers;
  std::map<std::string, std::vector<unsigned char>> uploaded;  // what each input buffer holds
  DeviceBuffer workspace = DeviceBuffer::unguarded(0);

  DeviceBuffer& buffer(const std::string& name, std::size_t bytes) {
    auto it = buffers.find(name);
    if (it == buffers.end() || it->second.bytes() != bytes) {
      uploaded.erase(name);
      it = buffers.insert_or_assign(name, DeviceBuffer::unguarded(bytes)).first;
    }
    return it->second;
  }

  std::map<std::string, GoldenTensor> operator()(const CaseSpec& c, const std::map<std::string, Tensor>& in) {
    const OpDescriptor& d = op.descriptor();
    CaseSpec c64 = c;  // gradcheck_target passes an FP64 case already
    c64.dtype = DType::fp64;
    auto where = [&](const std::string& what) { return "gate 1 on the target: " + d.name + "/" + c.name + ": " + what; };
    DevicePtrs ptrs;
    std::map<std::string, Tensor> out;  // downloaded into, by tensor name
    for (const auto& t : d.tensors) {
      const DType dt = t.dtype_for(c64);
      Tensor host(dt, t.shape(c64));
      DeviceBuffer& b = buffer(t.name, host.bytes.size());
      ptrs[t.name] = b.data();
      if (is_input(t.role)) {
        const auto it = in.find(t.name);
        if (it == in.end()) throw std::logic_error(where("input " + t.name + " not given"));
        host = it->second.to(dt);
        auto& held = uploaded[t.name];
        if (held != host.bytes) {
          held.clear();  // unknown until the copy succeeds
          cuda_check(cudaMemcpyAsync(b.data(), host.data(), host.bytes.size(), cudaMemcpyHostToDevice, stream),
                     where("uploading " + t.name).c_str());
          cuda_check(cudaStreamSynchronize(stream), where("uploading " + t.name).c_str());
          held = std::move(host.bytes);
        }
      } else {
        out.emplace(t.name, std::move(host));
      }
    }
    std::vector<const PassDecl*> passes;
    for (const auto& p : d.passes)
      if (all_passes || p.name == "Forward") passes.push_back(&p);
    if (passes.empty()) throw std::logic_error(where("the descriptor has no Forward pass"));
    for (const PassDecl* p : passes) {
      const TargetPass& tp = target.pass(p->name);
      const std::size_t ws = tp.workspace_bytes ? tp.workspace_bytes(c64) : 0;
      if (ws > workspace.bytes()) workspace = DeviceBuffer::unguarded(ws);
      const Launch l{c64, ptrs, workspace.data(), ws, stream, RowWindow{}};
      cuda_check(tp.launch(l), where(p->name + " pass launch (FP64)").c_str());
    }
    for (const PassDecl* p : passes)
      for (const auto& w : p->writes) {
        Tensor& v = out.at(w);
        cuda_check(cudaMemcpyAsync(v.data(), buffers.at(w).data(), v.bytes.size(), cudaMemcpyDeviceToHost, stream),
                   where("downloading " + w).c_str());
      }
    // The golden's rounding bounds (pageable destinations: the copies above have returned).
    std::map<std::string, GoldenTensor> g = op.golden(c64, in);
    cuda_check(cudaStreamSynchronize(stream), where("synchronizing after the FP64 launches").c_str());
    for (const PassDecl* p : passes)
      for (const auto& w : p->writes) {
        const auto it = g.find(w);
        if (it == g.end()) throw std::logic_error(where(p->name + " writes " + w + ", which the golden does not return"));
        it->second.value = std::move(out.at(w));
      }
    return g;
  }
};

}  // namespace

GoldenFn target_fp64(const Op& op, const TargetOp& target, bool all_passes) {
  auto state = std::make_shared<TargetState>(op, target, all_passes);
  return [state](const CaseSpec& c, const std::map<std::string, Tensor>& in) { return (*state)(c, in); };
}

GradcheckResult gradcheck_target(const Op& op, const TargetOp& target, const CaseSpec& c,
                                 const GradcheckOptions& opt) {
  CaseSpec c64 = c;  // the golden's rounding bounds, its declared exclusions and the kernels: all FP64
  c64.dtype = DType::fp64;
  GradcheckResult r =
      gradcheck(op, c64, opt, target_fp64(op, target, true), target_fp64(op, target, false), op.make_inputs(c));
  r.implementation = kGate1Target;
  return r;
}

}  // namespace numgate::testing
