// The segmentation evaluation's report (stoke eval --report DIR on a
// segmentation model): DIR/report.json (the --json object) and
// DIR/report.html, one self-contained page: the figures, IoU per class, the
// pixel confusion matrix, and the worst images (highest area error, then
// lowest IoU) with their true and predicted masks over the image.
#pragma once

#include <filesystem>

#include "stoke/segment.hpp"

namespace stoke_cli {

// Writes both files (the folder is created); the worst images are segmented
// again with `predictor`. IoError naming a file that cannot be written.
void write_segmentation_report(const std::filesystem::path& dir, const std::string& model,
                               const stoke::SegmentationEvaluation& evaluation,
                               const stoke::SegmentationDataset& dataset,
                               stoke::Predictor& predictor);

}  // namespace stoke_cli
