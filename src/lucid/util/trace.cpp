#include "lucid/util/trace.h"

#include <nvtx3/nvToolsExt.h>

namespace lucid::util {

TraceRange::TraceRange(const char* name) { nvtxRangePushA(name); }

TraceRange::~TraceRange() { nvtxRangePop(); }

}  // namespace lucid::util
