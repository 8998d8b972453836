// Must NOT compile: distributed is the only room that knows MPI (it links MPI privately), so
// <mpi.h> is not on the include path of train, which uses it through distributed/comm.h
// (tests/CMakeLists.txt builds this against vit_train and expects the missing-header error).
#include <mpi.h>
