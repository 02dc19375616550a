// ONNX export of an anomaly model (stoke/anomaly_export.hpp): the backbone's
// layers through the classifier export's graph builder, then PatchCore's
// nearest-neighbour scoring or PaDiM's Mahalanobis distances as standard ops
// with what was fitted as constants, then the map's resize and blur.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "anomaly/knn.hpp"
#include "anomaly/patchcore_impl.hpp"
#include "anomaly/resample.hpp"
#include "core/atomic_file.hpp"
#include "data/tiles.hpp"
#include "interchange/onnx_graph.hpp"
#include "stoke/anomaly_export.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly {

namespace {

using interchange::detail::int_attr;
using interchange::detail::ints_attr;
using interchange::detail::OnnxGraph;
using interchange::detail::string_attr;
using Dims = std::vector<std::int64_t>;

constexpr const char* kWhat = "anomaly ONNX export";

std::size_t layer_index(const nn::Sequential& net, const std::string& name) {
  const auto& layers = net.layers();
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i]->name() == name) return i;
  throw Unsupported(std::string(kWhat) + ": the backbone has no top-level layer '" + name + "'");
}

// A float as text that reads back to the same float ("nan" when not stored).
std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::uint64_t floats_bytes(std::uint64_t n) {
  return n * sizeof(float);
}

// The output of top-level layer `index` for batch 1.
Shape shape_after(const nn::Model& model, std::size_t index) {
  Shape shape = model.input_shape(1);
  const auto& layers = model.network().layers();
  for (std::size_t i = 0; i <= index; ++i) shape = layers[i]->output_shape(shape);
  return shape;
}

// The per-patch distances and (PatchCore) the image score, by name.
struct Scored {
  std::string score, distances;
};

// Builds the graph of one model; names are prefixed "anomaly." past the backbone.
class Builder {
 public:
  // batch: the images the backbone runs on at once (a tiling model's tiles, else 1),
  // from the graph's value `input`.
  Builder(const PatchCore::Impl& impl, bool fold, std::int64_t batch, std::string input)
      : g_(*impl.model, fold),
        net_(impl.model->network()),
        batch_(batch),
        input_(std::move(input)) {}

  OnnxGraph& graph() { return g_; }
  std::int64_t batch() const { return batch_; }
  const std::string& input() const { return input_; }

  // x (1, C, h, w) -> (1, C, H, W) by Resize: "nearest" as stoke's
  // resize_nearest (floor(y * in / out): asymmetric, floor) or "linear" as
  // resize_bilinear (align_corners false: half_pixel, clamped at 0).
  std::string resize(const std::string& x, Dims sizes, bool linear, const std::string& name) {
    const std::string s = g_.int64_initializer(name + ".sizes", {4}, sizes);
    if (linear) {
      return g_.node("Resize", {x, "", "", s}, name,
                     {string_attr("mode", "linear"),
                      string_attr("coordinate_transformation_mode", "half_pixel")});
    }
    return g_.node("Resize", {x, "", "", s}, name,
                   {string_attr("mode", "nearest"),
                    string_attr("coordinate_transformation_mode", "asymmetric"),
                    string_attr("nearest_mode", "floor")});
  }

