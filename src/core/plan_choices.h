#pragma once
// The choices about plans a user makes when loading a model: activation layouts and streams. The
// public ModelOptions derives from this struct and the planner's PlannerOptions does too, so the
// model hands its choices to the planner whole (one assignment of this base), never field by field.
//
//   PlannerOptions po;
//   static_cast<PlanChoices&>(po) = model_options;   // every field below
//
// Installed with the public headers (include/streamline/core/): includes only the C++ library.

#include <map>
#include <string>

namespace streamline {

struct PlanChoices {
  // Declared so that `ModelOptions{}` value-initialises this base through its constructor (GCC 12
  // otherwise warns that the map may be used uninitialised in every `options = {}` default).
  PlanChoices() = default;
  // Keep convolution activations channels-last between layers. Takes effect at load.
  bool channels_last = true;
  // With channels_last: keep activations in oneDNN's blocked layout between convolutions whose
  // channel counts are multiples of the block: nChw16c on CPUs with AVX-512, nChw8c otherwise
  // (see blocked_channels). Takes effect at load.
  bool blocked_layout = true;
  // Channels per block of the blocked layout: 8 (nChw8c) or 16 (nChw16c); 0 = 16 where oneDNN
  // runs AVX-512 code, else 8 (a loaded model holds the resolved count). Takes effect at load.
  int blocked_channels = 0;
  // Streams per run: independent branches of the graph run concurrently on CPU stream threads.
  // Takes effect when plans are made.
  int num_streams = 1;
  // Node name -> stream, overriding the planner's choice.
  std::map<std::string, int> pinned_streams;
};

}  // namespace streamline
