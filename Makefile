# callbox. The two commands that matter on a fresh machine:
#   make demo   the main job: run the shipped callbacks, contain a hostile one (needs only Go)
#   make test   install guest toolchains, build every guest from source, run all tests

GO ?= go
FUZZTIME ?= 20s

.PHONY: chaos nested-test demo test unit race guests toolchains bench lint fmt prebuilt check-prebuilt nocgo fuzz mutate cover-ffi soak cpu-soak security-doc clean lib pytest jaxenv foreign xla-check pydeps python-lib python-install python-wheel pyinstall-test elixir-test elixir-bench

demo:
	$(GO) run ./cmd/callbox demo

test: guests lint nocgo unit nested-test race check-prebuilt fuzz pytest pyinstall-test elixir-test

# The Go modules of their own, whose dependencies stay out of the
# library's go.mod: the metrics example (an OpenTelemetry SDK and the
# Prometheus exporter; tested with the race detector) and the benchmark
# suite (the Extism SDK, gonum/plot).
nested-test:
	cd examples/service && $(GO) vet ./... && $(GO) test -count=1 -race ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

unit:
	$(GO) test -count=1 ./...

# The race detector on the concurrent parts: host (pools, chains, taps),
# the engines, the FFI bridge, and the GPU path (concurrent streams, on
# the fake device).
race:
	$(GO) test -count=1 -race ./abi/... ./host/... ./internal/sandbox/... ./cuda/... ./lowering/... ./ffi/...

# The wazero-only build must keep working without cgo, and its
# validation (wazero's validator and callbox's reader, no wasmtime) must
# still refuse every invalid module of the spec suite.
nocgo:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./internal/sandbox/... ./host/... ./cuda/
	CGO_ENABLED=0 $(GO) test -count=1 ./internal/sandbox/internal/validate/ ./internal/sandbox/internal/spectest/

toolchains:
	scripts/install-toolchains.sh

guests: toolchains
	guests/build.sh

# Copy freshly built demo modules into guests/prebuilt (commit the result).
prebuilt: guests
	scripts/prebuilt.sh update

check-prebuilt:
	scripts/prebuilt.sh check

# Bounded runs of every fuzz target (longer locally: make fuzz FUZZTIME=5m).
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

# Mutation testing of the rule-owning packages (scripts/mutate.sh, go-gremlins
# at a pinned version in build/tools); slow, so not part of `make test`:
# make mutate MUTATE_PKGS=./abi for one package. Scores: docs/TESTING.md.
mutate:
	scripts/mutate.sh $(MUTATE_PKGS)

# The ffi package's coverage with the library's inside the C harness's,
# the foreign program's and Python's processes (docs/TESTING.md). Slow
# (the ffi suite again), so not part of `make test`.
cover-ffi: guests
	scripts/cover-ffi.sh

# The soak: 100,000 mixed healthy and hostile calls on one host, printing
# RSS, goroutines and live instances every 10,000 and asserting they stay
# flat (a tagged test, not in the default suite). SOAK_DOC=1 rewrites the
# soak section of docs/SECURITY.md from the run.
soak:
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 20m ./host/ $(if $(SOAK_DOC),-args -security-doc)

# Workers killed under load, at full size: 60 s, 8 processes burning CPU,
# a worker killed every ~100 ms while callers check every result and one
# caller ends its own calls with short deadlines (TestProcessChaos; make
# test runs it for 4 s with 2 burners).
chaos:
	CALLBOX_CHAOS=60s CALLBOX_CHAOS_BURNERS=8 $(GO) test -count=1 -run '^TestProcessChaos$$' -v -timeout 15m ./host/

# max_cpu under load: 100,000 healthy calls held to max_cpu 2ms while 8
# other processes spin, on both engines; none may fail (a tagged test: it
# keeps the machine busy for about 20 s).
cpu-soak:
	$(GO) test -tags soak -count=1 -run '^TestSoakMaxCPU$$' -v -timeout 15m ./host/

# Rewrite the hostile-case table of docs/SECURITY.md from a run of the
# hostile suite (every normal test run checks the committed table).
security-doc:
	$(GO) test -count=1 -run '^TestHostile$$' ./host/ -args -security-doc

