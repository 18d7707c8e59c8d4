//go:build linux

package host_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// BenchmarkProcessBell is the worker doorbell (sandbox/internal/procwall,
// bell.go) against the socket exchange it replaced (CALLBOX_PROCESS_BELL=
// off), on one host each, in alternating blocks: 1 KiB calls of scale
// under isolation: process from 1 caller, from as many callers as cores,
// and from twice as many (more callers than cores, each with an instance
// of its own): one, cores and crowd. It reports, for each, the calls/s of
// the doorbell over the socket's (speedup), the wall time per call, and
// the CPU both processes burn per call, the host's and its workers'
// (cpu-us). One iteration is the
// whole measurement.
func BenchmarkProcessBell(b *testing.B) {
	cores := max(2, runtime.NumCPU())
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			var hosts [2]*host.Host // bell, socket
			for k := range hosts {
				if k == 1 {
					b.Setenv("CALLBOX_PROCESS_BELL", "off")
				}
				ctx := context.Background()
				h, err := host.New(ctx, nil, host.WithWorker(workerPath(b, false)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = h.Close(ctx) })
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "scale", "scale", testkitSigs["scale"], engine, config.IsolationProcess
				cb.Limits.Timeout = 10 * time.Second
				cb.MaxInstances = 2 * cores
				if err := h.LoadModule(ctx, cb, testkitWasm(b)); err != nil {
					b.Fatal(err)
				}
				hosts[k] = h
				os.Unsetenv("CALLBOX_PROCESS_BELL")
			}
			run := func(h *host.Host, callers, calls int) (time.Duration, time.Duration) {
				cpu0 := cpuOfSelfAndChildren()
				t0 := time.Now()
				var wg sync.WaitGroup
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						x, f, out := abi.From(make([]float32, 256)), abi.Scalar[float32](2), abi.From(make([]float32, 256))
						for range calls {
							if _, err := h.Do(context.Background(), &host.Request{Callback: "scale", Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{out}}); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				return time.Since(t0), cpuOfSelfAndChildren() - cpu0
			}
			for _, h := range hosts {
				run(h, 2*cores, 200) // every instance made
			}
			for _, load := range []struct {
				tag     string
				callers int
			}{{"one", 1}, {"cores", cores}, {"crowd", 2 * cores}} {
				callers := load.callers
				var wall, cpu [2]time.Duration
				const calls = 2000
				for range 5 * b.N {
					for k, h := range hosts {
						w, c := run(h, callers, calls/callers)
						wall[k] += w
						cpu[k] += c
					}
				}
				n := float64(5 * b.N * (calls / callers) * callers)
				tag := load.tag
				b.ReportMetric(float64(wall[1])/float64(wall[0]), tag+"-speedup")
				b.ReportMetric(float64(wall[0].Nanoseconds())/n, tag+"-bell-ns/call")
				b.ReportMetric(float64(wall[1].Nanoseconds())/n, tag+"-socket-ns/call")
				b.ReportMetric(float64(cpu[0].Microseconds())/n, tag+"-bell-cpu-us")
				b.ReportMetric(float64(cpu[1].Microseconds())/n, tag+"-socket-cpu-us")
			}
		})
	}
}

// cpuOfSelfAndChildren is the CPU time this process and its live child
// processes (the workers) have used.
func cpuOfSelfAndChildren() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, pid := range strings.Fields(string(b)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			s := string(stat)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				total += time.Duration(u+k) * time.Second / 100 // clock ticks (USER_HZ 100)
			}
		}
	}
	return total
}
