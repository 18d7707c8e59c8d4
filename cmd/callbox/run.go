package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
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
		Use:   "run -c CONFIG NAME --in A.npy [--in B.npy] --out C.npy [--out D.npy]",
		Short: "Call one callback on .npy inputs and write its outputs as .npy",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return usageErr(errors.New("run: -c CONFIG is required"))
			}
			ctx := cmd.Context()
			cfg, err := configfile.Load(cfgPath)
			if err != nil {
				return usageErr(err)
			}
			name := args[0]
			cb, ok := cfg.Callback(name)
			if !ok {
				return usageErr(fmt.Errorf("%s: no callback %q (have: %s)", cfgPath, name, callbackNames(cfg)))
			}
			inputs := make([]abi.Tensor, len(ins))
			for i, p := range ins {
				if inputs[i], err = tensorfile.ReadFile(p); err != nil {
					return usageErr(fmt.Errorf("--in %s", err))
				}
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
			if len(outs) != len(info.Signature.Results) {
				return usageErr(fmt.Errorf("callback %q has %d results (%s) but %d --out files were given", name, len(info.Signature.Results), info.Signature, len(outs)))
			}
			results, st, err := h.InvokeStats(ctx, name, inputs...)
			if err != nil {
				var ce *host.CallbackError
				if errors.As(err, &ce) && ce.Kind() == host.InvalidArgument {
					return usageErr(err)
				}
				return callbackErr(err)
			}
			for i, p := range outs {
				if err := tensorfile.WriteFile(p, results[i]); err != nil {
					return fmt.Errorf("--out %w", err)
				}
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

// guestLogger prints guest log lines to w, at info and above unless verbose.
func guestLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}))
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
