// The backend registry: the CPU backend always, GPU backends as plugins add
// them. The one mutable global the library keeps besides its thread arena.
#include <algorithm>
#include <mutex>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

Backend::~Backend() = default;

const char* to_string(Op op) noexcept {
  switch (op) {
    case Op::kConv2d: return "conv2d";
    case Op::kBatchNorm: return "batch_norm";
    case Op::kRelu: return "relu";
    case Op::kMaxPool2d: return "max_pool2d";
    case Op::kAvgPool2d: return "avg_pool2d";
    case Op::kGlobalAvgPool: return "global_avg_pool";
    case Op::kAdd: return "add";
    case Op::kLinear: return "linear";
    case Op::kSoftmaxCrossEntropy: return "softmax_cross_entropy";
    case Op::kDropout: return "dropout";
    case Op::kSgdUpdate: return "sgd_update";
    case Op::kAdamUpdate: return "adam_update";
  }
  return "?";
}

std::int64_t conv_output_size(std::int64_t in, int kernel, int stride, int pad,
                              int dilation) noexcept {
  const std::int64_t span = static_cast<std::int64_t>(dilation) * (kernel - 1) + 1;
  const std::int64_t padded = in + 2 * static_cast<std::int64_t>(pad);
  if (padded < span || stride <= 0) return 0;
  return (padded - span) / stride + 1;
}

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> backends;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: plugins may outlive static teardown order
    reg->backends.push_back(std::make_unique<cpu::CpuBackend>());
    return reg;
  }();
  return *r;
}

}  // namespace

Backend& cpu_backend() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return *r.backends.front();
}

Backend* find_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& b : r.backends) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

void register_backend(std::unique_ptr<Backend> backend) {
  if (!backend) throw InvalidArgument("register_backend: null backend");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string name = backend->name();
  for (auto& b : r.backends) {
    if (b->name() == name) {
      throw InvalidArgument("register_backend: a backend named '" + name +
                            "' is already registered");
    }
  }
  r.backends.push_back(std::move(backend));
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (auto& b : r.backends) names.push_back(b->name());
  return names;
}

Backend& default_backend() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& b : r.backends) {
    if (!b->is_host()) return *b;
  }
  return *r.backends.front();
}

}  // namespace stoke

namespace stoke {

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t memory_cap) {
  return std::make_unique<cpu::CpuBackend>(memory_cap);
}

}  // namespace stoke
