// stoke info: the stoke-info program (examples/stoke_info.cpp), compiled into
// this command with its main renamed (tools/stoke/CMakeLists.txt).
#include "commands.hpp"

int stoke_info_main(int argc, char** argv);

int cmd_info(int argc, char** argv) {
  return stoke_info_main(argc, argv);
}
