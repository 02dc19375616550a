// stoke info: the stoke-info program (info/stoke_info.cpp), compiled into this
// command with its main renamed.
#include "commands.hpp"

// Its headers first, so that the rename below touches only its main.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "stoke/distributed.hpp"
#include "stoke/stoke.hpp"

#define main stoke_info_main
#include "info/stoke_info.cpp"
#undef main

int cmd_info(int argc, char** argv) {
  return stoke_info_main(argc, argv);
}
