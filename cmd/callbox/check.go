package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/cmd/callbox/internal/termsafe"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
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
			printWorkers(cmd, h)
			printOrigins(cmd, cfg, h.Callbacks())
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok, %d callback(s) loaded\n", cfgPath, len(h.Callbacks()))
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "config file (YAML, TOML or JSON)")
	return cmd
}

// printWorkers lists, for each callback under isolation: process, its
// worker process and every lockdown step, applied or not, with why.
func printWorkers(cmd *cobra.Command, h *host.Host) {
	var rows [][]string
	for _, info := range h.Callbacks() {
		c, err := h.Lookup(info.Name)
		if err != nil {
			continue
		}
		w, ok := c.Worker()
		if !ok {
			continue
		}
		for _, s := range w.Hardening {
			state := "applied"
			if !s.Applied {
				state = "NOT applied"
			}
			rows = append(rows, []string{info.Name, fmt.Sprint(w.PID), s.Name, state, termsafe.Text(s.Detail)})
		}
		if seen := kernelView(w.PID); seen != "" {
			rows = append(rows, []string{info.Name, fmt.Sprint(w.PID), "kernel", "reads", seen})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(cmd.OutOrStdout(), "\nisolation: process, each callback's worker and its lockdown:")
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CALLBACK\tWORKER PID\tHARDENING\tSTATE\tDETAIL")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// printOrigins lists where each value that is not a built-in default came
// from: a key of the file, or an environment variable.
func printOrigins(cmd *cobra.Command, cfg *config.Config, infos []host.Info) {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCALLBACK\tKEY\tFROM")
	for _, info := range infos {
		entries := originEntries(cfg, info)
		for _, k := range config.Keys() {
			if k.PerCallback {
				continue // module, sha256, export, signature: the entry's own
			}
			from := cfg.Origin(k.Name, entries...)
			switch {
			case from == config.OriginDefault:
				continue
			case from[0] == '$':
				from = from[1:] + " (environment)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", info.Name, k.Name, termsafe.Text(from))
		}
	}
	tw.Flush()
	fmt.Fprintln(cmd.OutOrStdout(), "(every value not listed is the built-in default)")
}

// originEntries are the config entries a loaded callback's settings came
// from, most specific first: its callbacks entry, or the modules entry
// that loaded it (its per-callback override, then the entry).
func originEntries(cfg *config.Config, info host.Info) []string {
	if _, ok := cfg.Callback(info.Name); ok {
		return []string{config.CallbackPath(info.Name)}
	}
	for _, m := range cfg.Modules {
		if m.Settings.Module == info.Module {
			return []string{config.ModulePath(m.Name) + "." + config.CallbackPath(info.Export), config.ModulePath(m.Name)}
		}
	}
	return nil
}

// orWord is word when v is zero, else s.
func orWord(v uint64, word, s string) string {
	if v == 0 {
		return word
	}
	return s
}

// kernelView is what /proc/<pid>/status says of a worker's identity and
// lockdown, beside what the worker reported of itself: its user and
// group ids, its effective, permitted and bounding capability sets, the
// seccomp mode and no_new_privs. "" where /proc cannot be read.
func kernelView(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	first := func(k string) string { f, _, _ := strings.Cut(fields[k], " "); return f }
	return fmt.Sprintf("uid %s, gid %s, CapEff %s, CapPrm %s, CapBnd %s, Seccomp %s, NoNewPrivs %s",
		first("Uid"), first("Gid"), fields["CapEff"], fields["CapPrm"], fields["CapBnd"], fields["Seccomp"], fields["NoNewPrivs"])
}
