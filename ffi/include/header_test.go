package include_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/ffi/include"
)

// TestVersion: the C API's version reads as MAJOR.MINOR.PATCH from the
// header's three defines.
func TestVersion(t *testing.T) {
	assert.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, include.Version())
	assert.Contains(t, include.Header(), "#define CALLBOX_VERSION_MAJOR ")
}
