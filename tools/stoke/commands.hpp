// The `stoke` command's subcommands: each lives in tools/stoke/cmd_<name>.cpp
// and is listed in main.cpp's table. argv[0] is the subcommand's name.
#pragma once

int cmd_info(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_dataset(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_predict(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_export(int argc, char** argv);
int cmd_import(int argc, char** argv);