  // (N, 1, H, W) -> stoke's gaussian_blur of each map: the normalized taps of
  // its kernel size, the border reflected without repeating the edge sample
  // (Pad "reflect", as stoke's reflect()), rows then columns; named `out`.
  std::string blur(const std::string& x, std::int64_t h, std::int64_t w, float sigma,
                   const std::string& out) {
    const int size = anomaly_detail::gaussian_kernel_size(sigma);
    const int half = size / 2;
    if (h <= half || w <= half) {
      throw Unsupported(std::string(kWhat) + ": an input of " + std::to_string(h) + "x" +
                        std::to_string(w) + " is smaller than the blur's half width " +
                        std::to_string(half) + " + 1 (sigma " + std::to_string(sigma) +
                        "): ONNX's reflect padding needs more");
    }
    std::vector<double> taps(static_cast<std::size_t>(size));
    double sum = 0.0;
    for (int i = 0; i < size; ++i) {
      const double t = i - half;
      taps[static_cast<std::size_t>(i)] = std::exp(-t * t / (2.0 * sigma * sigma));
      sum += taps[static_cast<std::size_t>(i)];
    }
    std::vector<float> k(taps.size());
    for (std::size_t i = 0; i < taps.size(); ++i) k[i] = static_cast<float>(taps[i] / sum);
    const std::string pads =
        g_.int64_initializer("anomaly.blur.pads", {8}, {0, 0, half, half, 0, 0, half, half});
    const std::string padded =
        g_.node("Pad", {x, pads}, "anomaly.blur.padded", {string_attr("mode", "reflect")});
    const std::string rows =
        g_.node("Conv", {padded, g_.initializer("anomaly.blur.row_taps", {1, 1, 1, size}, k)},
                "anomaly.blur.rows", {ints_attr("kernel_shape", {1, size})});
    return g_.node("Conv", {rows, g_.initializer("anomaly.blur.column_taps", {1, 1, size, 1}, k)},
                   out, {ints_attr("kernel_shape", {size, 1})});
  }

  // (N, C, h, w) -> rows (N * h * w, C), embed()'s order.
  std::string to_rows(const std::string& x, std::int64_t c, std::int64_t positions,
                      const std::string& name) {
    const std::string flat =
        g_.node("Reshape", {x, g_.int64_initializer(name + ".shape", {3}, {batch_, c, positions})},
                name + ".flat");
    const std::string t = g_.node("Transpose", {flat}, name + ".t", {ints_attr("perm", {0, 2, 1})});
    return g_.node("Reshape",
                   {t, g_.int64_initializer(name + ".rows_shape", {2}, {batch_ * positions, c})},
                   name);
  }

  std::string sum_squares(const std::string& x, const Dims& axes, bool keep,
                          const std::string& name) {
    return g_.node(
        "ReduceSum",
        {g_.node("Mul", {x, x}, name + ".sq"),
         g_.int64_initializer(name + ".axes", {static_cast<std::int64_t>(axes.size())}, axes)},
        name, {int_attr("keepdims", keep ? 1 : 0)});
  }

  // The backbone's output after top-level layers [first, end).
  std::string layers(std::size_t first, std::size_t end, const std::string& x) {
    return g_.layers(net_, first, end, x);
  }
  const nn::Sequential& net() const { return net_; }

 private:
  OnnxGraph g_;
  const nn::Sequential& net_;
  std::int64_t batch_;
  std::string input_;
};

