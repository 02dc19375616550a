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
int cmd_quantize(int argc, char** argv);
int cmd_audit(int argc, char** argv);

#include <string>

#include "stoke/image.hpp"

namespace stoke_cli {

// --normalize minmax | imagenet | mean=a:b:c,std=a:b:c (cmd_train.cpp).
stoke::Normalization parse_normalization(const std::string& text);

// Anomaly detection (cmd_anomaly.cpp): `stoke train --task anomaly`, and
// predict / eval when --model names an anomaly model file.
bool wants_anomaly_task(int argc, char** argv);
bool is_anomaly_model(int argc, char** argv);
int anomaly_train(int argc, char** argv);
int anomaly_predict(int argc, char** argv);
int anomaly_eval(int argc, char** argv);

// Segmentation (cmd_segment.cpp, cmd_segment_use.cpp): `stoke train --task
// segment`, and predict / eval when --model names a segmentation model file.
bool wants_segment_task(int argc, char** argv);
bool is_segmentation_model(int argc, char** argv);
int segment_train(int argc, char** argv);
int segment_predict(int argc, char** argv);
int segment_eval(int argc, char** argv);

}  // namespace stoke_cli
