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
	assert.ErrorContains(t, err, "needs 8 data bytes after the header (offset 128), the file has 7")
	_, err = Decode([]byte("hello world"))
	assert.ErrorContains(t, err, "bad magic")
	bad := bytes.Clone(img)
	bad[8], bad[9] = 0xff, 0xff
	_, err = Decode(bad)
	assert.ErrorContains(t, err, "runs past")
	err = Encode(&bytes.Buffer{}, abi.Tensor{DType: abi.BF16, Shape: abi.Shape{1}, Data: []byte{0, 0}})
	assert.ErrorContains(t, err, "NumPy has no bfloat16 dtype")
	assert.ErrorContains(t, err, "x.astype(np.float32)", "the error says what to do instead")
}

// Encode writes bits, not values: a signalling NaN keeps its payload (npyio
// quieted it), and an empty leading dimension keeps the rest of the shape.
func TestEncodeIsBitExact(t *testing.T) {
	for _, tc := range []abi.Tensor{
		{DType: abi.F32, Shape: abi.Shape{2}, Data: []byte{0x30, 0x30, 0x83, 0x7f, 1, 0, 0x80, 0xff}},
		abi.From([]float32{}, 0, 3),
		abi.From([]int16{}, 2, 0, 5),
	} {
		var b bytes.Buffer
		require.NoError(t, Encode(&b, tc))
		assert.Zero(t, (b.Len()-len(tc.Data))%64, "data starts on a 64-byte boundary")
		got, err := Decode(b.Bytes())
		require.NoError(t, err)
		assert.Equal(t, tc.Shape, got.Shape)
		assert.Equal(t, tc.Data, got.Data)
	}
}