# The host and FFI micro-benchmarks, then the side-by-side suite (bench/, callbox-bench),
# which rewrites docs/PERFORMANCE.md and docs/performance.png from this run.
# About 6 minutes on the 2-core development machine (see the report).
bench: toolchains lib jaxenv
	@mkdir -p bin build/testguests
	wat2wasm ffi/testdata/kit.wat -o build/testguests/kit.wasm
	$(GO) test -run '^$$' -bench . -benchtime 1s ./lowering/ > bin/bench-lowering.txt; status=$$?; cat bin/bench-lowering.txt; exit $$status
	@start=$$(date +%s); \
	$(GO) test -run '^$$' -bench . -benchtime 200ms ./host/ ./ffi/ > bin/bench-host.txt; status=$$?; \
	[ $$status -eq 0 ] && { (cd examples/service && $(GO) test -run '^$$' -bench . -benchtime 500ms .) >> bin/bench-host.txt; status=$$?; }; \
	cat bin/bench-host.txt; [ $$status -eq 0 ] || exit $$status; \
	CALLBOX_LIB=$(CURDIR)/build/libcallbox.so JAX_PLATFORMS=cpu $(JAXENV)/bin/python python/bench_jax.py --markdown bin/bench-xla.md --json bin/bench-xla.json || exit $$?; \
	$(MAKE) --no-print-directory -s elixir-bench > bin/bench-elixir.txt; status=$$?; cat bin/bench-elixir.txt; [ $$status -eq 0 ] || exit $$status; \
	cd bench && $(GO) run ./cmd/callbox-bench --write ../docs/PERFORMANCE.md --go-bench ../bin/bench-host.txt --xla-bench ../bin/bench-xla.md --elixir-bench ../bin/bench-elixir.txt --since $$start

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags soak ./host/

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf guests/build bin build dist python/build python/callbox.egg-info python/callbox/libcallbox.so python/callbox/callbox.h python/callbox/callbox-worker
	rm -rf elixir/_build

# libcallbox: the C ABI (ffi/) as build/libcallbox.so, with its hand-written
# header ffi/include/callbox.h installed beside it as build/callbox.h (the
# header cgo generates is not the contract and is removed). It exports the
# C API and nothing else (ffi/libcallbox.map): the Go runtime's, wasmtime's
# and our glue's symbols stay local to it.
#
# build/callbox-worker beside it is the worker process of isolation:
# process (cmd/callbox-worker), which the library looks for beside itself.
lib:
	@mkdir -p build
	$(GO) build -buildmode=c-shared -ldflags="-extldflags=-Wl,--version-script=$(CURDIR)/ffi/libcallbox.map" -o build/libcallbox.so ./ffi
	$(GO) build -ldflags="-s -w" -o build/callbox-worker ./cmd/callbox-worker
	@rm -f build/libcallbox.h
	cp ffi/include/callbox.h build/callbox.h

# The Python package with the library inside it: build/libcallbox.so and
# its header copied into python/callbox/, where the package looks first
# (after CALLBOX_LIB) and which its package data ships, so that
# `pip install ./python` installs a package that needs no CALLBOX_LIB.
python-lib: lib
	cp build/libcallbox.so build/callbox.h build/callbox-worker python/callbox/

# Install the package, library inside, into PYTHON's environment (an
# activated virtual environment's python3 by default), offline: no build
# isolation (setuptools and wheel are Debian's, python3-setuptools and
# python3-wheel) and no package index. See python/README.md.
PYTHON ?= python3
python-install: python-lib
	$(PYTHON) -m pip install --no-build-isolation --no-index ./python

# The same package as a wheel in dist/ (py3-none-<platform>: it carries the
# native library), for `pip install --no-index dist/callbox-*.whl` in any
# environment that has NumPy.
python-wheel: python-lib
	$(PYTHON) -m pip wheel --no-build-isolation --no-index --no-deps -w dist ./python

# The README's offline install from a clean venv outside the repository,
# then a call from outside it with no CALLBOX_LIB (scripts/pyinstall-test.sh).
pyinstall-test: python-lib
	scripts/pyinstall-test.sh

# For machines without Go (the lent GPU machines, scripts/device-check.sh):
# in build/xla-check the StableHLO that `callbox lower` emits for every
# example program beside `callbox exec`'s results, which
# scripts/xla_check_lowering.py (and test_jax.py) compile and run under
# jaxlib and compare. The CLI goes to bin/, not build/: build/ is what is
# carried to such a machine, within 64 MiB (the library alone is ~36 MiB).
xla-check: lib
	@mkdir -p bin
	$(GO) build -o bin/callbox ./cmd/callbox
	$(GO) build -o bin/callbox-worker ./cmd/callbox-worker
	/usr/bin/python3 scripts/xla_check_lowering.py --callbox bin/callbox --prepare build/xla-check

# A copy of Debian's pytest (pure Python, with its dependencies) in
# build/pydeps, for a machine whose Python has no pytest: device-check.sh
# falls back to it, appended to sys.path so it shadows nothing installed.
PYDEPS := _pytest pytest py pluggy iniconfig packaging attr attrs
pydeps:
	@mkdir -p build/pydeps
	for m in $(PYDEPS); do rm -rf build/pydeps/$$m; cp -r /usr/lib/python3/dist-packages/$$m build/pydeps/; done
	find build/pydeps -name __pycache__ -prune -exec rm -rf {} +

