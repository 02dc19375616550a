// Image pipeline benchmarks on the synthetic 2448x2048 inspection images
// (JPEG quality 90), side by side with their references in one binary:
//   fused resize + normalize + CHW (stoke, every SIMD level) vs OpenCV's three
//   passes (cv::resize, convertTo, split), INTER_LINEAR and INTER_AREA;
//   JPEG file -> 3x512x512 float (stoke) vs OpenCV imread + INTER_AREA + convert
//   vs the bare libjpeg-turbo decode at the same DCT scale;
//   the Loader cold (no cache) and warm (RAM cache), threads 1..N.
// After the runs it prints the ratios the issue asks for.
//   STOKE_BENCH_DATA: folder for the generated images (default build/bench_data)
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/image.hpp"
#include "stoke/threads.hpp"

#if STOKE_BENCH_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace {
namespace fs = std::filesystem;
using namespace stoke;

constexpr int kSrcW = 2448, kSrcH = 2048, kOut = 512;
constexpr std::size_t kImages = 16;

fs::path data_root() {
  const char* env = std::getenv("STOKE_BENCH_DATA");
  return env ? fs::path(env) : fs::path(STOKE_BENCH_BINARY_DIR) / "bench_data";
}

// The bench images, generated once (kept between runs).
const Dataset& dataset() {
  static const Dataset d = [] {
    const fs::path root = data_root() / "inspection_2448x2048_q90";
    std::size_t have = 0;
    for (const char* cls : {"ok", "defect"}) {
      if (fs::exists(root / cls)) {
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(root / cls)) ++have;
      }
    }
    if (have != kImages) {
      fs::remove_all(root);
      write_synthetic_dataset(root, kImages, SyntheticOptions{});
    }
    return Dataset::from_folder(root);
  }();
  return d;
}

const std::vector<std::uint8_t>& jpeg_bytes(std::size_t i) {
  static const std::vector<std::vector<std::uint8_t>> all = [] {
    std::vector<std::vector<std::uint8_t>> v(dataset().size());
    for (std::size_t k = 0; k < v.size(); ++k) read_file(dataset().path(k), v[k]);
    return v;
  }();
  return all[i % all.size()];
}

const Image& source_image() {
  static const Image img = [] {
    Image out;
    Decoder().decode(jpeg_bytes(0), "bench", {}, out);
    return out;
  }();
  return img;
}

Normalization imagenet() {
  const float mean[] = {0.485f, 0.456f, 0.406f}, stdev[] = {0.229f, 0.224f, 0.225f};
  return Normalization::mean_std(mean, stdev);
}

void set_images(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * kSrcW * kSrcH * 3);
}