// The distances of PatchCore's patches to the bank, the map and the score.
// The nearest bank row is found in the GEMM form and its distance measured
// again directly (stoke's refine); the support set of each bank row is a
// constant computed here with stoke's own search.
Scored patchcore(Builder& b, const PatchCore::Impl& impl, std::int64_t& grid_h,
                 std::int64_t& grid_w) {
  OnnxGraph& g = b.graph();
  const nn::Sequential& net = b.net();
  const std::size_t l2 = layer_index(net, "layer2"), l3 = layer_index(net, "layer3");
  const std::string f2 = b.layers(0, l2 + 1, b.input());
  const std::string f3 = b.layers(l3, l3 + 1, f2);
  const Shape s2 = shape_after(*impl.model, l2);
  const Shape s3 = shape_after(*impl.model, l3);
  const std::int64_t c2 = s2[1], h = s2[2], w = s2[3], c3 = s3[1];
  grid_h = h;
  grid_w = w;
  const auto pool = [&](const std::string& x, const std::string& name) {
    return g.node("AveragePool", {x}, name,
                  {ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {1, 1}),
                   ints_attr("pads", {1, 1, 1, 1}), int_attr("count_include_pad", 1)});
  };
  const std::string p2 = pool(f2, "anomaly.pool2");
  const std::int64_t n = b.batch();
  const std::string p3 = b.resize(pool(f3, "anomaly.pool3"), {n, c3, h, w}, true, "anomaly.up3");
  const std::string emb = g.node("Concat", {p2, p3}, "anomaly.embedding", {int_attr("axis", 1)});
  const std::int64_t width = c2 + c3, positions = h * w;
  const anomaly_detail::BankScorer& bank = *impl.bank;
  const std::int64_t rows = bank.rows();
  if (bank.width() != width) {
    throw InvalidArgument(std::string(kWhat) + ": the bank's rows are " +
                          std::to_string(bank.width()) + " wide, the backbone's embeddings " +
                          std::to_string(width));
  }
  const std::vector<float>& bv = bank.bank();
  // -2 B^T (width, rows) and |b|^2 (1, rows): stoke's GEMM form.
  std::vector<float> minus2_t(bv.size()), norms(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double n = 0.0;
    for (std::int64_t c = 0; c < width; ++c) {
      const float v = bv[static_cast<std::size_t>(r * width + c)];
      minus2_t[static_cast<std::size_t>(c * rows + r)] = -2.0f * v;
      n += static_cast<double>(v) * v;
    }
    norms[static_cast<std::size_t>(r)] = static_cast<float>(n);
  }
  const std::string x = b.to_rows(emb, width, positions, "anomaly.patches");
  const std::string bank_rows = g.initializer("anomaly.bank", {rows, width}, bv);
  const std::string cross =
      g.node("MatMul", {x, g.initializer("anomaly.bank_minus2_t", {width, rows}, minus2_t)},
             "anomaly.cross");
  const std::string d2 =
      g.node("Add",
             {g.node("Add", {cross, g.initializer("anomaly.bank_norms", {1, rows}, norms)},
                     "anomaly.cross_norms"),
              b.sum_squares(x, {1}, true, "anomaly.patch_norms")},
             "anomaly.squared_distances");
  // The first minimum, as stoke's search keeps the lower row on a tie.
  const std::string nearest =
      g.node("ArgMin", {d2}, "anomaly.nearest_row", {int_attr("axis", 1), int_attr("keepdims", 0)});
  const std::string nearest_rows =
      g.node("Gather", {bank_rows, nearest}, "anomaly.nearest_rows", {int_attr("axis", 0)});
  const std::string dist =
      g.node("Sqrt",
             {b.sum_squares(g.node("Sub", {x, nearest_rows}, "anomaly.nearest_diff"), {1}, false,
                            "anomaly.nearest_sq")},
             "anomaly.patch_distances");
  // Each image's score (image_score in patchcore.cpp): s* its largest patch
  // distance, (N, 1) throughout; the score output is the largest over the batch.
  const std::string dist_n =
      g.node("Reshape", {dist, g.int64_initializer("anomaly.batch_rows", {2}, {n, positions})},
             "anomaly.batch_distances");  // (N, P)
  const std::string worst = g.node("ArgMax", {dist_n}, "anomaly.worst_patch",
                                   {int_attr("axis", 1), int_attr("keepdims", 1)});  // (N, 1)
  const std::string s =
      g.node("GatherElements", {dist_n, worst}, "anomaly.max_distance", {int_attr("axis", 1)});
  const std::int64_t k = std::min<std::int64_t>(impl.options.num_neighbors, rows);
  std::string score = s;
  if (k > 1) {
    // Each bank row's k nearest bank rows, as image_score asks stoke's search for them.
    const anomaly_detail::BankSearch search(impl.model->backend(), bv, rows, width);
    const anomaly_detail::Neighbours support = search.nearest(bv, rows, k);
    const std::string table = g.int64_initializer("anomaly.support", {rows, k}, support.indices);
    const std::string nearest_n = g.node(
        "Reshape", {nearest, g.int64_initializer("anomaly.batch_rows_i", {2}, {n, positions})},
        "anomaly.batch_nearest");
    const std::string m = g.node("GatherElements", {nearest_n, worst}, "anomaly.worst_row",
                                 {int_attr("axis", 1)});                           // (N, 1)
    const std::string set = g.node("Gather", {table, m}, "anomaly.support_rows");  // (N, 1, k)
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) offsets[static_cast<std::size_t>(i)] = i * positions;
    const std::string flat_worst =
        g.node("Add", {worst, g.int64_initializer("anomaly.row_offsets", {n, 1}, offsets)},
               "anomaly.worst_flat");
    const std::string patch =
        g.node("Reshape",
               {g.node("Gather", {x, flat_worst}, "anomaly.worst_embedding"),
                g.int64_initializer("anomaly.worst_shape", {4}, {n, 1, 1, width})},
               "anomaly.worst_embedding_4d");  // (N, 1, 1, D)
    const std::string diff =
        g.node("Sub", {g.node("Gather", {bank_rows, set}, "anomaly.support_bank"), patch},
               "anomaly.support_diff");  // (N, 1, k, D)
    const std::string d = g.node("Sqrt", {b.sum_squares(diff, {3}, false, "anomaly.support_sq")},
                                 "anomaly.support_distances");  // (N, 1, k)
    const std::string soft =
        g.node("Softmax", {d}, "anomaly.support_softmax", {int_attr("axis", 2)});
    const std::string first = g.node("Gather", {soft, g.int64_initializer("anomaly.zero", {}, {0})},
                                     "anomaly.softmax_first", {int_attr("axis", 2)});  // (N, 1)
    const std::string weight =
        g.node("Sub", {g.initializer("anomaly.one", {1}, {1.0f}), first}, "anomaly.weight");
    score = g.node("Mul", {weight, s}, "anomaly.weighted_score");
  }
  score = g.node("ReduceMax", {score}, "anomaly.max_score", {int_attr("keepdims", 0)});
  score = g.node("Reshape", {score, g.int64_initializer("anomaly.score_shape", {1}, {1})},
                 "anomaly.score_1");
  return {score, dist};
}

