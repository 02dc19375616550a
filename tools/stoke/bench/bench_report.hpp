// The figures of stoke-bench's runs and the table and JSON it prints.
#pragma once

#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/tune.hpp"

namespace stoke::bench {

struct RunFigures {
  int batch_size = 0;
  double epoch_seconds = 0;      // mean over the epochs
  double images_per_second = 0;  // all images over all epochs' wall time
  double last_epoch_images_per_second = 0;
  double device_busy = 0;           // mean share of wall time
  double cpu_utilization = 0;       // mean share of all logical cores
  double data_wait = 0;             // mean share of wall time
  std::uint64_t memory_in_use = 0;  // backend, after the run
  std::uint64_t memory_peak = 0;
  ProfileSummary last_profile;
};

RunFigures summarize(const TrainLog& log, const MemoryStats& memory, const CpuInfo& cpu);

struct Report {
  RunFigures baseline, tuned;
  double pipeline_only = 0;  // images/s of the tuned loader alone (warm epoch)
  double compute_only = 0;   // images/s of tuned train steps on a batch in memory
  TuneResult tune;
  std::vector<Advice> advice;  // for the baseline
  int input_size = 0;
  std::size_t images = 0;
  std::string dataset;
  std::string config_file;
};

std::string to_text(const Report& report);
std::string to_json(const Report& report);

}  // namespace stoke::bench
