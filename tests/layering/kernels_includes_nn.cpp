// Must NOT compile: kernels sit below nn, so nn's headers are not on kernels' include path
// (tests/CMakeLists.txt builds this against vit_kernels and expects the missing-header error).
#include "nn/layers.h"
