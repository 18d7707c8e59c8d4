// Command callbox-bench runs callbox's benchmark suite (package bench)
// and writes docs/PERFORMANCE.md (make bench):
//
//	cd bench && go run ./cmd/callbox-bench --write ../docs/PERFORMANCE.md
//
// It lives in the nested module bench, with the suite's dependencies (the
// Extism SDK, gonum/plot), so that the library's go.mod has none of them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed4b3e0ccb/callbox/bench"
)

// Exit statuses: 0 ok, 1 a measurement or report failed, 2 bad usage.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	programName = "callbox-bench"
)

// usageError is bad usage (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErr(err error) error { return usageError{err} }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command with args, its output to stdout and stderr, and
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newBenchCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", programName, err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

func newBenchCmd() *cobra.Command {
	var (
		benchTime time.Duration
		reps      int
		filter    string
		chartPath string
		writePath string
		noTargets bool
		quiet     bool
		accuracyN int
		cacheReps int
		targets   string
		since     int64
		goBench   string
		xlaBench  string
		exBench   string
	)
	cmd := &cobra.Command{
		Use:   programName,
		Short: "Benchmark callbox against the physical floor, the raw engines and Extism",
		Long: programName + " runs the benchmark suite (package bench): scale, matmul, softmax and an ordered chain\n" +
			"on the floor (Go copy, native Go), wazero and wasmtime called by hand, Extism, and callbox in\n" +
			"each mode, side by side in one run; then the targets' own measurements (timeout accuracy,\n" +
			"fresh instantiation, module cache). It prints a table with ratios and the targets, writes a\n" +
			"chart, and with --write a Markdown report (make bench writes docs/PERFORMANCE.md).\n" +
			"The modules it runs are embedded in this binary.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageErr(fmt.Errorf("takes no arguments, got %q", args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := bench.SuiteOptions{
				Options:      bench.Options{BenchTime: benchTime, Reps: reps},
				Command:      benchCommand(cmd),
				SkipTargets:  noTargets,
				AccuracyRuns: accuracyN,
				CacheReps:    cacheReps,
			}
			if targets != "" {
				re, err := regexp.Compile(targets)
				if err != nil {
					return usageErr(fmt.Errorf("--targets: %w", err))
				}
				opts.Targets = re
			}
			if filter != "" {
				re, err := regexp.Compile(filter)
				if err != nil {
					return usageErr(fmt.Errorf("--run: %w", err))
				}
				opts.Filter = re
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			if chartPath == "" {
				chartPath = "callbox-bench.png"
				if writePath != "" {
					chartPath = filepath.Join(filepath.Dir(writePath), "performance.png")
				}
			}
			if goBench != "" {
				b, rerr := os.ReadFile(goBench)
				if rerr != nil {
					return usageErr(rerr)
				}
				opts.GoBench = string(b)
			}
			if xlaBench != "" {
				b, rerr := os.ReadFile(xlaBench)
				if rerr != nil {
					return usageErr(rerr)
				}
				opts.XLABench = string(b)
			}
			if exBench != "" {
				b, rerr := os.ReadFile(exBench)
				if rerr != nil {
					return usageErr(rerr)
				}
				opts.ElixirBench = string(b)
			}
			rep, err := bench.RunSuite(cmd.Context(), opts)
			if rep == nil {
				return err
			}
			if since > 0 {
				rep.MakeDuration = time.Since(time.Unix(since, 0))
			}
			out := cmd.OutOrStdout()
			rep.WriteText(out)
			var errs []error
			errs = append(errs, err)
			if cerr := rep.WriteChart(chartPath); cerr != nil {
				errs = append(errs, fmt.Errorf("chart: %w", cerr))
			} else {
				fmt.Fprintf(out, "\nchart: %s\n", chartPath)
			}
			if writePath != "" {
				if werr := writeReport(rep, writePath, chartPath); werr != nil {
					errs = append(errs, werr)
				} else {
					fmt.Fprintf(out, "report: %s\n", writePath)
				}
			}
			for _, r := range rep.Results {
				if r.Err != nil {
					errs = append(errs, r.Err)
				}
			}
			fmt.Fprintf(out, "took %s\n", rep.Duration.Round(time.Second))
			return errors.Join(errs...)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&benchTime, "benchtime", bench.DefaultBenchTime, "run time of one measurement (testing's -benchtime)")
	f.IntVar(&reps, "reps", bench.DefaultReps, "measurements per case, interleaved across variants; the report uses the median")
	f.StringVar(&filter, "run", "", "only the cases whose workload/variant id matches this regexp (e.g. 'scale-4MiB|tiny')")
	f.StringVar(&chartPath, "chart", "", "where to write the chart (.png, .svg or .pdf; default callbox-bench.png, or performance.png next to --write)")
	f.StringVar(&writePath, "write", "", "write the Markdown report here (e.g. docs/PERFORMANCE.md)")
	f.BoolVar(&noTargets, "no-targets", false, "run the table only, not the targets' own measurements")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	f.IntVar(&accuracyN, "accuracy-runs", 200, "runaway calls timed for the timeout-accuracy target")
	f.IntVar(&cacheReps, "cache-reps", 5, "warm-cache compiles timed for the module-cache target")
	f.StringVar(&targets, "targets", "", "only the targets' measurements whose name (instantiate, accuracy, cache, batch, user) matches this regexp")
	f.Int64Var(&since, "since", 0, "unix time the enclosing run (make bench) started, to report its duration")
	f.StringVar(&goBench, "go-bench", "", "a file of `go test -bench` output to include in the report")
	f.StringVar(&xlaBench, "xla-bench", "", "a Markdown file from python/bench_jax.py (callbox through XLA) to include in the report")
	f.StringVar(&exBench, "elixir-bench", "", "a file of make elixir-bench output (the NIF beside the C API) to include in the report and judge target 15 by")
	return cmd
}

// writeReport writes the Markdown report, linking the chart relative to it.
func writeReport(rep *bench.Report, path, chart string) error {
	rel, err := filepath.Rel(filepath.Dir(path), chart)
	if err != nil {
		rel = chart
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	werr := rep.WriteMarkdown(f, filepath.ToSlash(rel))
	return errors.Join(werr, f.Close())
}

// benchCommand is the command line that reproduces the run: the flags that
// change what is measured, and where the report goes.
func benchCommand(cmd *cobra.Command) string {
	args := []string{programName}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "since", "go-bench", "xla-bench", "elixir-bench", "quiet", "chart":
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return strings.Join(args, " ")
}
