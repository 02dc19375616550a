// Umbrella header: everything a trainer or inspection application needs.
#pragma once

#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/device.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/nn.hpp"
#include "stoke/system.hpp"
#include "stoke/tensor.hpp"
#include "stoke/threads.hpp"
#include "stoke/version.hpp"
