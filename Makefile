# callbox. The two commands that matter on a fresh machine:
#   make demo   the main job: run the shipped callbacks, contain a hostile one (needs only Go)
#   make test   install guest toolchains, build every guest from source, run all tests

GO ?= go
FUZZTIME ?= 20s

# Version numbers, read from their owners: the release (internal/release,
# `callbox version --short`) and the C API (ffi/include/callbox.h), whose
# major version is the library's soname.
VERSION := $(shell sed -n 's/^const Version = "\(.*\)"$$/\1/p' internal/release/release.go)
capi_part = $(shell sed -n 's/^\#define CALLBOX_VERSION_$(1) \([0-9]*\)$$/\1/p' ffi/include/callbox.h)
CAPI := $(call capi_part,MAJOR).$(call capi_part,MINOR).$(call capi_part,PATCH)
SONAME := libcallbox.so.$(call capi_part,MAJOR)

.PHONY: cli install install-test chaos nested-test demo test unit race guests toolchains bench lint fmt prebuilt check-prebuilt nocgo fuzz mutate cover-ffi soak cpu-soak security-doc clean lib pytest jaxenv foreign xla-check pydeps python-install wheelenv wheel sdist wheel-test dist dist-test pyinstall-test elixir-test elixir-bench

demo:
	$(GO) run ./cmd/callbox demo

test: guests lint nocgo unit nested-test race check-prebuilt fuzz pytest pyinstall-test wheel-test install-test dist-test elixir-test

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
	$(GO) test -count=1 -race ./abi/... ./host/... ./sandbox/... ./cuda/... ./lowering/... ./ffi/...

# The wazero-only build must keep working without cgo, and its
# validation (wazero's validator and callbox's reader, no wasmtime) must
# still refuse every invalid module of the spec suite.
nocgo:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./sandbox/... ./host/... ./cuda/
	CGO_ENABLED=0 $(GO) test -count=1 ./sandbox/internal/validate/ ./sandbox/internal/spectest/

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

# libcallbox: the C ABI (ffi/) as build/libcallbox.so, its hand-written
# header as build/callbox.h and the worker of isolation: process as
# build/callbox-worker, by ffi/build.sh (the one recipe, which the Python
# package's build and make dist run too; it says what each file is). The
# library's soname is libcallbox.so.MAJOR, the C API's major version.
lib:
	GO=$(GO) ffi/build.sh build

# The CLI, which is also its own worker (host.WorkerMain): one binary.
cli:
	@mkdir -p bin
	$(GO) build -o bin/callbox ./cmd/callbox

# Install for C programs and operators, under PREFIX (DESTDIR for staging):
#   PREFIX/lib/libcallbox.so.$(CAPI), with the links $(SONAME) and libcallbox.so
#   PREFIX/include/callbox.h
#   PREFIX/lib/pkgconfig/callbox.pc     (cc main.c $$(pkg-config --cflags --libs callbox))
#   PREFIX/libexec/callbox/callbox-worker (isolation: process; the library looks there)
#   PREFIX/bin/callbox                  (the CLI)
# scripts/install-test.sh (make install-test, part of make test) installs
# into a temporary prefix and builds and runs the README's C program with
# pkg-config alone.
PREFIX ?= /usr/local
install: lib cli
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/libexec/callbox $(DESTDIR)$(PREFIX)/bin
	install -m 755 build/libcallbox.so $(DESTDIR)$(PREFIX)/lib/libcallbox.so.$(CAPI)
	ln -sf libcallbox.so.$(CAPI) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libcallbox.so
	install -m 644 ffi/include/callbox.h $(DESTDIR)$(PREFIX)/include/callbox.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@CAPI@|$(CAPI)|' -e 's|@VERSION@|$(VERSION)|' ffi/callbox.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/callbox.pc
	install -m 755 build/callbox-worker $(DESTDIR)$(PREFIX)/libexec/callbox/callbox-worker
	install -m 755 bin/callbox $(DESTDIR)$(PREFIX)/bin/callbox

install-test: lib cli
	scripts/install-test.sh

# Install the package into PYTHON's environment (an activated virtual
# environment's python3 by default), offline: no build isolation
# (setuptools and wheel are Debian's, python3-setuptools and
# python3-wheel) and no package index; its build runs ffi/build.sh (Go, a
# C compiler, the Go module cache). See python/README.md.
PYTHON ?= python3
python-install:
	$(PYTHON) -m pip install --no-build-isolation --no-index ./python

# The package as a manylinux wheel in dist/ (scripts/wheel.sh: the tag is
# the policy auditwheel measures the library's symbols to allow), and as an
# sdist that carries the Go sources its build needs (setup.py).
WHEELENV := build/venv/wheel
wheelenv:
	scripts/jax-env.sh python/requirements-wheel.txt $(WHEELENV) "build auditwheel"
wheel: lib wheelenv
	scripts/wheel.sh $(CURDIR)/$(WHEELENV)/bin/python dist
sdist: wheelenv
	PIP_CONFIG_FILE=/dev/null $(WHEELENV)/bin/python -m build --sdist --outdir dist python

# The wheel as a user installs it: plain pip, into a fresh venv of the
# python3 first on PATH (not Debian's), beside the newest JAX the index
# serves, a jitted program run from outside the repository; then `pip
# install ./python` of a clean copy of the repository, and of the sdist,
# with no make (scripts/wheel-test.sh).
wheel-test: wheel
	scripts/wheel-test.sh dist

# Release files in dist/, versioned, with SHA256SUMS (scripts/dist.sh
# says what each holds); dist-test unpacks them in an empty directory and
# runs the demo, the CLI alone under isolation: process, and a C program
# built with pkg-config (scripts/dist-test.sh).
dist: wheel sdist
	GO=$(GO) MAKE=$(MAKE) scripts/dist.sh dist
dist-test: dist
	scripts/dist-test.sh dist

# The README's offline install (Debian's python3, no index, no build
# isolation) from a clean venv outside the repository, then a call from
# outside it with no CALLBOX_LIB (scripts/pyinstall-test.sh).
pyinstall-test:
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
