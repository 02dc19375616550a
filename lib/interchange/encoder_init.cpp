// A U-Net's encoder from a torchvision backbone's safetensors file: the
// file's names take the "encoder." prefix the U-Net's encoder has
// (docs/segmentation-model.md), its classifier head (fc.*) is left out, and
// the decoder and segmentation head keep their values. The one assignment
// (assign_weights) checks every name and shape as load_safetensors does.
#include <algorithm>

#include "interchange/assign.hpp"
#include "stoke/error.hpp"
#include "stoke/interchange.hpp"

namespace stoke::interchange {

ImportReport load_encoder_safetensors(nn::Model& model, const std::string& path,
                                      const ImportOptions& options) {
  const std::string what = "load_encoder_safetensors '" + path + "'";
  if (!model.spec().is_segmentation())
    throw InvalidArgument(what + ": the model is not a U-Net (no decoder_channels)");
  std::map<std::string, HostTensor> source;
  for (auto& [name, tensor] : read_safetensors(path)) {
    if (name.rfind("fc.", 0) == 0) continue;  // the backbone's classifier head
    source[name.rfind("encoder.", 0) == 0 ? name : "encoder." + name] = std::move(tensor);
  }
  // The decoder and the head, handed in as they are now.
  std::vector<nn::NamedTensor> targets = model.named_parameters();
  for (auto& b : model.named_buffers()) targets.push_back(b);
  std::vector<std::string> own;
  for (const auto& t : targets) {
    if (t.name.rfind("encoder.", 0) == 0) continue;
    if (source.count(t.name))
      throw InvalidArgument(what + ": holds " + t.name + ", which is not an encoder tensor");
    HostTensor h;
    const Shape shape = t.tensor.shape();
    h.shape.assign(shape.begin(), shape.end());
    h.data.resize(static_cast<std::size_t>(t.tensor.numel()));
    t.tensor.copy_to_host(h.data.data());
    source[t.name] = std::move(h);
    own.push_back(t.name);
  }
  ImportOptions o = options;
  o.load_classifier = true;  // the head is among the model's own tensors above
  ImportReport r = assign_weights(model, source, o, what, false);
  std::erase_if(r.loaded, [&](const std::string& n) {
    return std::find(own.begin(), own.end(), n) != own.end();
  });
  r.kept = own;
  return r;
}

}  // namespace stoke::interchange
