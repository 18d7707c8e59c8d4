package tensorfile

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

func TestRoundTrip(t *testing.T) {
	cases := []abi.Tensor{
		abi.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
		abi.Scalar[float64](2.5),
		abi.From([]int64{}, 0),
		abi.From([]int32{}, 3, 0),
		abi.From([]bool{true, false}),
		abi.From([]uint8{1, 2, 3, 4}, 2, 1, 2),
		abi.From([]complex64{1 + 2i}),
	}
	for _, tc := range cases {
		t.Run(tc.Type(), func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, Encode(&b, tc))
			got, err := Decode(b.Bytes())
			require.NoError(t, err)
			assert.Equal(t, tc.DType, got.DType)
			assert.Equal(t, tc.Shape, got.Shape)
			assert.Equal(t, tc.Data, got.Data)
		})
	}
}

func TestRejects(t *testing.T) {
	var good bytes.Buffer
	require.NoError(t, Encode(&good, abi.From([]float32{1, 2})))
	img := good.Bytes()
	_, err := Decode(img[:len(img)-1])
	assert.ErrorContains(t, err, "needs 8 data bytes, the file has 7")
	_, err = Decode([]byte("hello world"))
	assert.ErrorContains(t, err, "bad magic")
	bad := bytes.Clone(img)
	bad[8], bad[9] = 0xff, 0xff
	_, err = Decode(bad)
	assert.ErrorContains(t, err, "runs past")
	assert.ErrorContains(t, Encode(&bytes.Buffer{}, abi.From([]float32{}, 0, 3)), "cannot write shape [0,3]")
}
