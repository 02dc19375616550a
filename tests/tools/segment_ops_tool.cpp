// segment_ops_tool DIR: runs the segmentation ops on the CPU backend for the
// cases of DIR/cases.txt (written by tests/segment/parity.py) and writes each
// case's outputs beside its inputs, raw little-endian float32 / int32.
//
// cases.txt, one case a line:
//   upsample NAME MODE N C H W OH OW          reads NAME.x, writes NAME.y, NAME.dx (from NAME.dy)
//   losses NAME N K H W IGNORE SMOOTH WEIGHTED reads NAME.logits, NAME.labels
//                                              [NAME.weights], writes NAME.ce (2 floats),
//                                              NAME.dce, NAME.dice (1), NAME.ddice
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace {

using stoke::Shape;
using stoke::Tensor;

template <class T>
std::vector<T> read_raw(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> v(count);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in)
    throw std::runtime_error("cannot read " + std::to_string(count) + " values from " + path);
  return v;
}

void write_raw(const std::string& path, const Tensor& t) {
  const auto v = t.to_vector();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

Tensor upload(stoke::Backend& be, const Shape& shape, const std::vector<float>& v) {
  Tensor t(be, shape);
  t.copy_from_host(v.data());
  return t;
}

void upsample(stoke::Backend& be, const std::string& dir, std::istringstream& line) {
  std::string name, mode;
  std::int64_t n, c, h, w, oh, ow;
  line >> name >> mode >> n >> c >> h >> w >> oh >> ow;
  const auto m = mode == "nearest" ? stoke::UpsampleMode::kNearest : stoke::UpsampleMode::kBilinear;
  const std::string base = dir + "/" + name;
  Tensor x = upload(be, {n, c, h, w}, read_raw<float>(base + ".x", n * c * h * w));
  Tensor dy = upload(be, {n, c, oh, ow}, read_raw<float>(base + ".dy", n * c * oh * ow));
  Tensor y(be, {n, c, oh, ow}), dx(be, {n, c, h, w});
  be.upsample2d_forward(x, y, m);
  be.upsample2d_backward(dy, dx, m);
  write_raw(base + ".y", y);
  write_raw(base + ".dx", dx);
}

void losses(stoke::Backend& be, const std::string& dir, std::istringstream& line) {
  std::string name;
  std::int64_t n, k, h, w;
  int weighted = 0;
  stoke::PixelLossParams p;
  line >> name >> n >> k >> h >> w >> p.ignore_label >> p.smooth >> weighted;
  const std::string base = dir + "/" + name;
  const Shape s = {n, k, h, w};
  Tensor logits = upload(be, s, read_raw<float>(base + ".logits", n * k * h * w));
  const auto lv = read_raw<std::int32_t>(base + ".labels", n * h * w);
  Tensor labels(be, {n, h, w}, stoke::DType::kInt32);
  labels.copy_from_host(lv.data());
  Tensor weights = weighted ? upload(be, {k}, read_raw<float>(base + ".weights", k)) : Tensor();
  Tensor probs(be, s), ce(be, {2}), dce(be, s), sums(be, {k, 3}), dice(be, {1}), ddice(be, s);
  be.pixel_cross_entropy_forward(logits, labels, weights, probs, ce, p);
  be.pixel_cross_entropy_backward(probs, labels, weights, ce, dce, p);
  be.dice_loss_forward(logits, labels, probs, sums, dice, p);
  be.dice_loss_backward(probs, labels, sums, ddice, p);
  write_raw(base + ".ce", ce);
  write_raw(base + ".dce", dce);
  write_raw(base + ".dice", dice);
  write_raw(base + ".ddice", ddice);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: segment_ops_tool DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::ifstream cases(dir + "/cases.txt");
  if (!cases) throw std::runtime_error("no " + dir + "/cases.txt");
  stoke::Backend& be = stoke::cpu_backend();
  std::string text;
  int count = 0;
  while (std::getline(cases, text)) {
    std::istringstream line(text);
    std::string kind;
    if (!(line >> kind)) continue;
    if (kind == "upsample") {
      upsample(be, dir, line);
    } else if (kind == "losses") {
      losses(be, dir, line);
    } else {
      throw std::runtime_error("unknown case kind '" + kind + "'");
    }
    ++count;
  }
  std::cout << count << " cases\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "segment_ops_tool: " << e.what() << "\n";
  return 1;
}