// PaDiM's distances at layer1's grid.
std::string padim(Builder& b, const PatchCore::Impl& impl, std::int64_t& grid_h,
                  std::int64_t& grid_w) {
  OnnxGraph& g = b.graph();
  const nn::Sequential& net = b.net();
  const std::size_t l1 = layer_index(net, "layer1"), l2 = layer_index(net, "layer2"),
                    l3 = layer_index(net, "layer3");
  const std::string f1 = b.layers(0, l1 + 1, b.input());
  const std::string f2 = b.layers(l1 + 1, l2 + 1, f1);
  const std::string f3 = b.layers(l2 + 1, l3 + 1, f2);
  const Shape s1 = shape_after(*impl.model, l1), s2 = shape_after(*impl.model, l2),
              s3 = shape_after(*impl.model, l3);
  const std::int64_t h = s1[2], w = s1[3];
  grid_h = h;
  grid_w = w;
  const anomaly_detail::Gaussians& gs = impl.gaussians->gaussians();
  if (gs.grid_h != h || gs.grid_w != w ||
      gs.features != static_cast<std::int64_t>(impl.channels.size())) {
    throw InvalidArgument(std::string(kWhat) + ": PaDiM's Gaussians (" + std::to_string(gs.grid_h) +
                          "x" + std::to_string(gs.grid_w) + ", " + std::to_string(gs.features) +
                          " features) do not fit the backbone's " + std::to_string(h) + "x" +
                          std::to_string(w) + " grid");
  }
  const std::int64_t n = b.batch();
  const std::string u2 = b.resize(f2, {n, s2[1], h, w}, false, "anomaly.up2");
  const std::string u3 = b.resize(f3, {n, s3[1], h, w}, false, "anomaly.up3");
  const std::string all =
      g.node("Concat", {f1, u2, u3}, "anomaly.embedding", {int_attr("axis", 1)});
  const std::int64_t f = gs.features, positions = h * w;
  const std::string kept =
      g.node("Gather", {all, g.int64_initializer("anomaly.channels", {f}, impl.channels)},
             "anomaly.kept", {int_attr("axis", 1)});
  const std::string x = b.to_rows(kept, f, positions, "anomaly.patches");
  const std::string xn =
      g.node("Reshape", {x, g.int64_initializer("anomaly.batch_shape", {3}, {n, positions, f})},
             "anomaly.batch_patches");  // (N, P, F)
  const std::string diff =
      g.node("Reshape",
             {g.node("Sub", {xn, g.initializer("anomaly.mean", {positions, f}, gs.mean)},
                     "anomaly.centered"),
              g.int64_initializer("anomaly.row_shape", {4}, {n, positions, 1, f})},
             "anomaly.centered_rows");  // (N, P, 1, F)
  const std::string q = g.node("MatMul",
                               {diff, g.initializer("anomaly.inv_covariance", {positions, f, f},
                                                    anomaly_detail::full_inverse(gs))},
                               "anomaly.mahalanobis_left");
  const std::string sq = g.node("ReduceSum",
                                {g.node("Mul", {q, diff}, "anomaly.mahalanobis_terms"),
                                 g.int64_initializer("anomaly.mahalanobis_axes", {2}, {2, 3})},
                                "anomaly.mahalanobis_sq", {int_attr("keepdims", 0)});
  return g.node("Sqrt", {g.node("Relu", {sq}, "anomaly.mahalanobis_clamped")},
                "anomaly.patch_distances");
}

