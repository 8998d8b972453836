// Must NOT compile: nn modules call autograd ops, never kernels; vit_nn reaches vit_kernels
// only privately through vit_autograd, so kernel headers are not on nn's include path.
#include "kernels/gemm/gemm.h"
