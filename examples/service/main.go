// Command service is a Go service that runs callbox callbacks the way an
// operator would deploy it:
//
//   - its callbacks come from a config file (-config; environment
//     overrides such as CALLBOX_CALLBACKS_SCALE_TIMEOUT=2s apply), or, with
//     none, the prebuilt example modules;
//
//   - SIGHUP reloads the file (and the environment) without a restart:
//     unchanged callbacks keep their warm instances, calls in flight finish
//     on the version they started on, and a bad file is refused while the
//     old configuration keeps serving;
//
//   - every request carries a context deadline (-deadline) beside each
//     callback's own timeout, max_wait and fuel;
//
//   - its OpenTelemetry metrics are served to Prometheus on a real HTTP
//     listener: the host reports through the OpenTelemetry API
//     (host.WithMeterProvider), this program chooses the exporter.
//
//     cd examples/service && go run . -config callbox.yaml -addr 127.0.0.1:9464
//     curl -s 127.0.0.1:9464/metrics | grep '^callbox_'
//     kill -HUP <pid>      # after editing callbox.yaml
//
// It is its own Go module, so that the callbox library depends on the
// OpenTelemetry API alone, never on an SDK or an exporter.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/host"
)

func main() {
	// The service is its own worker for callbacks under isolation:
	// process (no callbox-worker executable to ship beside it).
	host.WorkerMain()
	addr := flag.String("addr", "127.0.0.1:9464", "where /metrics is served")
	workers := flag.Int("workers", 8, "goroutines calling callbacks")
	configPath := flag.String("config", "", "callbacks config file (YAML, TOML or JSON); SIGHUP reloads it")
	deadline := flag.Duration("deadline", 500*time.Millisecond, "each request's context deadline")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := Start(ctx, *addr, *configPath)
	if err != nil {
		log.Fatal(err)
	}
	srv.Deadline = *deadline
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go srv.ReloadOn(ctx, hup, func(err error) {
		if err != nil {
			log.Printf("reload refused, the old configuration keeps serving: %v", err)
		} else {
			log.Print("reloaded")
		}
	})
	log.Printf("metrics on http://%s/metrics; SIGHUP reloads %q; Ctrl-C stops", srv.Addr, *configPath)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := srv.Workload(ctx); err != nil && ctx.Err() == nil {
					log.Print(err)
				}
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	if err := srv.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Server is a callbox host with its metrics served over HTTP.
type Server struct {
	Addr     string        // the listener's address
	Host     *host.Host    // the callbacks
	Config   string        // the config file Reload reads; "" for the prebuilt examples
	Deadline time.Duration // each request's context deadline (0: none)
	provider *sdkmetric.MeterProvider
	http     *http.Server
}

// Start opens a host whose metrics go to a Prometheus registry served at
// http://addr/metrics (addr "127.0.0.1:0" picks a free port), with the
// callbacks of the config file at configPath, or, when it is "", the
// prebuilt example callbacks.
func Start(ctx context.Context, addr, configPath string) (*Server, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	var cfg *config.Config
	if configPath != "" {
		if cfg, err = configfile.Load(configPath); err != nil {
			return nil, err
		}
	}
	// Warnings and up: a failed call (rate-limited), a long wait; guest
	// log lines (tap_print's, on every call here) are info.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := host.New(ctx, cfg, host.WithMeterProvider(provider), host.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		if err := loadExamples(ctx, h); err != nil {
			return nil, errors.Join(err, h.Close(ctx))
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.Join(err, h.Close(ctx))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &Server{Addr: ln.Addr().String(), Host: h, Config: configPath, provider: provider,
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// loadExamples loads the example callbacks scale (Rust) and tap_print
// (AssemblyScript), prebuilt, with parallel batching and the fuel budget
// callbox.yaml gives them (fuel is metered, and counted, only where it is
// budgeted).
func loadExamples(ctx context.Context, h *host.Host) error {
	for _, m := range []struct{ name, lang string }{{"scale", "rust"}, {"tap_print", "assemblyscript"}} {
		wasm, err := prebuilt.Module(m.lang, m.name)
		if err != nil {
			return err
		}
		cb := config.DefaultCallback()
		cb.Name = m.name
		cb.Limits.Timeout = time.Second
		cb.Limits.Fuel = 50_000_000
		cb.Batching = config.BatchingParallel
		if err := h.LoadModule(ctx, cb, wasm); err != nil {
			return err
		}
	}
	return nil
}

// Reload loads the config file again, the environment's overrides
// included, and switches the host to it (host.Reload): a file that does
// not load, or a callback that does not, is refused whole and the old
// configuration keeps serving.
func (s *Server) Reload(ctx context.Context) error {
	if s.Config == "" {
		return errors.New("no config file to reload (start with -config)")
	}
	cfg, err := configfile.Load(s.Config)
	if err != nil {
		return err
	}
	_, err = s.Host.Reload(ctx, cfg)
	return err
}

// ReloadOn reloads once for each signal received on sigs (SIGHUP, in
// main), until ctx ends, reporting each outcome to done.
func (s *Server) ReloadOn(ctx context.Context, sigs <-chan os.Signal, done func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
			done(s.Reload(ctx))
		}
	}
}

// Workload makes one call each way the host offers, each request under the
// server's context deadline: a plain call, two calls on a chain, a tap, a
// batch of four, a session's call, and a call stepped through by hand (as
// the GPU path and the XLA handlers do).
func (s *Server) Workload(ctx context.Context) error {
	if s.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Deadline)
		defer cancel()
	}
	h := s.Host
	x := abi.From([]float32{1, 2, 3, 4})
	two := abi.Scalar[float32](2)
	if _, err := h.Invoke(ctx, "scale", x, two); err != nil {
		return fmt.Errorf("call: %w", err)
	}
	ch := h.NewChain("metrics-example")
	if _, err := ch.Invoke(ctx, "scale", x, two); err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	if _, err := ch.Invoke(ctx, "tap_print", x); err != nil {
		return fmt.Errorf("chain: %w", err)
	}
	h.Tap(ctx, "tap_print", x)
	if err := h.Barrier(ctx); err != nil {
		return fmt.Errorf("tap: %w", err)
	}
	batch, err := abi.New(abi.F32, 4, 4)
	if err != nil {
		return err
	}
	factors, err := abi.New(abi.F32, 4)
	if err != nil {
		return err
	}
	if _, err := h.Do(ctx, &host.Request{Callback: "scale", Inputs: []host.Tensor{batch, factors}, Batch: true}); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	sess, err := h.NewSession(ctx, "scale")
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	_, _, err = sess.Invoke(ctx, x, two)
	sess.Release(ctx)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return s.step(ctx, x, two)
}

// step is one call stepped through its phases.
func (s *Server) step(ctx context.Context, inputs ...abi.Tensor) error {
	cb, err := s.Host.Lookup("scale")
	if err != nil {
		return err
	}
	metas := make([]abi.TensorMeta, len(inputs))
	for i, in := range inputs {
		metas[i] = in.Meta()
	}
	plan, err := cb.Plan(metas)
	if err != nil {
		return err
	}
	call, err := cb.Start(ctx, plan)
	if err != nil {
		return err
	}
	defer call.Close(ctx)
	for i, in := range inputs {
		copy(call.Input(i), in.Data)
	}
	return call.Run(ctx)
}

// Close stops serving, closes the host and flushes the provider.
func (s *Server) Close(ctx context.Context) error {
	return errors.Join(s.http.Shutdown(ctx), s.Host.Close(ctx), s.provider.Shutdown(ctx))
}
