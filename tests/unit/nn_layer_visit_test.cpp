// Layers describe themselves: visit_layer hands each layer to the handler of
// its own type (a Residual subclass to the Residual one), every other type to
// the `const Layer&` fallback; layer_as is "is it a T".
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "stoke/backend.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::nn {
namespace {

std::string kind_of(const Layer& layer) {
  return visit_layer(
      layer, [](const Conv2d&) { return std::string("conv"); },
      [](const Residual& r) { return "residual of " + std::to_string(r.main().layers().size()); },
      [](const Dropout&) { return std::string("dropout"); },
      [](const Layer& other) { return "other " + other.name(); });
}

TEST(LayerVisit, EachLayerReachesTheHandlerOfItsOwnType) {
  Backend& be = cpu_backend();
  const Conv2d conv(be, "c", 3, 8, 3);
  const Dropout dropout(be, "d", 0.5f, 1);
  const Relu relu(be, "r");
  const BasicBlock block(be, "b", 8, 8, 1);
  EXPECT_EQ(kind_of(conv), "conv");
  EXPECT_EQ(kind_of(dropout), "dropout");
  EXPECT_EQ(kind_of(relu), "other r");
  EXPECT_EQ(kind_of(block), "residual of " + std::to_string(block.main().layers().size()));
  EXPECT_GT(block.main().layers().size(), 1u);

  EXPECT_EQ(layer_as<Conv2d>(conv), &conv);
  EXPECT_EQ(layer_as<Conv2d>(relu), nullptr);
  EXPECT_EQ(layer_as<Residual>(block), &block);
  EXPECT_EQ(layer_as<Sequential>(block), nullptr);
}

TEST(LayerVisit, HandlersWithoutAResultRunForTheirSideEffects) {
  Backend& be = cpu_backend();
  Sequential seq(be, "s");
  seq.add(std::make_unique<Conv2d>(be, "c1", 3, 4, 3));
  seq.add(std::make_unique<Relu>(be, "r"));
  seq.add(std::make_unique<Conv2d>(be, "c2", 4, 4, 3));
  int convs = 0, others = 0;
  for (const auto& l : seq.layers()) {
    visit_layer(
        *l, [&](const Conv2d&) { ++convs; }, [&](const Layer&) { ++others; });
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(others, 1);
  // The non-const form hands out a changeable layer.
  Dropout d(be, "d", 0.5f, 3);
  Layer& as_layer = d;
  layer_as<Dropout>(as_layer)->restore_stream(9, 4);
  EXPECT_EQ(d.seed(), 9u);
  EXPECT_EQ(d.draws(), 4u);
}

}  // namespace
}  // namespace stoke::nn
