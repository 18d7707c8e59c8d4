package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	for _, want := range []string{
		"matmul: [1 2 3 4] -> f32[2,2] [7 10 15 22]",
		"tap_print: n=4",
		"softmax(scale(x, 0.5)) = [0.1015 0.1674 0.2760 0.4551]",
		`spin: callback "spin" failed: timeout after 50ms (at func[2] @0xcb) (kind Timeout)`,
		"scale after the timeout: [3 6]",
	} {
		assert.Contains(t, out.String(), want)
	}
}
