// Rare defects: on a 1:20 synthetic defect set, the class-balanced sampler
// and per-class loss weights each raise the defect recall at equal steps;
// the sampler is deterministic per (seed, epoch) and balanced; the advisor
// names the settings when the classes are strongly imbalanced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "stoke/error.hpp"
#include "stoke/threads.hpp"
#include "stoke/tune.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

class RareDefects : public testing::TinyDataset {
 protected:
  static constexpr int kOk = 400, kDefect = 20, kTestEach = 100;

  void SetUp() override {
    TinyDataset::SetUp();
    write_set("train", kOk, kDefect, 11);
    write_set("test", kTestEach, kTestEach, 23);
    train_ = Dataset::from_idx(dir_ / "train_images.idx", dir_ / "train_labels.idx");
    test_ = Dataset::from_idx(dir_ / "test_images.idx", dir_ / "test_labels.idx");
    options_.epochs = 4;  // 104 steps of 16
    options_.validate_every_epochs = 0;
    loader_.drop_last = true;
  }
  // Label 0 = ok (noise), 1 = defect (the same noise and a faint 3x3 spot).
  void write_set(const std::string& name, int ok, int defect, std::uint32_t seed) {
    const int count = ok + defect;
    std::vector<unsigned char> pixels(static_cast<std::size_t>(count) * kSide * kSide);
    std::vector<unsigned char> labels(static_cast<std::size_t>(count));
    std::uint32_t rng = seed;
    const auto next = [&rng] { return rng = rng * 1664525u + 1013904223u; };
    for (int i = 0; i < count; ++i) {
      const bool is_defect = (i % (count / defect)) == 0 && i / (count / defect) < defect;
      labels[static_cast<std::size_t>(i)] = is_defect ? 1 : 0;
      unsigned char* img = &pixels[static_cast<std::size_t>(i) * kSide * kSide];
      for (int p = 0; p < kSide * kSide; ++p)
        img[p] = static_cast<unsigned char>(90 + (next() >> 26));
      if (!is_defect) continue;
      const int sx = 1 + static_cast<int>(next() >> 29), sy = 1 + static_cast<int>(next() >> 29);
      for (int y = sy; y < sy + 3; ++y)
        for (int x = sx; x < sx + 3; ++x)
          img[y * kSide + x] = static_cast<unsigned char>(img[y * kSide + x] + 40);
    }
    write_idx(dir_ / (name + "_images.idx"), pixels, {count, kSide, kSide});
    write_idx(dir_ / (name + "_labels.idx"), labels, {count});
  }
  // Defects of the test set classified as defects, after fit() with `o`.
  double defect_recall(const TrainerOptions& o) {
    auto m = model();
    Trainer trainer(*m, o);
    trainer.fit(train_, nullptr, loader_);
    LoaderOptions lo = loader_;
    lo.shuffle = false;
    lo.drop_last = false;
    lo.batch_size = test_.size();
    Loader loader(test_, lo);
    std::vector<float> images(test_.size() * loader.sample_bytes() / sizeof(float));
    std::vector<std::int32_t> labels(test_.size());
    const auto n = static_cast<std::int64_t>(
        loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), labels));
    Tensor x(m->backend(), m->input_shape(n));
    x.copy_from_host(images.data());
    const std::vector<float> logits = m->forward(x, false).to_vector();
    int found = 0, defects = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (labels[static_cast<std::size_t>(i)] != 1) continue;
      ++defects;
      found += logits[static_cast<std::size_t>(2 * i + 1)] > logits[static_cast<std::size_t>(2 * i)]
                   ? 1
                   : 0;
    }
    return static_cast<double>(found) / defects;
  }
  Dataset train_, test_;
};

TEST_F(RareDefects, BalancedSamplerRaisesDefectRecallAtEqualSteps) {
  const double plain = defect_recall(options_);
  TrainerOptions balanced = options_;
  balanced.balanced_sampler = true;
  const double sampled = defect_recall(balanced);
  std::printf("defect recall at equal steps: plain %.2f, balanced sampler %.2f\n", plain, sampled);
  EXPECT_GT(sampled, plain + 0.2);
}

