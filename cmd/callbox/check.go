package main

import (
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/termsafe"
)

func newCheckCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "check -c CONFIG",
		Short: "Validate a config and load every module, without running a callback",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return usageErr(errors.New("check: -c CONFIG is required"))
			}
			ctx := cmd.Context()
			cfg, err := configfile.Load(cfgPath)
			if err != nil {
				return usageErr(err)
			}
			h, err := host.New(ctx, cfg, host.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				return usageErr(err)
			}
			defer h.Close(ctx)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			// Every effective limit, defaults applied, so a user can confirm
			// what they set.
			fmt.Fprintln(tw, "CALLBACK\tENGINE\tTIMEOUT\tCPU\tMEMORY\tFUEL\tSTACK\tOUTPUT\tERROR\tLOG\tISOLATION\tINSTANCES\tWAIT\tWASI\tSIGNATURE")
			for _, info := range h.Callbacks() {
				l := info.Limits
				wasi := "none"
				if info.WASI {
					wasi = "minimal"
				}
				wait := "unbounded"
				if l.MaxWait > 0 {
					wait = l.MaxWait.String()
				}
				cpu := "none"
				if l.MaxCPU > 0 {
					cpu = l.MaxCPU.String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", info.Name, info.Engine, l.Timeout, cpu,
					config.FormatSize(l.MaxMemory), orWord(l.Fuel, "unlimited", fmt.Sprint(l.Fuel)),
					orWord(l.MaxStack, "default", config.FormatSize(l.MaxStack)), config.FormatSize(l.MaxOutput),
					config.FormatSize(l.MaxError), config.FormatSize(l.MaxLog), info.Isolation, info.MaxInstances, wait, wasi,
					termsafe.Text(info.Signature.String()))
			}
			tw.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok, %d callback(s) loaded\n", cfgPath, len(h.Callbacks()))
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML, TOML or JSON)")
	return cmd
}

// orWord is word when v is zero, else s.
func orWord(v uint64, word, s string) string {
	if v == 0 {
		return word
	}
	return s
}
