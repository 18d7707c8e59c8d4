package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestZeroCopy(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	assert.Contains(t, out.String(), "Invoke:  y[6]=12  copied 32 MiB in, 32 MiB out")
	assert.Contains(t, out.String(), "Session: y[6]=12  copied 0 MiB in, 0 MiB out")
}
