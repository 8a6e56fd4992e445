#pragma once
// The choices a user makes when loading a model that the layers below the model act on: the
// kernels' layouts and arithmetic (KernelChoices) and the planner's streams (PlanChoices). The
// public ModelOptions derives from PlanChoices, the planner's PlannerOptions does too, and the
// kernels' ops::KernelOptions derives from KernelChoices, so the model hands its choices to each
// layer whole (one assignment of the base), never field by field.
//
//   PlannerOptions po;
//   static_cast<PlanChoices&>(po) = model_options;      // layouts and streams
//   ops::KernelOptions ko;
//   static_cast<KernelChoices&>(ko) = model_options;    // layouts, Winograd, precision
//
// Installed with the public headers (include/streamline/core/): includes only the C++ library and
// other public core headers.

#include <map>
#include <string>

#include "dtype.h"  // sibling form, as in core/tensor.h

namespace streamline {

struct KernelChoices {
  // Keep convolution activations channels-last between layers. Takes effect at load.
  bool channels_last = true;
  // With channels_last: keep activations in oneDNN's blocked layout between convolutions whose
  // channel counts are multiples of the block: nChw16c on CPUs with AVX-512, nChw8c otherwise
  // (see blocked_channels). Takes effect at load.
  bool blocked_layout = true;
  // Channels per block of the blocked layout: 8 (nChw8c) or 16 (nChw16c); 0 = 16 where oneDNN
  // runs AVX-512 code, else 8 (a loaded model holds the resolved count; a kernel given 0 by a
  // caller that did not resolve it uses 8). Takes effect at load.
  int blocked_channels = 0;
  // With blocked_layout: 3x3 stride-1 convolutions with enough channels and pixels (a fixed rule,
  // never a timing, so results do not depend on the machine's load) run Winograd F(2x2, 3x3),
  // which rounds like the direct convolution and needs 2.25x fewer multiply-adds. Off: every
  // convolution runs oneDNN's direct algorithm. Takes effect at load.
  bool winograd = true;
  // Device arithmetic: kFp32, kTf32 (TF32 tensor cores for matrix products and convolutions),
  // kFp16 (weights converted to float16 at load; inputs and outputs stay float32). CPU models run
  // fp32 only; kFp16 models reach the kernels with float16 dtypes, so for kernels this field only
  // tells fp32 definitions whether TF32 is allowed. Takes effect at load.
  Precision precision = Precision::kFp32;
};

struct PlanChoices : KernelChoices {
  // Declared so that `ModelOptions{}` value-initialises this base through its constructor (GCC 12
  // otherwise warns that the map may be used uninitialised in every `options = {}` default).
  PlanChoices() = default;
  // Streams per run: independent branches of the graph run concurrently on CPU stream threads.
  // Takes effect when plans are made.
  int num_streams = 1;
  // Node name -> stream, overriding the planner's choice.
  std::map<std::string, int> pinned_streams;
};

}  // namespace streamline
