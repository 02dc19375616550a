// Checkpoints: round trip, and every way a file can be wrong is a
// CorruptFile (or IoError) that says what, never a crash. Inference from a
// checkpoint matches the trained model.
#include <filesystem>
#include <fstream>
#include <thread>

#include "op_test_util.hpp"
#include "stoke/nn.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

nn::ModelSpec small_spec() {
  nn::ModelSpec s;
  s.height = s.width = 8;
  s.stem_width = 4;
  s.widths = {4, 8};
  s.strides = {1, 2};
  s.blocks_per_stage = 1;
  s.classes = 4;
  return s;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_ckpt_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "model.ckpt").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains a few steps so weights, running stats and optimizer state are non-trivial.
  std::unique_ptr<nn::Model> trained(nn::Sgd*& sgd_out) {
    Backend& be = cpu_backend();
    auto model = nn::build_model(be, small_spec(), 3);
    sgd_ = std::make_unique<nn::Sgd>(*model);
    nn::TrainStep step(*model, *sgd_);
    Tensor x = random_tensor(be, model->input_shape(6), 4);
    std::vector<std::int32_t> l = {0, 1, 2, 3, 0, 1};
    Tensor labels(be, {6}, DType::kInt32);
    labels.copy_from_host(l.data());
    for (int i = 0; i < 3; ++i) step.run(x, labels, 0.05f);
    sgd_out = sgd_.get();
    return model;
  }
  std::vector<char> bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::vector<char>& b) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  }
  void expect_corrupt(const std::string& what, const std::string& needle) {
    try {
      nn::read_checkpoint_info(path_);
      ADD_FAILURE() << what << ": no error";
    } catch (const CorruptFile& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << "message names the file";
    }
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<nn::Sgd> sgd_;
};

TEST_F(CheckpointTest, RoundTripRestoresWeightsBuffersOptimizerAndMetadata) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::Preprocessing pre;
  pre.mean = {0.286f};
  pre.std = {0.353f};
  std::map<std::string, std::string> meta = {{"dataset", "fashion-mnist"}};
  pre.to_metadata(meta);
  nn::save_checkpoint(path_, *model, sgd, meta);
  EXPECT_FALSE(fs::exists(path_ + ".tmp." + std::to_string(::getpid())));

  auto other = nn::build_model(cpu_backend(), small_spec(), 99);
  nn::Sgd other_sgd(*other);
  const nn::CheckpointInfo info = nn::load_checkpoint(path_, *other, &other_sgd);
  EXPECT_EQ(info.metadata.at("dataset"), "fashion-mnist");
  EXPECT_EQ(info.optimizer_kind, "sgd");
  EXPECT_EQ(other_sgd.steps(), 3);
  EXPECT_EQ(other->parameters().to_vector(), model->parameters().to_vector());
  for (std::size_t i = 0; i < model->named_buffers().size(); ++i) {
    EXPECT_EQ(other->named_buffers()[i].tensor.to_vector(),
              model->named_buffers()[i].tensor.to_vector());
  }
  EXPECT_EQ(other_sgd.state()[0].tensor.to_vector(), sgd->state()[0].tensor.to_vector());
  const auto p = nn::Preprocessing::from_metadata(info.metadata);
  EXPECT_FLOAT_EQ(p.mean[0], 0.286f);
}

TEST_F(CheckpointTest, TruncatedFilesAreCorruptAtEveryLength) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::save_checkpoint(path_, *model, sgd);
  const auto full = bytes();
  for (std::size_t len : {std::size_t{0}, std::size_t{5}, std::size_t{23}, std::size_t{40},
                          full.size() / 2, full.size() - 1}) {
    write(std::vector<char>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len)));
    expect_corrupt("truncated to " + std::to_string(len), "truncated");
  }
}

TEST_F(CheckpointTest, FlippedByteIsAChecksumError) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::save_checkpoint(path_, *model, sgd);
  auto b = bytes();
  b[b.size() / 2] ^= 0x5A;
  write(b);
  expect_corrupt("flipped byte", "checksum");
}

