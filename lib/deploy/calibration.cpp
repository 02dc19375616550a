// int8 calibration (stoke/deploy.hpp, docs/precision.md): the fp32
// inference program over a folder of images, recording the range of every
// fused convolution's input (the max-abs method: the scale covers the whole
// range seen, nothing clipped).
#include <string>
#include <vector>

#include "deploy/preprocess.hpp"
#include "modelfile/model_file.hpp"
#include "modelfile/text.hpp"
#include "nn/fused_inference.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/program.hpp"

namespace stoke {

Int8Calibration calibrate_int8(const std::filesystem::path& model_file,
                               const std::vector<std::filesystem::path>& images,
                               const std::string& folder, const PredictorOptions& options) {
  if (images.empty()) {
    throw InvalidArgument("int8 calibration: no image in '" + folder + "'");
  }
  Backend& backend = options.backend ? *options.backend : default_backend();
  modelfile_detail::LoadedModel loaded = modelfile_detail::load_model_file(model_file, backend);
  deploy_detail::SamplePreprocessor pre(loaded.info, default_simd_level());
  nn::FusedInference plan(loaded.model->network());
  std::vector<ActivationRange> ranges;
  if (!plan.record_conv_input_ranges(&ranges)) {
    throw Unsupported("int8 calibration: " + backend.name() +
                      " cannot record activation ranges (int8 runs on the CPU backend with "
                      "oneDNN)");
  }
  std::vector<float> x(pre.sample_size());
  const Shape shape = loaded.model->input_shape(1);
  Tensor input(backend, shape);
  for (const auto& file : images) {
    pre.from_file(file, x);
    input.copy_from_host(x.data());
    plan.forward(input);
  }
  plan.record_conv_input_ranges(nullptr);
  Int8Calibration out;
  for (const ActivationRange& r : ranges) out.input_ranges.emplace_back(r.min, r.max);
  out.provenance["folder"] = folder;
  out.provenance["images"] = std::to_string(images.size());
  out.provenance["method"] = "max-abs";
  out.provenance["date"] = modelfile_detail::utc_now();
  return out;
}

void add_int8_metadata(std::map<std::string, std::string>& metadata, const Int8Calibration& c) {
  std::vector<std::string> ranges;
  for (const auto& [lo, hi] : c.input_ranges) {
    ranges.push_back(modelfile_detail::float_text(lo) + ":" + modelfile_detail::float_text(hi));
  }
  metadata["model.int8.input_ranges"] = modelfile_detail::join(ranges, ",");
  for (const auto& [k, v] : c.provenance) metadata["model.int8.calibration." + k] = v;
}

}  // namespace stoke
