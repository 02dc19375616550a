// The arithmetic ceiling of each precision on this CPU: the throughput of the
// one instruction every convolution kernel of that precision is built on, on
// one core, with enough independent accumulators that latency does not count.
//   fp32  vfmadd231ps      (zmm with AVX-512, else ymm with FMA)
//   bf16  vdpbf16ps zmm    (AVX512-BF16: two bf16 products per fp32 lane)
//   int8  vpdpbusd         (zmm with AVX512-VNNI, else ymm with AVX-VNNI)
// A precision whose peak is not above fp32's cannot make a compute-bound
// convolution faster, whatever the kernel (issue 28's bf16 target on an Intel
// Xeon with AVX512-BF16 and no AMX: bench/RESULTS.md). Skips, naming why, each
// instruction the CPU lacks. Prints one JSON object.
//
//   stoke_bench_isa_peak [--instructions N] [--max-isa avx2]
// (default 2e8 instructions per measure, 3 rounds; --max-isa avx2 measures the
// ymm forms a CPU without AVX-512 runs, as ONEDNN_MAX_CPU_ISA=AVX2 would.)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Each kernel runs about `instructions` of its instruction, 12 independent
// accumulators per loop trip (above latency x ports on every CPU here), in
// assembly: the intrinsics' non-destructive form made the compiler add a
// register copy before each one, which halved the measure. The operands'
// values do not matter to the throughput; they start as whatever the
// registers hold.
#define STOKE_TWELVE(op, reg, a, b)                                                           \
  op " %%" b ", %%" a ", %%" reg "0\n\t" op " %%" b ", %%" a ", %%" reg "1\n\t" op " %%" b    \
     ", %%" a ", %%" reg "2\n\t" op " %%" b ", %%" a ", %%" reg "3\n\t" op " %%" b ", %%" a   \
     ", %%" reg "4\n\t" op " %%" b ", %%" a ", %%" reg "5\n\t" op " %%" b ", %%" a ", %%" reg \
     "6\n\t" op " %%" b ", %%" a ", %%" reg "7\n\t" op " %%" b ", %%" a ", %%" reg "8\n\t" op \
     " %%" b ", %%" a ", %%" reg "9\n\t" op " %%" b ", %%" a ", %%" reg "10\n\t" op " %%" b   \
     ", %%" a ", %%" reg "11\n\t"

// `op` on accumulators reg0-reg11 from the operands a and b (zmm30, zmm31; the
// VEX forms reach ymm0-15 only: ymm14, ymm15).
#define STOKE_LOOP(op, reg, a, b)                                                              \
  for (long i = 0; i < instructions / 12; ++i) {                                               \
    asm volatile(STOKE_TWELVE(op, reg, a, b)::                                                 \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                       "xmm9", "xmm10", "xmm11");                                              \
  }
#define STOKE_ZMM_LOOP(op) STOKE_LOOP(op, "zmm", "zmm30", "zmm31")
#define STOKE_YMM_LOOP(op) STOKE_LOOP(op, "ymm", "ymm14", "ymm15")

__attribute__((target("avx512f"))) void fma_zmm(long instructions) {
  STOKE_ZMM_LOOP("vfmadd231ps")
}
__attribute__((target("avx512f,avx512bf16"))) void dpbf16_zmm(long instructions) {
  STOKE_ZMM_LOOP("vdpbf16ps")
}
__attribute__((target("avx512f,avx512vnni"))) void dpbusd_zmm(long instructions) {
  STOKE_ZMM_LOOP("vpdpbusd")
}
__attribute__((target("avx2,fma"))) void fma_ymm(long instructions) {
  STOKE_YMM_LOOP("vfmadd231ps")
}
__attribute__((target("avx2,avxvnni"))) void dpbusd_ymm(long instructions) {
  STOKE_YMM_LOOP("%{vex%} vpdpbusd")
}

struct Peak {
  const char* name = "";
  const char* instruction = "";
  double ops_per_instruction = 0;  // multiplies and adds, one each
  void (*kernel)(long) = nullptr;
  const char* missing = nullptr;  // why it is skipped here, or null
  double best_gops = 0;
};

}  // namespace

int main(int argc, char** argv) {
  long instructions = 200'000'000;
  bool capped_at_avx2 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--instructions") == 0 && i + 1 < argc) {
      instructions = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--max-isa") == 0 && i + 1 < argc &&
               std::strcmp(argv[i + 1], "avx2") == 0) {
      capped_at_avx2 = true;
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--instructions N] [--max-isa avx2]\n", argv[0]);
      return 2;
    }
  }
  if (instructions < 12) {
    std::fprintf(stderr, "--instructions must be at least 12\n");
    return 2;
  }
  __builtin_cpu_init();
  const bool avx512 = !capped_at_avx2 && __builtin_cpu_supports("avx512f");
  std::vector<Peak> peaks;
  if (avx512) {
    peaks.push_back({"fp32", "vfmadd231ps zmm", 32, fma_zmm});
  } else {
    peaks.push_back({"fp32", "vfmadd231ps ymm", 16, fma_ymm,
                     __builtin_cpu_supports("fma") ? nullptr : "the CPU has no FMA"});
  }
  const char* no_bf16 = capped_at_avx2 ? "the CPU has no AVX512-BF16 (capped at AVX2)"
                        : !__builtin_cpu_supports("avx512bf16") ? "the CPU has no AVX512-BF16"
                                                                : nullptr;
  peaks.push_back({"bf16", "vdpbf16ps zmm", 64, dpbf16_zmm, no_bf16});
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    peaks.push_back({"int8", "vpdpbusd zmm", 128, dpbusd_zmm});
  } else {
    peaks.push_back({"int8", "vpdpbusd ymm", 64, dpbusd_ymm,
                     __builtin_cpu_supports("avxvnni") ? nullptr : "the CPU has no AVX-VNNI"});
  }
  // Three rounds, the kinds interleaved in each; the best of each kind counts
  // (a shared machine only ever slows a measure down).
  for (int round = 0; round < 3; ++round) {
    for (auto& peak : peaks) {
      if (peak.missing) continue;
      const auto t0 = Clock::now();
      peak.kernel(instructions);
      const double gops =
          static_cast<double>(instructions) * peak.ops_per_instruction / seconds_since(t0) / 1e9;
      peak.best_gops = std::max(peak.best_gops, gops);
    }
  }
  const double fp32 = peaks.front().best_gops;
  std::printf("{\"instructions\": %ld", instructions);
  for (const auto& peak : peaks) {
    if (peak.missing) {
      std::printf(", \"%s\": {\"instruction\": \"%s\", \"skipped\": \"%s\"}", peak.name,
                  peak.instruction, peak.missing);
    } else {
      std::printf(", \"%s\": {\"instruction\": \"%s\", \"gops_per_core\": %.1f", peak.name,
                  peak.instruction, peak.best_gops);
      if (fp32 > 0) std::printf(", \"per_fp32\": %.2f", peak.best_gops / fp32);
      std::printf("}");
    }
  }
  std::printf("}\n");
  return 0;
}