TEST_F(CheckpointTest, WrongMagicAndVersionAreNamed) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::save_checkpoint(path_, *model, sgd);
  auto b = bytes();
  b[8] = 7;  // version 7
  write(b);
  expect_corrupt("version", "version 7");
  b[0] = 'X';
  write(b);
  expect_corrupt("magic", "magic");
}

TEST_F(CheckpointTest, MismatchedModelOrOptimizerIsNamed) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::save_checkpoint(path_, *model, sgd);
  nn::ModelSpec wider = small_spec();
  wider.widths = {4, 16};
  auto other = nn::build_model(cpu_backend(), wider, 1);
  EXPECT_THROW(nn::load_checkpoint(path_, *other), CorruptFile);
  auto same = nn::build_model(cpu_backend(), small_spec(), 1);
  nn::Adam adam(*same);
  try {
    nn::load_checkpoint(path_, *same, &adam);
    ADD_FAILURE() << "loading SGD state into Adam must fail";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find("'sgd'"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, MissingFileIsIoError) {
  EXPECT_THROW(nn::read_checkpoint_info((dir_ / "absent.ckpt").string()), IoError);
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  EXPECT_THROW(nn::save_checkpoint((dir_ / "no" / "such" / "dir.ckpt").string(), *model, sgd),
               IoError);
}

TEST_F(CheckpointTest, ClassifierMatchesTheTrainedModel) {
  nn::Sgd* sgd = nullptr;
  auto model = trained(sgd);
  nn::Preprocessing pre;
  pre.mean = {0.5f};
  pre.std = {0.25f};
  std::map<std::string, std::string> meta;
  pre.to_metadata(meta);
  nn::save_checkpoint(path_, *model, nullptr, meta);

  const int count = 5, hw = 8 * 8;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count * hw));
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>((i * 97 + 13) % 256);
  std::vector<float> x_host(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) x_host[i] = (pixels[i] / 255.0f - 0.5f) / 0.25f;
  Tensor x(cpu_backend(), model->input_shape(count));
  x.copy_from_host(x_host.data());
  const auto logits = model->forward(x, false).to_vector();

  nn::Classifier classifier(path_, &cpu_backend());
  const auto batch = classifier.classify_batch(pixels.data(), count, 8, 8, 1);
  ASSERT_EQ(batch.size(), 5u);
  for (int n = 0; n < count; ++n) {
    int arg = 0;
    for (int j = 1; j < 4; ++j)
      if (logits[static_cast<std::size_t>(n * 4 + j)] >
          logits[static_cast<std::size_t>(n * 4 + arg)])
        arg = j;
    EXPECT_EQ(batch[static_cast<std::size_t>(n)].label, arg);
    const auto single = classifier.classify(pixels.data() + n * hw, 8, 8, 1);
    EXPECT_EQ(single.label, arg);
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(single.probabilities[static_cast<std::size_t>(j)],
                  batch[static_cast<std::size_t>(n)].probabilities[static_cast<std::size_t>(j)],
                  1e-5);
    }
  }
  // Concurrent callers are serialized and get the same answers.
  std::vector<nn::Prediction> a, b;
  std::thread t1([&] {
    for (int i = 0; i < 5; ++i) a = classifier.classify_batch(pixels.data(), count, 8, 8, 1);
  });
  std::thread t2([&] {
    for (int i = 0; i < 5; ++i) b = classifier.classify_batch(pixels.data(), count, 8, 8, 1);
  });
  t1.join();
  t2.join();
  for (int n = 0; n < count; ++n)
    EXPECT_EQ(a[static_cast<std::size_t>(n)].probabilities,
              b[static_cast<std::size_t>(n)].probabilities);
  EXPECT_THROW(classifier.classify(pixels.data(), 7, 8, 1), InvalidArgument);
}

}  // namespace
}  // namespace stoke::testing
