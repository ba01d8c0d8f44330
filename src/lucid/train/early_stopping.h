// Best selection and early stopping, the reference's rules (ultralytics 8.4.190: BaseTrainer.validate
// and save_model in engine/trainer.py, EarlyStopping in utils/torch_utils.py), kept in the loop state
// so that a resumed fit decides as one that never stopped (the reference's checkpoints keep its
// stopper likewise).
//
// - best fitness: the highest measured fitness (-1 while none is measured; fitness is >= 0).
// - weights/best is written in every epoch whose fitness equals the best fitness (an improvement or a
//   tie) and in every epoch before the first measurement (the reference's None == None): without
//   validation, best is last.
// - early stopping counts the epochs since the stopper's best epoch: the last measured epoch whose
//   fitness beat the best, or any measured epoch while the best is 0 or unmeasured (a fitness of 0
//   counts as not yet measured). A measured epoch `patience` or more epochs after it stops the fit;
//   an epoch without validation never does; patience 0 never does.
//
// The reference also validates an unvalidated epoch when the stopper could stop at it
// (possible_stop); in lucid's fits, as in the reference's, every epoch after the first measured one
// is validated (val=False validates only the final or a timed-out epoch), so that never applies.
#pragma once
#include <cstdint>
#include <optional>

#include "lucid/weights/checkpoint.h"

namespace lucid::engine {

struct EpochVerdict {
  bool best = false;  // write weights/best
  bool stop = false;  // stop early (no improvement in the last `patience` epochs)
};

// Records one finished epoch (state.epoch already counts it) with its fitness (nullopt: not
// validated) and decides.
EpochVerdict judge_epoch(LoopState& state, std::optional<double> fitness, int64_t patience);

// Whether the fit validates an epoch: every epoch with val=True, else the final one and one the time
// budget ends (the reference's rule, less possible_stop: see above).
bool validation_due(bool val, bool final_epoch, bool time_up);

// Whether a checkpoint's state is one the stopper stopped at (its last epoch was measured and came
// `patience` or more epochs after the stopper's best).
bool early_stop_due(const LoopState& state, int64_t patience);

}  // namespace lucid::engine