// A tiling model's tiles of options' image size (score_tiles' grid); none for
// a model without tiles. The tile must be the backbone's input size: stoke
// resizes a tile of another size from the decoded pixels with its resampler,
// which the graph does not reproduce.
std::optional<data_detail::TileGrid> tile_grid_of(const PatchCore::Impl& impl,
                                                  const AnomalyOnnxOptions& options) {
  const PatchCoreOptions& o = impl.options;
  const bool sized = options.image_width > 0 || options.image_height > 0;
  if (options.image_width < 0 || options.image_height < 0 ||
      (sized && (options.image_width == 0 || options.image_height == 0))) {
    throw InvalidArgument(
        std::string(kWhat) + ": image size " + std::to_string(options.image_width) + "x" +
        std::to_string(options.image_height) + " (--image-size WxH, both positive)");
  }
  if (o.tile == 0) {
    if (sized) {
      throw InvalidArgument(
          std::string(kWhat) + ": --image-size " + std::to_string(options.image_width) + "x" +
          std::to_string(options.image_height) + " is for a tiling model; this one takes its " +
          std::to_string(impl.preprocess.width) + "x" + std::to_string(impl.preprocess.height) +
          " input whole");
    }
    return std::nullopt;
  }
  if (!sized) {
    throw InvalidArgument(std::string(kWhat) + ": the model tiles its images (tile " +
                          std::to_string(o.tile) +
                          "): give the full image's size the graph takes (image_width and "
                          "image_height, --image-size WxH)");
  }
  if (o.tile != impl.preprocess.width || o.tile != impl.preprocess.height) {
    throw Unsupported(std::string(kWhat) + ": tile " + std::to_string(o.tile) +
                      " is not the model's input size " + std::to_string(impl.preprocess.width) +
                      "x" + std::to_string(impl.preprocess.height) +
                      ": stoke resizes each tile from the decoded pixels, which the graph does "
                      "not; export a model trained with --tile equal to --size");
  }
  const std::string name = "--image-size " + std::to_string(options.image_width) + "x" +
                           std::to_string(options.image_height);
  const int stride = o.tile_stride > 0 ? o.tile_stride : o.tile;
  data_detail::TileGrid grid =
      data_detail::tile_grid(options.image_width, options.image_height, o.tile, stride, name);
  if (grid.origins.size() > 4096) {
    throw Unsupported(std::string(kWhat) + ": " + name + " cuts " +
                      std::to_string(grid.origins.size()) + " tiles of " + std::to_string(o.tile) +
                      " (stride " + std::to_string(stride) +
                      "), more than the 4096 one graph takes");
  }
  return grid;
}

