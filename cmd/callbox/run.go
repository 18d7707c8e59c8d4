package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/atomicfile"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
)

func newRunCmd() *cobra.Command {
	var (
		cfgPath string
		ins     []string
		outs    []string
		stats   bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "run -c CONFIG NAME --in A.npy [--in B.npy] [--out C.npy [--out D.npy]]",
		Short: "Call one callback on .npy inputs and write its outputs as .npy",
		Long: "Call one callback on .npy inputs and write its outputs as .npy files, one --out per result in\n" +
			"order. Without --out the results are printed (as npy show does); --out - prints that one.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return usageErr(errors.New("run: -c CONFIG is required"))
			}
			ctx := cmd.Context()
			name := args[0]
			cfg, cb, inputs, err := loadCallback(cfgPath, name, ins)
			if err != nil {
				return err
			}
			// Load only the callback being run: a broken sibling in the
			// same config must not stop it.
			cfg.Callbacks = []config.Callback{cb}
			h, err := host.New(ctx, cfg, host.WithLogger(guestLogger(cmd.ErrOrStderr(), verbose)))
			if err != nil {
				return usageErr(err)
			}
			defer h.Close(ctx)
			info, _ := h.Callback(name)
			if err := checkOuts(outs, info); err != nil {
				return usageErr(fmt.Errorf("callback %q: %w", name, err))
			}
			req := host.Request{Callback: name, Inputs: inputs}
			st, err := h.Do(ctx, &req)
			results := req.Outputs
			if err != nil {
				var ce *host.CallbackError
				if errors.As(err, &ce) && ce.Kind() == host.InvalidArgument {
					return usageErr(err)
				}
				return callbackErr(err)
			}
			if len(outs) == 0 {
				outs = slices.Repeat([]string{"-"}, len(results))
			}
			if err := writeOuts(cmd.OutOrStdout(), outs, results); err != nil {
				return outputErr(err)
			}
			if stats {
				printStats(cmd.OutOrStdout(), name, info, st)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML, TOML or JSON)")
	cmd.Flags().StringArrayVar(&ins, "in", nil, "input .npy file, one per parameter, in order")
	cmd.Flags().StringArrayVar(&outs, "out", nil, "output .npy file, one per result, in order")
	cmd.Flags().BoolVar(&stats, "stats", false, "print the call's stats")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show guest debug log lines")
	return cmd
}

// checkOuts refuses, before the call runs, what cannot work from .npy
// files: a parameter dtype .npy cannot hold (bf16), an --out count other
// than zero or the number of results, a directory that does not exist, a
// result dtype .npy cannot hold.
func checkOuts(outs []string, info host.Info) error {
	for i, p := range info.Signature.Params {
		if err := tensorfile.Supports(p.DType); err != nil {
			return fmt.Errorf("parameter %d (%s) is %s, which no --in file can hold: %w", i, p.Name, p, err)
		}
	}
	results := info.Signature.Results
	if len(outs) == 0 {
		return nil
	}
	if len(outs) != len(results) {
		return fmt.Errorf("%d results (%s) but %d --out files were given: give one per result, or none to print them", len(results), info.Signature, len(outs))
	}
	for i, p := range outs {
		if p == "-" {
			continue
		}
		if err := tensorfile.Supports(results[i].DType); err != nil {
			return fmt.Errorf("--out %s: result %d: %w", p, i, err)
		}
		if err := checkDir("--out", p); err != nil {
			return err
		}
	}
	return nil
}

// checkDir refuses, before anything runs, an output path (of flag) whose
// directory does not exist.
func checkDir(flag, path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%s %s: directory %s: %w", flag, path, dir, err)
	} else if !st.IsDir() {
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// writeOuts writes results[i] to outs[i] ("-" prints it to w). Every file
// is written to a temporary name beside it first and renamed into place
// only once all of them are written, so a failure while writing (disk
// full, permissions) leaves every --out path as it was.
func writeOuts(w io.Writer, outs []string, results []abi.Tensor) (err error) {
	var temps []string
	defer func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}()
	for i, p := range outs {
		if p == "-" {
			continue
		}
		tmp, err := atomicfile.Stage(p, func(w io.Writer) error { return tensorfile.Encode(w, results[i]) })
		if err != nil {
			return fmt.Errorf("--out %w", err)
		}
		temps = append(temps, tmp)
	}
	k := 0
	for _, p := range outs {
		if p == "-" {
			continue
		}
		if err := os.Rename(temps[k], p); err != nil {
			return fmt.Errorf("--out %s: %w", p, err)
		}
		k++
	}
	temps = nil
	for i, p := range outs {
		if p == "-" {
			fmt.Fprintf(w, "result %d: %s%s\n", i, results[i].Type(), indentRows(formatValues(results[i])))
		}
	}
	return nil
}

// loadCallback reads the config at cfgPath, finds callback name in it
// (modules entries expanded, as the host loads them) and reads the --in
// files; a failure is a usage error naming the file or the callback.
func loadCallback(cfgPath, name string, ins []string) (*config.Config, config.Callback, []abi.Tensor, error) {
	cfg, err := configfile.Load(cfgPath)
	if err != nil {
		return nil, config.Callback{}, nil, usageErr(err)
	}
	if cfg, err = host.ExpandModules(cfg); err != nil {
		return nil, config.Callback{}, nil, usageErr(err)
	}
	cb, ok := cfg.Callback(name)
	if !ok {
		return nil, config.Callback{}, nil, usageErr(fmt.Errorf("%s: no callback %q (have: %s)", cfgPath, name, callbackNames(cfg)))
	}
	inputs := make([]abi.Tensor, len(ins))
	for i, p := range ins {
		if inputs[i], err = tensorfile.ReadFile(p); err != nil {
			return nil, config.Callback{}, nil, usageErr(fmt.Errorf("--in %s", err))
		}
	}
	return cfg, cb, inputs, nil
}

func callbackNames(cfg *config.Config) string {
	s := ""
	for i, cb := range cfg.Callbacks {
		if i > 0 {
			s += ", "
		}
		s += cb.Name
	}
	if s == "" {
		return "none"
	}
	return s
}

func printStats(w io.Writer, name string, info host.Info, st host.Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "callback\t%s (%s, %s)\n", name, info.Engine, info.ID)
	fmt.Fprintf(tw, "wall\t%v\n", st.Wall)
	fmt.Fprintf(tw, "guest\t%v\n", st.Guest)
	fmt.Fprintf(tw, "bytes in\t%d\n", st.BytesIn)
	fmt.Fprintf(tw, "bytes out\t%d\n", st.BytesOut)
	fmt.Fprintf(tw, "peak guest memory\t%d\n", st.PeakMemory)
	if st.FuelKnown {
		fmt.Fprintf(tw, "fuel\t%d\n", st.Fuel)
	} else {
		fmt.Fprintf(tw, "fuel\tnot metered\n")
	}
	fmt.Fprintf(tw, "new instance\t%v\n", st.NewInstance)
	tw.Flush()
}