# The Python test environments (scripts/jax-env.sh): the pinned JAX
# (python/requirements-jax.txt) and the oldest one callbox supports
# (python/requirements-jax-oldest.txt), each a virtual environment under
# build/venv, made again only when its requirements file changes.
JAXENV := build/venv/jax
JAXENV_OLDEST := build/venv/jax-oldest
jaxenv:
	scripts/jax-env.sh python/requirements-jax.txt $(JAXENV)
	scripts/jax-env.sh python/requirements-jax-oldest.txt $(JAXENV_OLDEST)

# The Python package's tests (python/tests) against a fresh build/libcallbox.so,
# every one of them under the pinned JAX on the CPU backend (four CPU devices,
# conftest.py), the JAX ones (the lowered programs and the two-process test
# among them) under the oldest supported JAX too. CALLBOX_NO_SKIP: a skipped
# test, or a JAX that does not import, fails the run; each run prints how
# many JAX tests ran. The GPU file runs on a GPU machine (scripts/device-check.sh).
# The C harness runs in `go test ./ffi` (part of unit).
PYTEST_JAX := tests/test_jax.py tests/test_jax_programs.py tests/test_jax_distributed.py
pytest: lib xla-check pydeps jaxenv
	cd python && CALLBOX_LIB=$(CURDIR)/build/libcallbox.so CALLBOX_NO_SKIP=1 $(CURDIR)/$(JAXENV)/bin/python -m pytest -q -rs --ignore=tests/test_jax_gpu.py
	cd python && CALLBOX_LIB=$(CURDIR)/build/libcallbox.so CALLBOX_NO_SKIP=1 $(CURDIR)/$(JAXENV_OLDEST)/bin/python -m pytest -q -rs $(PYTEST_JAX)

# The whole hostile suite inside foreign processes (a C program with its own
# signal handlers, and python3 through the callbox package), on both engines
# from 4 threads, printing RSS and thread counts per pass. Part of unit; this
# target runs only it, verbosely. See docs/SECURITY.md.
foreign:
	$(GO) test -count=1 -v -run '^TestHostileForeign' ./ffi/

# The Elixir binding (elixir/, see elixir/README.md): Debian's Elixir 1.14 and
# Erlang/OTP 25 from scripts/install-toolchains.sh, the NIF built by the
# package's own mix compiler (cc against erl_nif.h and callbox.h; no Hex),
# then `mix test` offline against build/libcallbox.so. MIX_HOME stays in
# build/, so mix neither reads nor writes ~/.mix. bin/callbox is the Go API's
# CLI that the test of a script outside the repository compares with.
ELIXIR_ENV = MIX_HOME=$(CURDIR)/build/mix HEX_OFFLINE=1 MIX_ENV=test CALLBOX_LOG_LEVEL=error
elixir-test: toolchains lib
	@mkdir -p bin
	$(GO) build -o bin/callbox ./cmd/callbox
	$(GO) build -o bin/callbox-worker ./cmd/callbox-worker
	cd elixir && $(ELIXIR_ENV) mix test --no-deps-check

# A 1 KiB call (f32[256], kit.wasm's copy) through the NIF (:timer.tc over
# 10,000 calls) beside the C API (ffi/testdata/bench.c, callbox_call and
# callbox_call_async), on both engines.
# ELIXIR_BENCH_ERL passes VM flags (e.g. +sssdcpu 1024: see elixir/README.md).
ELIXIR_BENCH_ERL ?=
elixir-bench: lib
	@mkdir -p build/elixir-bench
	wat2wasm ffi/testdata/kit.wat -o build/elixir-bench/kit.wasm
	printf 'callbacks:\n  copy_f32:\n    module: kit.wasm\n    export: copy\n    signature: "(x: f32[n]) -> f32[n]"\n  copy_f32_wasmtime:\n    module: kit.wasm\n    export: copy\n    signature: "(x: f32[n]) -> f32[n]"\n    engine: wasmtime\n  spin:\n    module: kit.wasm\n    export: spin\n    signature: "(x: f32[n]) -> f32[n]"\n    timeout: 250ms\n' > build/elixir-bench/callbox.yaml
	cc -O2 -o build/elixir-bench/cbench ffi/testdata/bench.c -Ibuild -Lbuild -lcallbox -Wl,-rpath,$(CURDIR)/build
	@for cb in copy_f32 copy_f32_wasmtime; do for m in capi within async; do printf "C API %s %s 1KiB " $$m $$cb; CALLBOX_LOG_LEVEL=error build/elixir-bench/cbench build/elixir-bench/callbox.yaml $$m $$cb 256 50000; done; done
	cd elixir && MIX_HOME=$(CURDIR)/build/mix HEX_OFFLINE=1 MIX_ENV=prod CALLBOX_LOG_LEVEL=error ELIXIR_ERL_OPTIONS="$(ELIXIR_BENCH_ERL)" mix run bench/call_bench.exs $(CURDIR)/build/elixir-bench/callbox.yaml
