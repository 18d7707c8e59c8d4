package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
)

// newNpyCmd makes and prints small .npy files, so a callback can be tried
// from the shell on a machine without NumPy.
func newNpyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "npy",
		Short: "Make or print small .npy tensors (for trying callbacks without NumPy)",
	}
	var dtype, shape string
	mk := &cobra.Command{
		Use:   "make FILE.npy VALUE...",
		Short: "Write VALUEs as a tensor: callbox npy make x.npy --shape 2,2 1 2 3 4",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageErr(fmt.Errorf("npy make: want FILE.npy and values"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := abi.ParseDType(dtype)
			if err != nil {
				return usageErr(fmt.Errorf("--dtype: %w", err))
			}
			values := args[1:]
			dims, err := parseShape(shape, len(values))
			if err != nil {
				return usageErr(err)
			}
			t, err := abi.New(d, dims...)
			if err != nil {
				return usageErr(err)
			}
			if n, _ := t.Shape.NumElements(); n != uint64(len(values)) {
				return usageErr(fmt.Errorf("shape %v holds %d values, got %d", t.Shape, n, len(values)))
			}
			size := int(d.Size())
			for i, v := range values {
				if err := putValue(t.Data[i*size:(i+1)*size], d, v); err != nil {
					return usageErr(fmt.Errorf("value %d (%q): %w", i, v, err))
				}
			}
			return tensorfile.WriteFile(args[0], t)
		},
	}
	mk.Flags().StringVar(&dtype, "dtype", "f32", "element type (f32, f64, s32, s64, u8, pred, ...)")
	mk.Flags().StringVar(&shape, "shape", "", `comma-separated dimensions; "" is [len(values)], "scalar" is rank 0`)
	show := &cobra.Command{
		Use:   "show FILE.npy",
		Short: "Print a tensor's type and values",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tensorfile.ReadFile(args[0])
			if err != nil {
				return usageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", t.Type(), formatValues(t))
			return nil
		},
	}
	cmd.AddCommand(mk, show)
	return cmd
}

func parseShape(s string, n int) ([]int64, error) {
	switch s {
	case "":
		return []int64{int64(n)}, nil
	case "scalar":
		return []int64{}, nil
	}
	var dims []int64
	for _, part := range strings.Split(s, ",") {
		d, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--shape: bad dimension %q", part)
		}
		dims = append(dims, d)
	}
	return dims, nil
}

// putValue encodes one element little-endian.
func putValue(b []byte, d abi.DType, v string) error {
	le := binary.LittleEndian
	switch d {
	case abi.F32:
		f, err := strconv.ParseFloat(v, 32)
		le.PutUint32(b, math.Float32bits(float32(f)))
		return err
	case abi.F64:
		f, err := strconv.ParseFloat(v, 64)
		le.PutUint64(b, math.Float64bits(f))
		return err
	case abi.PRED:
		x, err := strconv.ParseBool(v)
		if x {
			b[0] = 1
		}
		return err
	case abi.S8, abi.S16, abi.S32, abi.S64:
		x, err := strconv.ParseInt(v, 10, int(d.Size())*8)
		putInt(b, uint64(x))
		return err
	case abi.U8, abi.U16, abi.U32, abi.U64:
		x, err := strconv.ParseUint(v, 10, int(d.Size())*8)
		putInt(b, x)
		return err
	}
	return fmt.Errorf("npy make does not write %s", d)
}

func putInt(b []byte, x uint64) {
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
}

func formatValues(t abi.Tensor) string {
	var v any
	switch t.DType {
	case abi.F32:
		v = abi.MustView[float32](t)
	case abi.F64:
		v = abi.MustView[float64](t)
	case abi.S32:
		v = abi.MustView[int32](t)
	case abi.S64:
		v = abi.MustView[int64](t)
	case abi.U8:
		v = abi.MustView[uint8](t)
	case abi.PRED:
		v = abi.MustView[bool](t)
	default:
		return fmt.Sprintf("(%d bytes)", len(t.Data))
	}
	return fmt.Sprint(v)
}
