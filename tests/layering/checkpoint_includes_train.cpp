// Must NOT compile: the checkpoint format sits below train (which writes and resumes it), so
// train's headers are not on checkpoint's include path (tests/CMakeLists.txt builds this against
// vit_checkpoint and expects the missing-header error).
#include "train/run.h"
