// The conv-net engine: layers, models, optimizers, checkpoints, inference.
#pragma once

#include "stoke/backend.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/nn/inference.hpp"
#include "stoke/nn/layers.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/nn/segmentation.hpp"
#include "stoke/tensor.hpp"