void fused_stoke(benchmark::State& state, SimdLevel level, ResizeFilter filter, OutputDtype dtype) {
  const Image& src = source_image();
  Resampler resampler(level);
  std::vector<float> out(3 * kOut * kOut);
  const Normalization norm = imagenet();
  for (auto _ : state) {
    resampler.resize_normalize_chw(src.view(), kOut, kOut, filter, norm, dtype, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_images(state);
}

// The same image widened to 16 bits (v = u * 257): the float path.
void fused_stoke16(benchmark::State& state, ResizeFilter filter) {
  static const Image src = [] {
    Image wide;
    convert_depth(source_image().view(), 16, wide);
    return wide;
  }();
  Resampler resampler(query_cpu().simd);
  std::vector<float> out(3 * kOut * kOut);
  const Normalization norm = imagenet();
  for (auto _ : state) {
    resampler.resize_normalize_chw(src.view(), kOut, kOut, filter, norm, OutputDtype::kFloat32,
                                   out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_images(state);
}

void jpeg_to_tensor_stoke(benchmark::State& state) {
  Decoder decoder;
  Resampler resampler(default_simd_level());
  Image decoded;
  std::vector<std::uint8_t> bytes;
  std::vector<float> out(3 * kOut * kOut);
  const Normalization norm = imagenet();
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    decoder.decode_file(dataset().path(i++ % dataset().size()), {3, kOut, kOut}, decoded);
    resampler.resize_normalize_chw(decoded.view(), kOut, kOut, ResizeFilter::kAuto, norm,
                                   OutputDtype::kFloat32, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_images(state);
}

// The floor: libjpeg-turbo alone at the DCT scale stoke picks (1/4 here).
void bare_turbojpeg(benchmark::State& state) {
  tjhandle tj = tjInitDecompress();
  const int n = jpeg_scale_eighths(kSrcW, kSrcH, kOut, kOut);
  const int w = (kSrcW * n + 7) / 8, h = (kSrcH * n + 7) / 8;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(w) * h * 3);
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    const auto& bytes = jpeg_bytes(i++);
    if (tjDecompress2(tj, bytes.data(), bytes.size(), out.data(), w, w * 3, h, TJPF_RGB, 0) != 0) {
      state.SkipWithError(tjGetErrorStr2(tj));
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  tjDestroy(tj);
  set_images(state);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void loader_pass(benchmark::State& state, bool warm) {
  const int threads = static_cast<int>(state.range(0));
  set_thread_count(threads);
  LoaderOptions o;
  o.preprocess.width = o.preprocess.height = kOut;
  o.preprocess.normalization = imagenet();
  o.batch_size = 8;
  o.shuffle = true;
  CacheSpec cache;
  if (warm) cache.kind = CacheSpec::Kind::kRam;
  o.cache = cache;
  Loader loader(dataset(), o);
  std::vector<std::byte> images(loader.batch_size() * loader.sample_bytes());
  std::vector<std::int32_t> labels(loader.batch_size());
  std::uint64_t epoch = 0;
  if (warm) {
    for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b)
      loader.fill_batch(epoch, b, images, labels);
    ++epoch;
  }
  std::size_t done = 0;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b)
      done += loader.fill_batch(epoch, b, images, labels);
    ++epoch;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(done));
  state.counters["threads"] = threads;
  state.counters["worker_threads"] = static_cast<double>(loader.stats().worker_threads);
  // CPU per image over all threads: on a shared machine the wall-clock
  // scaling is not measurable, but the parallel overhead is.
  state.counters["cpu_ms_per_image"] =
      1e3 * (process_cpu_seconds() - cpu0) / static_cast<double>(done);
}

#if STOKE_BENCH_HAVE_OPENCV
void opencv_three_passes(const cv::Mat& src, int interpolation, cv::Mat& resized, cv::Mat& as_float,
                         std::vector<cv::Mat>& planes, float* out) {
  cv::resize(src, resized, cv::Size(kOut, kOut), 0, 0, interpolation);
  resized.convertTo(as_float, CV_32FC3, 1.0 / 255.0);
  planes.clear();
  for (int c = 0; c < 3; ++c) planes.emplace_back(kOut, kOut, CV_32F, out + c * kOut * kOut);
  cv::split(as_float, planes);  // writes into the CHW planes
  const float mean[] = {0.485f, 0.456f, 0.406f}, stdev[] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c)
    planes[c].convertTo(planes[c], CV_32F, 1.0 / stdev[c], -mean[c] / stdev[c]);
}

void fused_opencv(benchmark::State& state, int interpolation) {
  cv::setNumThreads(1);  // one image per thread, like stoke; parallelism comes from ->Threads
  const Image& img = source_image();
  const cv::Mat src(kSrcH, kSrcW, CV_8UC3, const_cast<std::uint8_t*>(img.data()));
  cv::Mat resized, as_float;
  std::vector<cv::Mat> planes;
  std::vector<float> out(3 * kOut * kOut);
  for (auto _ : state) {
    opencv_three_passes(src, interpolation, resized, as_float, planes, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_images(state);
}

void jpeg_to_tensor_opencv(benchmark::State& state) {
  cv::setNumThreads(1);
  cv::Mat resized, as_float;
  std::vector<cv::Mat> planes;
  std::vector<float> out(3 * kOut * kOut);
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    const cv::Mat bgr = cv::imread(dataset().path(i++ % dataset().size()), cv::IMREAD_COLOR);
    opencv_three_passes(bgr, cv::INTER_AREA, resized, as_float, planes, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_images(state);
}
#endif

// Collects items/s per benchmark name for the ratio table.
class RateReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> rates;
  std::map<std::string, double> cpu_per_image;
  void ReportRuns(const std::vector<Run>& runs) override {
    // With --benchmark_repetitions the median (reported after the
    // repetitions) replaces the single-run value.
    for (const auto& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type != Run::RT_Iteration && !median) continue;
      const std::string name = run.run_name.str();
      const auto it = run.counters.find("items_per_second");
      if (it != run.counters.end()) rates[name] = it->second;
      const auto cpu = run.counters.find("cpu_ms_per_image");
      if (cpu != run.counters.end()) cpu_per_image[name] = cpu->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double get(const std::string& prefix) const {
    for (const auto& [name, rate] : rates) {
      if (name.rfind(prefix, 0) == 0) return rate;
    }
    return 0;
  }
};

void ratio(const RateReporter& r, const char* what, const std::string& a, const std::string& b,
           double target) {
  const double x = r.get(a), y = r.get(b);
  if (x <= 0 || y <= 0) return;
  std::printf("%-58s %9.1f / %9.1f img/s = %5.2fx  (target >= %.2fx)\n", what, x, y, x / y, target);
}

// One thread: process CPU time, which the other jobs on a shared machine do
// not inflate; several: wall time (the point is throughput).
void timing(benchmark::internal::Benchmark* b, int threads) {
  b->Threads(threads);
  if (threads == 1)
    b->MeasureProcessCPUTime();
  else
    b->UseRealTime();
}

std::string suffix(int threads) {
  return (threads == 1 ? "/process_time/threads:1" : "/real_time/threads:") +
         (threads == 1 ? std::string() : std::to_string(threads));
}

}  // namespace

int main(int argc, char** argv) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  const std::string shape = "/f32/2448x2048x3->3x512x512";
  const SimdLevel best = query_cpu().simd;
  for (int t : thread_counts) {
    for (auto [filter, fname] :
         {std::pair{ResizeFilter::kBilinear, "linear"}, {ResizeFilter::kArea, "area"}}) {
      for (int l = 0; l <= static_cast<int>(best); ++l) {
        const auto level = static_cast<SimdLevel>(l);
        if (t > 1 && level != best) continue;
        timing(benchmark::RegisterBenchmark(("BM_ResizeNormalize/stoke-" +
                                             std::string(to_string(level)) + shape + "/" + fname)
                                                .c_str(),
                                            fused_stoke, level, filter, OutputDtype::kFloat32),
               t);
      }
      if (t == 1) {
        for (OutputDtype dtype : {OutputDtype::kFloat16, OutputDtype::kBFloat16}) {
          const std::string name = "BM_ResizeNormalize/stoke-" + std::string(to_string(best)) +
                                   "/" + to_string(dtype) + "/2448x2048x3->3x512x512/" + fname;
          timing(benchmark::RegisterBenchmark(name.c_str(), fused_stoke, best, filter, dtype), t);
        }
        timing(benchmark::RegisterBenchmark(
                   ("BM_ResizeNormalize/stoke-16bit" + shape + "/" + fname).c_str(), fused_stoke16,
                   filter),
               t);
      }
#if STOKE_BENCH_HAVE_OPENCV
      timing(benchmark::RegisterBenchmark(
                 ("BM_ResizeNormalize/opencv" + shape + "/" + fname).c_str(), fused_opencv,
                 filter == ResizeFilter::kBilinear ? cv::INTER_LINEAR : cv::INTER_AREA),
             t);
#endif
    }
    timing(benchmark::RegisterBenchmark("BM_JpegToTensor/stoke/f32/2448x2048q90->3x512x512",
                                        jpeg_to_tensor_stoke),
           t);
#if STOKE_BENCH_HAVE_OPENCV
    timing(benchmark::RegisterBenchmark("BM_JpegToTensor/opencv/f32/2448x2048q90->3x512x512",
                                        jpeg_to_tensor_opencv),
           t);
#endif
    timing(
        benchmark::RegisterBenchmark("BM_JpegDecode/turbojpeg/u8/2448x2048q90@1/4", bare_turbojpeg),
        t);
  }
  for (bool warm : {false, true}) {
    auto* b = benchmark::RegisterBenchmark(
        warm ? "BM_Loader/stoke/f32/warm-ram-cache/2448x2048->3x512x512"
             : "BM_Loader/stoke/f32/cold/2448x2048->3x512x512",
        loader_pass, warm);
    for (int t = 1; t <= all; ++t) b->Arg(t);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  dataset();  // generate before timing
  RateReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  std::printf("\nRatios (higher is better for stoke):\n");
  const std::string s = "BM_ResizeNormalize/stoke-" + std::string(to_string(best)) + shape;
  for (int t : thread_counts) {
    const std::string tag = "/threads:" + std::to_string(t), sx = suffix(t);
    ratio(reporter, ("fused linear vs OpenCV INTER_LINEAR" + tag).c_str(), s + "/linear" + sx,
          "BM_ResizeNormalize/opencv" + shape + "/linear" + sx, 1.5);
    ratio(reporter, ("fused area vs OpenCV INTER_AREA" + tag).c_str(), s + "/area" + sx,
          "BM_ResizeNormalize/opencv" + shape + "/area" + sx, 4.0);
    ratio(reporter, ("JPEG->tensor vs OpenCV imread+AREA+convert" + tag).c_str(),
          "BM_JpegToTensor/stoke/f32/2448x2048q90->3x512x512" + sx,
          "BM_JpegToTensor/opencv/f32/2448x2048q90->3x512x512" + sx, 2.5);
    ratio(reporter, ("JPEG->tensor vs bare turbojpeg decode @1/4" + tag).c_str(),
          "BM_JpegToTensor/stoke/f32/2448x2048q90->3x512x512" + sx,
          "BM_JpegDecode/turbojpeg/u8/2448x2048q90@1/4" + sx, 0.9);
  }
  for (const char* f : {"linear", "area"}) {  // no target: 16-bit samples take the float path
    ratio(reporter, (std::string("fused 16-bit vs 8-bit ") + f + "/threads:1").c_str(),
          "BM_ResizeNormalize/stoke-16bit" + shape + "/" + f + suffix(1), s + "/" + f + suffix(1),
          0.0);
  }
  const std::string cold = "BM_Loader/stoke/f32/cold/2448x2048->3x512x512/",
                    warm = "BM_Loader/stoke/f32/warm-ram-cache/2448x2048->3x512x512/";
  for (int t = 1; t <= all; ++t) {
    ratio(reporter, ("loader warm vs cold, threads " + std::to_string(t)).c_str(),
          warm + std::to_string(t), cold + std::to_string(t), 20.0);
  }
  const double c1 = reporter.get(cold + "1/"), cn = reporter.get(cold + std::to_string(all) + "/");
  if (c1 > 0 && cn > 0) {
    std::printf("loader cold scaling 1 -> %d threads: %.1f -> %.1f img/s wall, efficiency %.0f%%\n",
                all, c1, cn, 100.0 * cn / (all * c1));
    const double p1 = reporter.cpu_per_image[cold + "1/real_time"];
    const double pn = reporter.cpu_per_image[cold + std::to_string(all) + "/real_time"];
    if (p1 > 0 && pn > 0) {
      std::printf(
          "loader cold CPU per image 1 -> %d threads: %.2f -> %.2f ms (parallel overhead "
          "%+.1f%%)\n",
          all, p1, pn, 100.0 * (pn / p1 - 1.0));
    }
  }
  benchmark::Shutdown();
  return 0;
}
