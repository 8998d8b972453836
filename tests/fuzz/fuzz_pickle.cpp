// Fuzz target: the restricted unpickler (opcodes, memo, marks, the globals' allow-list, nesting).
#include "fuzz_target.h"
#include "io/torch_pickle.h"

VIT_FUZZ_TARGET({
  const vit::io::pickle::Pickle p = vit::io::pickle::parse(reinterpret_cast<const char*>(data), size, "fuzz.pkl");
  (void)p.values.size();
})
