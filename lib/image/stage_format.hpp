// The one conversion the loader's deterministic stage (lib/data/loader.cpp)
// and the predictor's preprocessing (lib/deploy/preprocess.cpp) both apply to
// a decoded image or an in-memory sample before resizing, so training and
// inference see the same pixels.
#pragma once

#include "stoke/image.hpp"

namespace stoke::image_detail {

// `source` at `bit_depth` (convert_depth into `deepened` when it differs),
// then with `channels` (convert_channels into `converted` when it differs).
// Returns source itself when nothing changes.
STOKE_INTERNAL ImageView to_stage_format(ImageView source, int channels, int bit_depth,
                                         Image& deepened, Image& converted);

}  // namespace stoke::image_detail
