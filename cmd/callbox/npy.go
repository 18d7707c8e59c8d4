package main

import (
	"fmt"
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
		Long: "Write VALUEs as a tensor. Negative numbers are values, not flags (npy make x.npy --dtype s64 1 -5).\n" +
			"Floats accept inf, -inf and nan; complex values are written 1+2j; pred values true/false or 1/0.",
		// Flags are parsed by hand so that "-5" is a value, not a flag.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, raw []string) error {
			args, help, err := parseValueArgs(cmd, raw)
			if err != nil {
				return &flagError{err}
			}
			if help {
				return cmd.Help()
			}
			if len(args) < 1 {
				return usageErr(fmt.Errorf("npy make: want FILE.npy and values"))
			}
			d, err := abi.ParseDType(dtype)
			if err == nil {
				err = tensorfile.Supports(d)
			}
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
			if err := tensorfile.WriteFile(args[0], t); err != nil {
				return outputErr(err)
			}
			return nil
		},
	}
	mk.Flags().StringVar(&dtype, "dtype", "f32", "element type (pred, s8..s64, u8..u64, f16, f32, f64, c64, c128)")
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
			fmt.Fprintf(cmd.OutOrStdout(), "%s%s\n", t.Type(), indentRows(formatValues(t)))
			return nil
		},
	}
	cmd.AddCommand(mk, show)
	return cmd
}

// parseValueArgs parses cmd's flags in raw and returns the positional
// arguments: anything that reads as a number, a negative one included, is
// positional. help reports -h or --help.
func parseValueArgs(cmd *cobra.Command, raw []string) (args []string, help bool, err error) {
	var flags []string
	for i := 0; i < len(raw); i++ {
		a := raw[i]
		switch {
		case a == "--":
			args = append(args, raw[i+1:]...)
			i = len(raw)
		case a == "-h" || a == "--help":
			help = true
		case isNumber(a) || !strings.HasPrefix(a, "-") || a == "-":
			args = append(args, a)
		default:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if f := cmd.Flags().Lookup(name); f != nil && !strings.Contains(a, "=") && f.Value.Type() != "bool" && i+1 < len(raw) {
				i++
				flags = append(flags, raw[i])
			}
		}
	}
	return args, help, cmd.Flags().Parse(flags)
}

// isNumber reports whether s is a value npy make reads rather than a flag:
// an integer or float (-5, -1.5e3, -inf, -nan) or a complex number (-1+2j).
func isNumber(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err == nil || isRange(err) {
		return true
	}
	if _, err := strconv.ParseInt(s, 0, 64); err == nil || isRange(err) {
		return true
	}
	_, err := strconv.ParseComplex(strings.ReplaceAll(s, "j", "i"), 128)
	return err == nil || isRange(err)
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
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
