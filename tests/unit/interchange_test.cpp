// Interchange without Python: the protobuf wire code, ONNX export read back
// by stoke's own import (every architecture, batch norm kept and folded), the
// safetensors round trip, and the errors bad files and mismatched models get.
// ONNX Runtime parity runs in tests/interchange/ (CTest Interchange.*).
#include "stoke/interchange.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "interchange/protobuf.hpp"
#include "op_test_util.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

nn::ModelSpec spec_of(nn::Architecture arch, int channels, int classes = 4) {
  nn::ModelSpec s;
  s.architecture = arch;
  s.in_channels = channels;
  s.classes = classes;
  if (nn::is_torchvision_resnet(arch)) {
    s.width_multiplier = 0.0625f;
    s.height = s.width = 32;
  } else {
    s.height = s.width = 12;
    s.stem_width = 4;
    s.widths = {4, 6};
    s.strides = {1, 2};
    s.blocks_per_stage = 1;
  }
  return s;
}

// Batch-norm scale and shift away from the identity, then running statistics
// from training forwards on x, so activations (and a fold's rounding) stay
// at the scale of real use.
void perturb(nn::Model& m, const Tensor& x, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  auto params = m.named_parameters();
  for (std::size_t i = 0; i + 1 < params.size(); ++i) {  // rank-1 parameters but the head's bias
    if (params[i].tensor.rank() != 1) continue;
    std::vector<float> v(static_cast<std::size_t>(params[i].tensor.numel()));
    for (float& e : v) e = u(rng) - (i % 2 ? 1.0f : 0.0f);
    params[i].tensor.copy_from_host(v.data());
  }
  for (int i = 0; i < 30; ++i) m.forward(x, true);
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("stoke_interchange_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<float> infer(nn::Model& m, const Tensor& x) {
  return m.forward(x, false).to_vector();
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = a.size() == b.size() ? 0.0f : 1e9f;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(Protobuf, WriterAndReaderRoundTrip) {
  interchange::pb::Writer w, inner;
  inner.bytes(1, "conv");
  w.varint(1, 300);
  w.int64(2, -5);
  w.float32(3, 1.5f);
  w.message(4, inner);
  w.packed_int64(5, {1, 128, 70000});
  interchange::pb::Reader r(w.data(), "test");
  interchange::pb::Field f;
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.number, 300u);
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(static_cast<std::int64_t>(f.number), -5);
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.as_float(), 1.5f);
  ASSERT_TRUE(r.next(f));
  EXPECT_EQ(f.field, 4);
  interchange::pb::Reader ri(f.bytes, "inner");
  interchange::pb::Field g;
  ASSERT_TRUE(ri.next(g));
  EXPECT_EQ(g.bytes, "conv");
  ASSERT_TRUE(r.next(f));
  std::vector<std::int64_t> v;
  interchange::pb::append_int64s(f, v, "test");
  EXPECT_EQ(v, (std::vector<std::int64_t>{1, 128, 70000}));
  EXPECT_FALSE(r.next(f));
  const std::string cut = w.data().substr(0, w.data().size() - 2);
  interchange::pb::Reader bad(cut, "cut");
  EXPECT_THROW(
      {
        while (bad.next(f)) {
        }
      },
      CorruptFile);
}

TEST(Interchange, OnnxExportImportsBackEveryArchitecture) {
  Backend& be = cpu_backend();
  for (auto arch : {nn::Architecture::kResNet, nn::Architecture::kPlainCnn,
                    nn::Architecture::kResNet18, nn::Architecture::kResNet50}) {
    for (int channels : {1, 3}) {
      for (bool fold : {false, true}) {
        SCOPED_TRACE(std::string(nn::architecture_name(arch)) + " channels " +
                     std::to_string(channels) + (fold ? " folded" : ""));
        auto a = nn::build_model(be, spec_of(arch, channels), 1);
        auto b = nn::build_model(be, spec_of(arch, channels), 2);
        Tensor x = random_tensor(be, a->input_shape(2), 4);
        perturb(*a, x, 3);
        const std::string path = temp_path("rt.onnx");
        interchange::OnnxExportOptions o;
        o.fold_batch_norm = fold;
        interchange::export_onnx(*a, path, o);
        const auto want = infer(*a, x);
        EXPECT_GT(max_diff(infer(*b, x), want), 1e-3f);
        const auto report = interchange::import_onnx(*b, path, {});
        EXPECT_FALSE(report.loaded.empty());
        EXPECT_LE(max_diff(infer(*b, x), want), 1e-4f);
        fs::remove(path);
      }
    }
  }
}

