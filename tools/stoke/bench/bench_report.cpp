#include "bench/bench_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/text.hpp"

namespace stoke::bench {

RunFigures summarize(const TrainLog& log, const MemoryStats& memory, const CpuInfo& cpu) {
  RunFigures f;
  double seconds = 0, images = 0;
  for (const auto& e : log.epochs) {
    seconds += e.seconds;
    images += static_cast<double>(e.images);
    f.device_busy += e.profile.device_busy_share();
    f.cpu_utilization += e.profile.cpu_utilization();
    f.data_wait += e.profile.share(Stage::kDataWait);
  }
  const double n = std::max<std::size_t>(1, log.epochs.size());
  f.epoch_seconds = seconds / n;
  f.images_per_second = seconds > 0 ? images / seconds : 0;
  f.device_busy /= n;
  f.cpu_utilization /= n;
  f.data_wait /= n;
  if (!log.epochs.empty()) {
    f.last_epoch_images_per_second = log.epochs.back().images_per_second;
    f.last_profile = log.epochs.back().profile;
  }
  f.memory_in_use = memory.in_use_bytes;
  f.memory_peak = memory.peak_bytes;
  (void)cpu;
  return f;
}

namespace {

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

}  // namespace

std::string to_text(const Report& r) {
  std::ostringstream out;
  char line[256];
  out << "\n" << r.tune.table() << "\n";
  std::snprintf(line, sizeof line, "%-9s %6s %10s %10s %9s %9s %10s %10s %9s %8s\n", "run", "batch",
                "epoch s", "images/s", "device %", "CPU %", "mem in use", "mem peak", "wait %",
                "speedup");
  out << line;
  for (const auto* run : {&r.baseline, &r.tuned}) {
    const bool is_baseline = run == &r.baseline;
    std::snprintf(
        line, sizeof line, "%-9s %6d %10.2f %10.1f %8.1f%% %8.1f%% %10s %10s %8.1f%% %7.2fx\n",
        is_baseline ? "baseline" : "tuned", run->batch_size, run->epoch_seconds,
        run->images_per_second, 100 * run->device_busy, 100 * run->cpu_utilization,
        format_bytes(run->memory_in_use).c_str(), format_bytes(run->memory_peak).c_str(),
        100 * run->data_wait, ratio(run->images_per_second, r.baseline.images_per_second));
    out << line;
  }
  const double bound = std::min(r.pipeline_only, r.compute_only);
  std::snprintf(line, sizeof line,
                "\nend to end (tuned, last epoch) %.1f images/s = %.2f x min(pipeline only %.1f, "
                "compute only "
                "%.1f)\n",
                r.tuned.last_epoch_images_per_second,
                ratio(r.tuned.last_epoch_images_per_second, bound), r.pipeline_only,
                r.compute_only);
  out << line;
  out << "tuned settings written to " << r.config_file
      << " (use: export STOKE_CONFIG=" << r.config_file << ")\n\nadvisor, on the baseline run:\n"
      << format_advice(r.advice);
  return out.str();
}

std::string to_json(const Report& r) {
  using detail::json_quote;
  std::ostringstream out;
  out.precision(6);
  auto run = [&](const RunFigures& f) {
    out << "{\"batch_size\":" << f.batch_size << ",\"epoch_seconds\":" << f.epoch_seconds
        << ",\"images_per_second\":" << f.images_per_second
        << ",\"last_epoch_images_per_second\":" << f.last_epoch_images_per_second
        << ",\"device_busy\":" << f.device_busy << ",\"cpu_utilization\":" << f.cpu_utilization
        << ",\"data_wait\":" << f.data_wait << ",\"memory_in_use\":" << f.memory_in_use
        << ",\"memory_peak\":" << f.memory_peak
        << ",\"profile\":" << profile_to_json(f.last_profile) << "}";
  };
  out << "{\"dataset\":" << json_quote(r.dataset) << ",\"images\":" << r.images
      << ",\"input_size\":" << r.input_size << ",\"baseline\":";
  run(r.baseline);
  out << ",\"tuned\":";
  run(r.tuned);
  out << ",\"speedup\":" << ratio(r.tuned.images_per_second, r.baseline.images_per_second)
      << ",\"pipeline_only\":" << r.pipeline_only << ",\"compute_only\":" << r.compute_only
      << ",\"end_to_end_over_bound\":"
      << ratio(r.tuned.last_epoch_images_per_second, std::min(r.pipeline_only, r.compute_only))
      << ",\"tune\":{\"best\":{\"batch_size\":" << r.tune.best.batch_size
      << ",\"cpu_threads\":" << r.tune.best.cpu_threads
      << ",\"cache\":" << (r.tune.best.cache ? "true" : "false")
      << ",\"prefetch_depth\":" << r.tune.best.prefetch_depth
      << "},\"images_per_second\":" << r.tune.best_images_per_second << ",\"trials\":[";
  for (std::size_t i = 0; i < r.tune.trials.size(); ++i) {
    const auto& t = r.tune.trials[i];
    out << (i ? "," : "") << "{\"label\":" << json_quote(t.settings.label)
        << ",\"batch_size\":" << t.settings.batch_size
        << ",\"cpu_threads\":" << t.settings.cpu_threads
        << ",\"cache\":" << (t.settings.cache ? "true" : "false")
        << ",\"prefetch_depth\":" << t.settings.prefetch_depth
        << ",\"images_per_second\":" << t.images_per_second
        << ",\"failed\":" << (t.failed ? "true" : "false") << ",\"error\":" << json_quote(t.error)
        << "}";
  }
  out << "]},\"advice\":[";
  for (std::size_t i = 0; i < r.advice.size(); ++i) {
    const auto& a = r.advice[i];
    out << (i ? "," : "") << "{\"rule\":" << json_quote(a.rule)
        << ",\"diagnosis\":" << json_quote(a.diagnosis) << ",\"exports\":[";
    for (std::size_t j = 0; j < a.exports.size(); ++j)
      out << (j ? "," : "") << json_quote(a.exports[j]);
    out << "],\"changes\":[";
    for (std::size_t j = 0; j < a.changes.size(); ++j)
      out << (j ? "," : "") << json_quote(a.changes[j]);
    out << "]}";
  }
  out << "],\"config_file\":" << json_quote(r.config_file) << "}";
  return out.str();
}

}  // namespace stoke::bench
