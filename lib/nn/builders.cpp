// Network builders and the ModelSpec <-> key/value conversion.
#include <sstream>

#include "nn/resnet.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::nn {

namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

const std::string& get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) throw InvalidArgument("ModelSpec: key '" + key + "' is missing");
  return it->second;
}

int to_int(const std::map<std::string, std::string>& m, const std::string& key) {
  const std::string& v = get(m, key);
  try {
    std::size_t used = 0;
    const int x = std::stoi(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument("ModelSpec: key '" + key + "' has value '" + v + "', expected an integer");
}

std::vector<int> to_ints(const std::map<std::string, std::string>& m, const std::string& key) {
  std::vector<int> out;
  std::stringstream ss(get(m, key));
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(to_int({{key, item}}, key));
  return out;
}

}  // namespace

const char* architecture_name(Architecture architecture) noexcept {
  switch (architecture) {
    case Architecture::kResNet:
      return "resnet";
    case Architecture::kPlainCnn:
      return "plain_cnn";
    case Architecture::kResNet18:
      return "resnet18";
    case Architecture::kResNet34:
      return "resnet34";
    case Architecture::kResNet50:
      return "resnet50";
    case Architecture::kWideResNet50_2:
      return "wide_resnet50_2";
  }
  return "unknown";
}

Architecture architecture_from_name(const std::string& name) {
  for (Architecture a :
       {Architecture::kResNet, Architecture::kPlainCnn, Architecture::kResNet18,
        Architecture::kResNet34, Architecture::kResNet50, Architecture::kWideResNet50_2}) {
    if (name == architecture_name(a)) return a;
  }
  throw InvalidArgument(
      "architecture '" + name +
      "' is not one of resnet, plain_cnn, resnet18, resnet34, resnet50, wide_resnet50_2");
}

bool is_torchvision_resnet(Architecture architecture) noexcept {
  return architecture == Architecture::kResNet18 || architecture == Architecture::kResNet34 ||
         architecture == Architecture::kResNet50 || architecture == Architecture::kWideResNet50_2;
}

namespace {

void check_activation(const ModelSpec& s) {
  if (s.activation != "relu") {
    throw InvalidArgument("ModelSpec: activation '" + s.activation +
                          "' is not implemented (accepted: relu)");
  }
}

}  // namespace

std::map<std::string, std::string> ModelSpec::to_map() const {
  std::map<std::string, std::string> m = {{"architecture", architecture_name(architecture)},
                                          {"width_multiplier", std::to_string(width_multiplier)},
                                          {"in_channels", std::to_string(in_channels)},
                                          {"height", std::to_string(height)},
                                          {"width", std::to_string(width)},
                                          {"classes", std::to_string(classes)},
                                          {"stem_width", std::to_string(stem_width)},
                                          {"widths", join(widths)},
                                          {"strides", join(strides)},
                                          {"blocks_per_stage", std::to_string(blocks_per_stage)},
                                          {"dropout", std::to_string(dropout)},
                                          {"activation", activation}};
  if (is_segmentation()) m["decoder_channels"] = join(decoder_channels);  // classifiers: absent
  return m;
}

ModelSpec ModelSpec::from_map(const std::map<std::string, std::string>& m) {
  ModelSpec s;
  try {
    s.architecture = architecture_from_name(get(m, "architecture"));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("ModelSpec: ") + e.what());
  }
  s.in_channels = to_int(m, "in_channels");
  s.height = to_int(m, "height");
  s.width = to_int(m, "width");
  s.classes = to_int(m, "classes");
  s.stem_width = to_int(m, "stem_width");
  s.widths = to_ints(m, "widths");
  s.strides = to_ints(m, "strides");
  s.blocks_per_stage = to_int(m, "blocks_per_stage");
  try {
    s.dropout = std::stof(get(m, "dropout"));
  } catch (const std::logic_error&) {
    throw InvalidArgument("ModelSpec: key 'dropout' is not a number");
  }
  // Written since the torchvision backbones; older files mean 1.
  if (m.count("width_multiplier")) {
    try {
      s.width_multiplier = std::stof(get(m, "width_multiplier"));
    } catch (const std::logic_error&) {
      throw InvalidArgument("ModelSpec: key 'width_multiplier' is not a number");
    }
  }
  // Written since the field exists; older files mean relu.
  if (m.count("activation")) s.activation = get(m, "activation");
  if (m.count("decoder_channels")) s.decoder_channels = to_ints(m, "decoder_channels");
  check_activation(s);
  return s;
}

std::unique_ptr<Model> build_model(Backend& backend, const ModelSpec& spec, std::uint64_t seed,
                                   Initialization init) {
  check_activation(spec);
  if (spec.is_segmentation())
    return std::make_unique<Model>(spec, build_unet(backend, spec), seed, init);
  if (is_torchvision_resnet(spec.architecture))
    return std::make_unique<Model>(spec, build_torchvision_resnet(backend, spec, seed), seed, init);
  if (spec.widths.empty() || spec.classes < 1 || spec.in_channels < 1) {
    throw InvalidArgument("build_model: need at least one width, one class and one input channel");
  }
  auto net = std::make_unique<Sequential>(backend, "net");
  int channels = spec.in_channels;
  const Conv2dParams same{1, 1, 1, 1, 1, 1, 1};
  if (spec.architecture == Architecture::kResNet) {
    if (spec.strides.size() != spec.widths.size() || spec.blocks_per_stage < 1) {
      throw InvalidArgument(
          "build_model: resnet needs one stride per stage width and >= 1 block per stage");
    }
    net->add(std::make_unique<Conv2d>(backend, "stem.conv", channels, spec.stem_width, 3, same));
    net->add(std::make_unique<BatchNorm2d>(backend, "stem.bn", spec.stem_width));
    net->add(std::make_unique<Relu>(backend, "stem.relu"));
    channels = spec.stem_width;
    for (std::size_t st = 0; st < spec.widths.size(); ++st) {
      for (int b = 0; b < spec.blocks_per_stage; ++b) {
        const std::string name = "stage" + std::to_string(st + 1) + ".block" + std::to_string(b);
        net->add(std::make_unique<BasicBlock>(backend, name, channels, spec.widths[st],
                                              b == 0 ? spec.strides[st] : 1));
        channels = spec.widths[st];
      }
    }
  } else {
    for (std::size_t i = 0; i < spec.widths.size(); ++i) {
      const std::string name = "conv" + std::to_string(i + 1);
      net->add(std::make_unique<Conv2d>(backend, name, channels, spec.widths[i], 3, same));
      net->add(std::make_unique<BatchNorm2d>(backend, name + ".bn", spec.widths[i]));
      net->add(std::make_unique<Relu>(backend, name + ".relu"));
      net->add(std::make_unique<Pool2d>(backend, name + ".pool", PoolKind::kMax, Pool2dParams{}));
      channels = spec.widths[i];
    }
  }
  net->add(std::make_unique<GlobalAvgPool>(backend, "gap"));
  if (spec.dropout > 0.0f)
    net->add(std::make_unique<Dropout>(backend, "dropout", spec.dropout, seed ^ 0xD40Full));
  net->add(std::make_unique<Linear>(backend, "fc", channels, spec.classes));
  net->output_shape({1, spec.in_channels, spec.height, spec.width});  // validates the spatial sizes
  return std::make_unique<Model>(spec, std::move(net), seed, init);
}

}  // namespace stoke::nn