TEST(Interchange, SafetensorsRoundTripNewHeadAndGrayStem) {
  Backend& be = cpu_backend();
  auto rgb = nn::build_model(be, spec_of(nn::Architecture::kResNet18, 3), 1);
  perturb(*rgb, random_tensor(be, rgb->input_shape(2), 4), 2);
  const std::string path = temp_path("rt.safetensors");
  interchange::save_safetensors(*rgb, path);
  auto same = nn::build_model(be, spec_of(nn::Architecture::kResNet18, 3), 5);
  interchange::load_safetensors(*same, path);
  EXPECT_EQ(same->parameters().to_vector(), rgb->parameters().to_vector());
  // A gray model with 9 classes: the stem is summed over R, G, B, the head kept.
  auto gray = nn::build_model(be, spec_of(nn::Architecture::kResNet18, 1, 9), 6);
  const auto head_before = gray->named_parameters().back().tensor.to_vector();
  interchange::ImportOptions o;
  o.load_classifier = false;
  const auto report = interchange::load_safetensors(*gray, path, o);
  EXPECT_TRUE(report.stem_summed);
  EXPECT_EQ(report.kept, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(gray->named_parameters().back().tensor.to_vector(), head_before);
  const auto w3 = rgb->named_parameters().front().tensor.to_vector();
  const auto w1 = gray->named_parameters().front().tensor.to_vector();
  ASSERT_EQ(w3.size(), 3 * w1.size());
  EXPECT_NEAR(w1[49 * 2 + 5], w3[49 * 6 + 5] + w3[49 * 7 + 5] + w3[49 * 8 + 5],
              1e-6f);  // channel 2, tap 5
  // Gray input x on the gray model = the same x on all three channels of the RGB model (features).
  fs::remove(path);
}

TEST(Interchange, MismatchedModelListsEveryDifference) {
  Backend& be = cpu_backend();
  auto r18 = nn::build_model(be, spec_of(nn::Architecture::kResNet18, 3), 1);
  const std::string path = temp_path("mm.safetensors");
  interchange::save_safetensors(*r18, path);
  auto r34 = nn::build_model(be, spec_of(nn::Architecture::kResNet34, 3, 7), 1);
  const auto before = r34->parameters().to_vector();
  try {
    interchange::load_safetensors(*r34, path);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("missing layer1.2.conv1.weight (4, 4, 3, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("shape of fc.weight: model (7, 32), file (4, 32)"), std::string::npos) << m;
  }
  EXPECT_EQ(r34->parameters().to_vector(), before) << "a failed import must change nothing";
  auto r50 = nn::build_model(be, spec_of(nn::Architecture::kResNet50, 3), 1);
  const std::string onnx = temp_path("mm.onnx");
  interchange::export_onnx(*r50, onnx);
  EXPECT_THROW(interchange::import_onnx(*r18, onnx), InvalidArgument);
  fs::remove(path);
  fs::remove(onnx);
}

TEST(Interchange, CorruptFilesAreCorruptFileErrors) {
  Backend& be = cpu_backend();
  auto m = nn::build_model(be, spec_of(nn::Architecture::kResNet18, 3), 1);
  const std::string path = temp_path("bad.safetensors");
  auto write = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  write("abc");
  EXPECT_THROW(interchange::load_safetensors(*m, path), CorruptFile);
  std::string huge(8, '\0');
  huge[0] = '\x7f';
  huge[4] = '\x01';
  write(huge + "{}");
  EXPECT_THROW(interchange::load_safetensors(*m, path), CorruptFile);
  const std::string header =
      R"({"conv1.weight":{"dtype":"F32","shape":[4,3,7,7],"data_offsets":[0,999999]}})";
  std::string len(8, '\0');
  len[0] = static_cast<char>(header.size());
  write(len + header + std::string(16, '\0'));
  EXPECT_THROW(interchange::load_safetensors(*m, path), CorruptFile);
  write(len + std::string(header.size(), '{'));
  EXPECT_THROW(interchange::load_safetensors(*m, path), CorruptFile);
  interchange::export_onnx(*m, path);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  write(bytes.substr(0, bytes.size() / 2));
  EXPECT_THROW(interchange::import_onnx(*m, path), CorruptFile);
  EXPECT_THROW(interchange::import_onnx(*m, temp_path("absent.onnx")), IoError);
  fs::remove(path);
}

}  // namespace
}  // namespace stoke::testing
