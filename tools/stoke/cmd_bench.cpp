// stoke bench: the stoke-bench program (bench/stoke_bench.cpp), compiled into
// this command with its main renamed (tools/stoke/CMakeLists.txt).
#include "commands.hpp"

int stoke_bench_main(int argc, char** argv);

int cmd_bench(int argc, char** argv) {
  return stoke_bench_main(argc, argv);
}
