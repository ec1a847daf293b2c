// datasynth._core: the nanobind module over the datasynth library. The Python
// package (datasynth/) builds the pandas-facing API on these functions.
#include "common.h"

namespace dspy {
void BindTrain(nb::module_& m);
void BindGenerate(nb::module_& m);
void BindEvaluate(nb::module_& m);
}  // namespace dspy

NB_MODULE(_core, m) {
  m.doc() = "datasynth's C++ library (train, generate, evaluate); use the datasynth package";
  m.attr("__version__") = DS_VERSION;
  dspy::RegisterErrors(m);
  dspy::BindTrain(m);
  dspy::BindGenerate(m);
  dspy::BindEvaluate(m);
}