// The tile maps (T, 1, t, t) placed at their origins (Pad), summed and divided
// by each pixel's tile count: score_tiles' overlap average, named anomaly_map.
void stitch(OnnxGraph& g, const data_detail::TileGrid& grid, const std::string& maps,
            std::int64_t tile_h, std::int64_t tile_w) {
  const std::int64_t h = grid.image_height, w = grid.image_width;
  std::vector<float> covered(static_cast<std::size_t>(h * w), 0.0f);
  const std::string axis0 = g.int64_initializer("anomaly.stitch_axis", {1}, {0});
  std::vector<std::string> placed;
  for (std::size_t t = 0; t < grid.origins.size(); ++t) {
    const auto [ox, oy] = grid.origins[t];
    for (std::int64_t y = oy; y < oy + tile_h; ++y)
      for (std::int64_t x = ox; x < ox + tile_w; ++x)
        covered[static_cast<std::size_t>(y * w + x)] += 1.0f;
    const std::string name = "anomaly.stitch" + std::to_string(t);
    const auto i = static_cast<std::int64_t>(t);
    const std::string one = g.node("Slice",
                                   {maps, g.int64_initializer(name + ".start", {1}, {i}),
                                    g.int64_initializer(name + ".end", {1}, {i + 1}), axis0},
                                   name + ".map");
    placed.push_back(
        g.node("Pad",
               {one, g.int64_initializer(name + ".pads", {8},
                                         {0, 0, oy, ox, 0, 0, h - oy - tile_h, w - ox - tile_w})},
               name, {string_attr("mode", "constant")}));
  }
  const std::string sum =
      placed.size() == 1 ? placed.front() : g.node("Sum", placed, "anomaly.stitch_sum");
  g.node("Div", {sum, g.initializer("anomaly.tile_counts", {1, 1, h, w}, covered)}, "anomaly_map");
}

}  // namespace

