// Checked assignment of imported tensors (see assign.hpp).
#include "interchange/assign.hpp"

#include "stoke/error.hpp"

namespace stoke::interchange {

namespace {

void find_ends(const nn::Layer& l, ModelEnds& e) {
  nn::visit_layer(
      l,
      [&](const nn::Sequential& s) {
        for (const auto& c : s.layers()) find_ends(*c, e);
      },
      [&](const nn::Residual& r) { find_ends(r.main(), e); },
      [&](const nn::Unet& u) {  // stem: the encoder's; head: the segmentation head
        find_ends(u.encoder(), e);
        e.head_weight = u.head().name() + ".weight";
        e.head_bias = u.head().name() + ".bias";
      },
      [&](const nn::Conv2d& c) {
        if (e.stem_weight.empty()) e.stem_weight = c.name() + ".weight";
      },
      [&](const nn::Linear& fc) {
        e.head_weight = fc.name() + ".weight";
        e.head_bias = fc.name() + ".bias";
      },
      [](const nn::Layer&) {});
}

// (O, 3, k, k) summed over the input channels into (O, 1, k, k).
std::vector<float> sum_channels(const HostTensor& t) {
  const std::int64_t o = t.shape[0], c = t.shape[1], k = t.shape[2] * t.shape[3];
  std::vector<float> out(static_cast<std::size_t>(o * k), 0.0f);
  for (std::int64_t i = 0; i < o; ++i) {
    for (std::int64_t j = 0; j < c; ++j) {
      for (std::int64_t x = 0; x < k; ++x)
        out[static_cast<std::size_t>(i * k + x)] +=
            t.data[static_cast<std::size_t>((i * c + j) * k + x)];
    }
  }
  return out;
}

}  // namespace

std::string dims_to_string(const std::vector<std::int64_t>& dims) {
  return shape_to_string(Shape(dims.begin(), dims.end()));
}

ModelEnds model_ends(const nn::Model& model) {
  ModelEnds e;
  find_ends(model.network(), e);
  return e;
}

ImportReport assign_weights(nn::Model& model, const std::map<std::string, HostTensor>& source,
                            const ImportOptions& options, const std::string& what,
                            bool ignore_extra) {
  const ModelEnds ends = model_ends(model);
  std::vector<nn::NamedTensor> targets = model.named_parameters();
  for (auto& b : model.named_buffers()) targets.push_back(b);
  std::vector<std::string> problems;
  std::vector<std::pair<Tensor, std::vector<float>>> writes;
  ImportReport report;
  std::map<std::string, bool> used;
  for (const auto& t : targets) {
    const bool head = t.name == ends.head_weight || t.name == ends.head_bias;
    if (head && !options.load_classifier) {
      report.kept.push_back(t.name);
      used[t.name] = true;
      continue;
    }
    auto it = source.find(t.name);
    if (it == source.end()) {
      problems.push_back("missing " + t.name + " " + shape_to_string(t.tensor.shape()));
      continue;
    }
    used[t.name] = true;
    const HostTensor& h = it->second;
    const Shape want = t.tensor.shape();
    const Shape got(h.shape.begin(), h.shape.end());
    if (h.data.size() !=
        static_cast<std::size_t>(shape_numel(got))) {  // a type the readers do not convert
      problems.push_back(t.name + ": " + std::to_string(h.data.size()) +
                         " float values for shape " + shape_to_string(got) +
                         " (only float32, float64 and int64 ONNX weights are read)");
      continue;
    }
    if (got == want) {
      writes.emplace_back(t.tensor, h.data);
    } else if (t.name == ends.stem_weight && options.sum_rgb_stem && want.size() == 4 &&
               got.size() == 4 && want[1] == 1 && got[1] == 3 && want[0] == got[0] &&
               want[2] == got[2] && want[3] == got[3]) {
      writes.emplace_back(t.tensor, sum_channels(h));
      report.stem_summed = true;
    } else {
      problems.push_back("shape of " + t.name + ": model " + shape_to_string(want) + ", file " +
                         shape_to_string(got));
      continue;
    }
    report.loaded.push_back(t.name);
  }
  if (!ignore_extra) {
    for (const auto& [name, h] : source) {
      if (!used.count(name))
        problems.push_back("unexpected " + name + " " + dims_to_string(h.shape));
    }
  }
  if (!problems.empty()) {
    std::string msg = what + ": " + std::to_string(problems.size()) +
                      " difference(s) from the model (" +
                      nn::architecture_name(model.spec().architecture) + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    throw InvalidArgument(msg);
  }
  for (auto& [tensor, data] : writes) tensor.copy_from_host(data.data());
  return report;
}

}  // namespace stoke::interchange
