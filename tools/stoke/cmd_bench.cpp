// stoke bench: the stoke-bench program (bench/stoke_bench.cpp), compiled into
// this command with its main renamed.
#include "commands.hpp"

// Its headers first, so that the rename below touches only its main.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "bench/bench_report.hpp"
#include "core/progress.hpp"
#include "stoke/stoke.hpp"

#define main stoke_bench_main
#include "bench/stoke_bench.cpp"
#undef main

int cmd_bench(int argc, char** argv) {
  return stoke_bench_main(argc, argv);
}