std::string onnx_model_bytes(const PatchCore& model, const AnomalyOnnxOptions& options) {
  const PatchCore::Impl& impl = model.internals();
  const PatchCoreOptions& o = impl.options;
  const char* method = method_name(o.method);
  if (options.opset != 13) {
    throw InvalidArgument(std::string(kWhat) + ": opset " + std::to_string(options.opset) +
                          " (the anomaly graph is written in opset 13)");
  }
  if (!impl.scorer) throw InvalidArgument(std::string(kWhat) + ": the model has fitted nothing");
  const std::uint64_t constants =
      o.method == AnomalyMethod::kPadim
          ? floats_bytes(static_cast<std::size_t>(impl.gaussians->gaussians().positions() *
                                                  impl.gaussians->gaussians().features *
                                                  impl.gaussians->gaussians().features * 2))
          : floats_bytes(impl.bank->bank().size() * 3);
  if (constants > (std::uint64_t{2} << 30) - (std::uint64_t{256} << 20)) {
    throw Unsupported(std::string(kWhat) + ": the " + method + " model's constants need " +
                      std::to_string(constants >> 20) +
                      " MiB, past ONNX's 2 GiB protobuf limit; train with a smaller "
                      "coreset (--coreset) or fewer PaDiM features");
  }
  const nn::ModelSpec& spec = impl.model->spec();
  const std::int64_t height = impl.preprocess.height, width = impl.preprocess.width;
  const std::optional<data_detail::TileGrid> tiles = tile_grid_of(impl, options);
  const auto batch = static_cast<std::int64_t>(tiles ? tiles->origins.size() : 1);
  const std::int64_t image_h = tiles ? tiles->image_height : height,
                     image_w = tiles ? tiles->image_width : width;
  Builder b(impl, options.fold_batch_norm, batch, tiles ? "anomaly.tiles" : "input");
  OnnxGraph& g = b.graph();
  if (tiles) {  // the tiles cut from the image (Slice), one batch for the backbone
    const std::string axes = g.int64_initializer("anomaly.tile_axes", {2}, {2, 3});
    std::vector<std::string> cut;
    for (std::size_t t = 0; t < tiles->origins.size(); ++t) {
      const auto [ox, oy] = tiles->origins[t];
      const std::string name = "anomaly.tile" + std::to_string(t);
      cut.push_back(
          g.node("Slice",
                 {"input", g.int64_initializer(name + ".starts", {2}, {oy, ox}),
                  g.int64_initializer(name + ".ends", {2}, {oy + height, ox + width}), axes},
                 name));
    }
    g.node("Concat", cut, "anomaly.tiles", {int_attr("axis", 0)});
  }
  std::int64_t gh = 0, gw = 0;
  std::string score, dist;
  if (o.method == AnomalyMethod::kPadim) {
    dist = padim(b, impl, gh, gw);
  } else {
    const Scored scored = patchcore(b, impl, gh, gw);
    score = scored.score;
    dist = scored.distances;
  }
  const std::string grid =
      g.node("Reshape", {dist, g.int64_initializer("anomaly.grid_shape", {4}, {batch, 1, gh, gw})},
             "anomaly.distance_map");
  const bool padim_method = o.method == AnomalyMethod::kPadim;
  const std::string full =
      b.resize(grid, {batch, 1, height, width}, padim_method, "anomaly.map_resized");
  const std::string map =
      b.blur(full, height, width, o.sigma, tiles ? "anomaly.tile_maps" : "anomaly_map");
  if (padim_method) {  // the map's maximum (of every tile's map: the largest tile score)
    score = g.node("ReduceMax", {map}, "anomaly.map_max", {int_attr("keepdims", 0)});
    score = g.node("Reshape", {score, g.int64_initializer("anomaly.score_shape", {1}, {1})},
                   "anomaly.score_1");
  }
  if (tiles) stitch(g, *tiles, map, height, width);
  g.node("Identity", {score}, "score");
  std::vector<std::pair<std::string, std::string>> meta = {
      {"stoke.architecture", nn::architecture_name(spec.architecture)},
      {"anomaly.method", method},
      {"anomaly.threshold", float_text(impl.threshold)},
      {"anomaly.pixel_threshold", float_text(model.pixel_threshold())},
      {"anomaly.score_min", float_text(impl.score_min)},
      {"anomaly.score_max", float_text(impl.score_max)},
      {"anomaly.sigma", float_text(o.sigma)}};
  if (tiles) {
    meta.emplace_back("anomaly.tile", std::to_string(o.tile));
    meta.emplace_back("anomaly.tile_stride", std::to_string(o.tile_stride));
    meta.emplace_back("anomaly.image_size",
                      std::to_string(image_w) + "x" + std::to_string(image_h));
  }
  meta.insert(meta.end(), options.metadata.begin(), options.metadata.end());
  return g.model_bytes(
      std::string("stoke_anomaly_") + method, {{"input", {1, spec.in_channels, image_h, image_w}}},
      {{"score", {1}}, {"anomaly_map", {1, 1, image_h, image_w}}}, options.opset, meta);
}

void export_onnx(const PatchCore& model, const std::string& path,
                 const AnomalyOnnxOptions& options) {
  stoke::detail::write_file_atomically(path, onnx_model_bytes(model, options));
}

}  // namespace stoke::anomaly
