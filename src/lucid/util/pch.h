// Precompiled header shared by every target: LibTorch's headers are most of each TU's parse time.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
