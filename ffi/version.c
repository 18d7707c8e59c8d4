// The version functions of include/callbox.h. (Go's build cache hashes only
// the files of this directory, not include/: a version bump edits this
// comment too, so cached builds pick it up. Version 1.11.)
#include "include/callbox.h"

#define CBX_STR2(x) #x
#define CBX_STR(x) CBX_STR2(x)

const char *callbox_version(void) {
  return CBX_STR(CALLBOX_VERSION_MAJOR) "." CBX_STR(CALLBOX_VERSION_MINOR) "." CBX_STR(CALLBOX_VERSION_PATCH);
}

uint32_t callbox_version_number(void) {
  return CALLBOX_VERSION_MAJOR * 10000u + CALLBOX_VERSION_MINOR * 100u + CALLBOX_VERSION_PATCH;
}