TEST_F(RareDefects, TheBalancedSamplerIsDeterministicAndBalanced) {
  LoaderOptions lo = loader_;
  lo.balanced_sampler = true;
  lo.seed = 3;
  lo.batch_size = 420;
  lo.drop_last = false;
  const auto labels_of = [&](std::uint64_t epoch, int threads) {
    set_thread_count(threads);
    Loader loader(train_, lo);
    std::vector<float> images(420 * loader.sample_bytes() / sizeof(float));
    std::vector<std::int32_t> labels(420);
    loader.fill_batch(epoch, 0, std::as_writable_bytes(std::span(images)), labels);
    return std::make_pair(labels, images);
  };
  const int before = thread_count();
  const auto a = labels_of(0, 1), b = labels_of(0, 2), c = labels_of(1, 1);
  set_thread_count(before);
  EXPECT_EQ(a, b) << "the thread count changed the balanced epoch";
  EXPECT_NE(a.first, c.first) << "two epochs drew the same order";
  const auto defects = std::count(a.first.begin(), a.first.end(), 1);
  EXPECT_EQ(defects, 210) << "an epoch draws each of the two classes 210 times";
}

TEST(AdvisorImbalance, StrongImbalanceNamesTheSettings) {
  AdvisorInput in;
  in.class_counts = {400, 20};
  auto advice = advise(in);
  const auto it = std::find_if(advice.begin(), advice.end(),
                               [](const Advice& a) { return a.rule == "class-imbalance"; });
  ASSERT_NE(it, advice.end()) << format_advice(advice);
  EXPECT_NE(it->diagnosis.find("20.0x"), std::string::npos) << it->diagnosis;
  const std::string text = format_advice(advice);
  EXPECT_NE(text.find("balanced_class_weights"), std::string::npos) << text;
  EXPECT_NE(text.find("balanced_sampler"), std::string::npos) << text;
  in.class_counts = {400, 100};  // 4x: below the rule's threshold
  advice = advise(in);
  EXPECT_TRUE(std::none_of(advice.begin(), advice.end(),
                           [](const Advice& a) { return a.rule == "class-imbalance"; }));
  in.class_counts = {400, 20};
  in.balanced_sampler = true;  // already remedied
  advice = advise(in);
  EXPECT_TRUE(std::none_of(advice.begin(), advice.end(),
                           [](const Advice& a) { return a.rule == "class-imbalance"; }));
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST_F(RareDefects, ClassCountsAndBalancedWeights) {
  const auto counts = class_counts(train_, 2);
  ASSERT_EQ(counts, (std::vector<std::uint64_t>{400, 20}));
  const auto w = balanced_class_weights(counts);
  EXPECT_FLOAT_EQ(w[0], 420.0f / (2 * 400));
  EXPECT_FLOAT_EQ(w[1], 420.0f / (2 * 20));
  EXPECT_EQ(balanced_class_weights({5, 0, 15})[1], 1.0f) << "a class without samples";
  EXPECT_THROW(class_counts(train_, 1), InvalidArgument);  // label 1 outside [0, 1)
  TrainerOptions o = options_;
  o.class_weights = {1.0f};
  EXPECT_THROW(resolve_class_weights(o, train_, 2), InvalidArgument);
  o.class_weights = {1.0f, -2.0f};
  EXPECT_THROW(resolve_class_weights(o, train_, 2), InvalidArgument);
  o.class_weights = {1.0f, 20.0f};
  EXPECT_EQ(resolve_class_weights(o, train_, 2), o.class_weights);
  o.balanced_class_weights = true;
  EXPECT_THROW(resolve_class_weights(o, train_, 2), InvalidArgument);  // both set
  o.class_weights.clear();
  EXPECT_EQ(resolve_class_weights(o, train_, 2), w);
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST_F(RareDefects, BalancedClassWeightsRaiseDefectRecallAtEqualSteps) {
  const double plain = defect_recall(options_);
  TrainerOptions weighted = options_;
  weighted.balanced_class_weights = true;
  const double recall = defect_recall(weighted);
  std::printf("defect recall at equal steps: plain %.2f, balanced class weights %.2f\n", plain,
              recall);
  EXPECT_GT(recall, plain + 0.2);
}

}  // namespace
}  // namespace stoke
