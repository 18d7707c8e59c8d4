package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/atomicfile"
)

func newProfileCmd() *cobra.Command {
	var (
		cfgPath string
		ins     []string
		calls   int
		out     string
		top     int
	)
	cmd := &cobra.Command{
		Use:   "profile -c CONFIG NAME --in A.npy [--in B.npy] [-n CALLS] [-o guest.pprof]",
		Short: "Profile where a callback's own functions spend their work",
		Long: "Call one callback CALLS times on .npy inputs with the guest profiler and print its functions, the\n" +
			"most fuel first: fuel (wasm instructions, counted alike on both engines) in the function itself and\n" +
			"in everything it called, calls, and wall time (which includes the profiler's own cost, about a host\n" +
			"call per guest function call). -o writes the profile in pprof's format, one sample per call path:\n" +
			"go tool pprof -top guest.pprof, or -http=: for its web view (-sample_index=wall for time).\n" +
			"The callback runs in process (a callback under isolation: process runs under isolation: pooled),\n" +
			"with its config's engine and limits.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return usageErr(errors.New("profile: -c CONFIG is required"))
			}
			if calls < 1 {
				return usageErr(fmt.Errorf("profile: -n %d: want at least one call", calls))
			}
			ctx := cmd.Context()
			name := args[0]
			cfg, cb, inputs, err := loadCallback(cfgPath, name, ins)
			if err != nil {
				return err
			}
			if out != "" {
				if err := checkDir("-o", out); err != nil {
					return usageErr(err)
				}
			}
			if cb.InWorker() {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: callback %q runs under isolation: %s; the profile runs it in process (isolation: pooled)\n", name, cb.Isolation)
				cb.Isolation = config.IsolationPooled
			}
			cb.RecordFailures = ""
			cfg.Callbacks = []config.Callback{cb}
			h, err := host.New(ctx, cfg, host.WithLogger(guestLogger(cmd.ErrOrStderr(), false)))
			if err != nil {
				return usageErr(err)
			}
			defer h.Close(ctx)
			p, err := h.Profile(ctx, name, calls, inputs...)
			if err != nil {
				var ce *host.CallbackError
				if errors.As(err, &ce) && ce.Kind() == host.InvalidArgument {
					return usageErr(err)
				}
				return callbackErr(err)
			}
			printProfile(cmd.OutOrStdout(), p, top)
			if out != "" {
				if err := atomicfile.Write(out, p.WritePprof); err != nil {
					return outputErr(fmt.Errorf("-o %w", err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (go tool pprof -top %s)\n", out, out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML, TOML or JSON)")
	cmd.Flags().StringArrayVar(&ins, "in", nil, "input .npy file, one per parameter, in order")
	cmd.Flags().IntVarP(&calls, "calls", "n", 10, "how many calls to profile")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the profile in pprof's format to this file")
	cmd.Flags().IntVar(&top, "top", 20, "how many functions to print (0: all)")
	return cmd
}

// printProfile prints a profile's functions, the most self fuel first.
func printProfile(w io.Writer, p *host.GuestProfile, top int) {
	var all uint64
	for _, f := range p.Functions {
		all += f.Self.Fuel
	}
	fmt.Fprintf(w, "callback %q on %s: %d calls", p.Callback, p.Engine, p.Calls)
	if p.Failed > 0 {
		fmt.Fprintf(w, " (%d failed)", p.Failed)
	}
	fmt.Fprintf(w, " in %v, %d fuel\n", p.Elapsed.Round(time.Microsecond), all)
	pct := func(v uint64) string {
		if all == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(v)/float64(all))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "self fuel\tself\ttotal fuel\ttotal\tcalls\tself wall\t  function")
	for i, f := range p.Functions {
		if top > 0 && i == top {
			break
		}
		where := ""
		if f.Frame.File != "" {
			where = fmt.Sprintf(" (%s:%d)", f.Frame.File, f.Frame.Line)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%v\t  %s%s\n", f.Self.Fuel, pct(f.Self.Fuel), f.Total.Fuel, pct(f.Total.Fuel),
			f.Self.Calls, time.Duration(f.Self.Nanos).Round(time.Microsecond), f.Frame.Name(), where)
	}
	_ = tw.Flush()
	if top > 0 && len(p.Functions) > top {
		fmt.Fprintf(w, "(%d more functions; --top 0 prints all)\n", len(p.Functions)-top)
	}
}
