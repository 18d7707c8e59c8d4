package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// input is one raw value for a key, from the file or the environment.
type input struct {
	val any    // as decoded (file) or a string (environment)
	dir string // absolute base directory for relative paths
}

// Key is one callback setting as a configuration file spells it: its name,
// how a raw value decodes into a Callback, and the rule the decoded value
// must satisfy. Validate applies the same rules to a Config built in code,
// so a loader that decodes with Parse and checks with Check accepts exactly
// what Validate accepts.
type Key struct {
	// Name is the key as written in a file, e.g. "max_memory".
	Name string
	// PerCallback is set for keys that only a callback entry may set
	// (module, sha256, export, signature), never the defaults.
	PerCallback bool

	parse func(in input, cb *Callback) error
	check func(cb *Callback) error
}

// Parse decodes raw, a value as a YAML, TOML or JSON decoder returns it or
// an environment variable's string, into cb. Relative paths are resolved
// against dir, an absolute directory, or against the working directory
// when dir is "". Parse checks the form (type, unit, sign); range rules are
// left to Check.
func (k Key) Parse(raw any, dir string, cb *Callback) error {
	if k.parse == nil {
		return fmt.Errorf("unknown key %q (use a Key from Keys)", k.Name)
	}
	return k.parse(input{val: raw, dir: dir}, cb)
}

// Check applies the key's rule to the value cb holds, as Validate does.
func (k Key) Check(cb *Callback) error {
	if k.check == nil {
		return nil
	}
	return k.check(cb)
}

// Keys lists every callback key, in the order a configuration file
// documents them.
func Keys() []Key {
	return []Key{
		{Name: "module", PerCallback: true, parse: parseModule, check: checkModule},
		{Name: "sha256", PerCallback: true, parse: parseSHA256, check: checkSHA256},
		{Name: "export", PerCallback: true, parse: parseExport},
		{Name: "signature", PerCallback: true, parse: parseSignature, check: checkSignature},
		enumKey("engine", func(cb *Callback) *string { return &cb.Engine }, EngineWazero, EngineWasmtime),
		timeoutKey(),
		maxCPUKey(),
		sizeKey("max_memory", func(cb *Callback) *uint64 { return &cb.Limits.MaxMemory },
			sizeRule{lo: MinMemory, hi: MaxMemoryLimit, page: true}),
		fuelKey(),
		sizeKey("max_stack", func(cb *Callback) *uint64 { return &cb.Limits.MaxStack },
			sizeRule{lo: MinStack, hi: MaxStackLimit, zeroOK: true}),
		sizeKey("max_output", func(cb *Callback) *uint64 { return &cb.Limits.MaxOutput },
			sizeRule{lo: 1, hi: MaxOutputLimit}),
		sizeKey("max_error", func(cb *Callback) *uint64 { return &cb.Limits.MaxError },
			sizeRule{lo: 1, hi: MaxErrorLimit}),
		sizeKey("max_log", func(cb *Callback) *uint64 { return &cb.Limits.MaxLog },
			sizeRule{lo: 0, hi: MaxLogLimit}),
		maxWaitKey(),
		enumKey("isolation", func(cb *Callback) *string { return &cb.Isolation }, IsolationPooled, IsolationFresh, IsolationProcess, IsolationProcessFresh),
		maxInstancesKey(),
		enumKey("wasi", func(cb *Callback) *string { return &cb.WASI }, WASINone, WASIMinimal),
		batchingKey(),
		{Name: "deterministic", parse: parseDeterministic},
		{Name: "record_failures", parse: parseRecordFailures},
	}
}

// parseRecordFailures reads the record_failures key: a directory, made
// absolute against dir as module is, or "" for none.
func parseRecordFailures(in input, cb *Callback) error {
	s, err := asString(in.val, `a directory for replay bundles, or "" for none`)
	if err != nil || s == "" {
		cb.RecordFailures = ""
		return err
	}
	cb.RecordFailures, err = resolvePath(in.dir, s)
	return err
}

// parseDeterministic reads the deterministic key: true or false.
func parseDeterministic(in input, cb *Callback) error {
	switch v := in.val.(type) {
	case bool:
		cb.Deterministic = v
		return nil
	case string: // environment variables and quoted values
		switch strings.TrimSpace(v) {
		case "true":
			cb.Deterministic = true
			return nil
		case "false":
			cb.Deterministic = false
			return nil
		}
	}
	return fmt.Errorf("%v is not a boolean (allowed: true or false)", in.val)
}

// ParseCacheDir decodes the top-level cache_dir value: a directory path,
// made absolute against dir as in Key.Parse, or "" for no cache.
func ParseCacheDir(raw any, dir string) (string, error) {
	s, err := asString(raw, `a directory path, or "" for no cache`)
	if err != nil || s == "" {
		return "", err
	}
	return resolvePath(dir, s)
}

// ParseWorker reads the worker key: the path of the callbox-worker
// executable isolation: process starts, resolved against dir.
func ParseWorker(raw any, dir string) (string, error) {
	s, err := asString(raw, "a path to the callbox-worker executable")
	if err != nil || s == "" {
		return "", err
	}
	return resolvePath(dir, s)
}

// ParseWorkerUser reads the worker_user key: who a root host's workers run
// as, a user name, "UID" or "UID:GID" (not root; "" for the default,
// nobody). dir is unused (it is no path). Names are looked up when a
// worker starts.
func ParseWorkerUser(raw any, _ string) (string, error) {
	switch v := raw.(type) { // a bare UID, as YAML, TOML or JSON reads it
	case int:
		raw = strconv.Itoa(v)
	case int64:
		raw = strconv.FormatInt(v, 10)
	case uint64:
		raw = strconv.FormatUint(v, 10)
	case float64:
		if v == float64(int64(v)) {
			raw = strconv.FormatInt(int64(v), 10)
		}
	}
	s, err := asString(raw, "a user name, UID or UID:GID")
	if err != nil || s == "" {
		return "", err
	}
	uid, gid, numeric := strings.Cut(s, ":")
	if !numeric {
		if _, err := strconv.Atoi(s); err == nil {
			uid, numeric = s, true
		}
	}
	switch {
	case numeric:
		u, err1 := strconv.Atoi(uid)
		g, err2 := 0, error(nil)
		if gid != "" {
			g, err2 = strconv.Atoi(gid)
		}
		if err1 != nil || err2 != nil || u < 0 || g < 0 || strings.Count(s, ":") > 1 {
			return "", fmt.Errorf("%q: want a user name, UID or UID:GID", s)
		}
		if u == 0 {
			return "", fmt.Errorf("%q is root: workers run as an unprivileged user", s)
		}
	case s == "root":
		return "", fmt.Errorf("%q: workers run as an unprivileged user", s)
	case strings.ContainsAny(s, " \t\n/:"):
		return "", fmt.Errorf("%q: want a user name, UID or UID:GID", s)
	}
	return s, nil
}

// --- callback names ---

// checkName reports whether name is a valid callback name,
// [a-z][a-z0-9_-]*.
func checkName(name string) error {
	ok := name != "" && name[0] >= 'a' && name[0] <= 'z'
	for i := 1; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return nil
	}
	msg := fmt.Sprintf("bad callback name %q: names must match ^[a-z][a-z0-9_-]*$", name)
	if lower := strings.ToLower(name); lower != name && checkName(lower) == nil {
		msg += fmt.Sprintf(" (names are case-sensitive; did you mean %s?)", lower)
	}
	return errors.New(msg)
}

// EnvCallbacksPrefix starts the name of every environment variable that
// overrides a callback's key: CALLBOX_CALLBACKS_<NAME>_<KEY>.
const EnvCallbacksPrefix = "CALLBOX_CALLBACKS_"

// CallbackEnvPrefix is the prefix of a callback's environment variables:
// EnvCallbacksPrefix, the name upper-cased with '-' as '_', and '_', e.g.
// CALLBOX_CALLBACKS_MY_SCALE_ for my-scale.
func CallbackEnvPrefix(name string) string {
	return EnvCallbacksPrefix + envName(name) + "_"
}

// envName is the part of a callback's environment variables that names it:
// upper case, '-' replaced by '_'.
func envName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// CallbackNames checks callback names one at a time with the rules
// Validate applies to Config.Callbacks: each name matches
// ^[a-z][a-z0-9_-]*$, and no two different names share environment
// variables (my-scale and my_scale both map to CALLBOX_CALLBACKS_MY_SCALE_*).
// The zero value is ready to use.
type CallbackNames struct {
	byEnv map[string]string // envName -> the first name that used it
}

// Check reports whether name is valid and distinct, in the environment,
// from every name checked before it.
func (n *CallbackNames) Check(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if n.byEnv == nil {
		n.byEnv = map[string]string{}
	}
	e := envName(name)
	if other, ok := n.byEnv[e]; ok && other != name {
		return fmt.Errorf("callback names %s and %s both map to environment variables %s%s_*; rename one", other, name, EnvCallbacksPrefix, e)
	}
	n.byEnv[e] = name
	return nil
}

// CallbackPath is the key path of a callback entry in messages,
// callbacks.<name>; a name that is not valid is quoted so that the path
// stays readable.
func CallbackPath(name string) string {
	if checkName(name) == nil {
		return "callbacks." + name
	}
	return "callbacks." + strconv.Quote(name)
}

// --- strings and paths ---

func parseModule(in input, cb *Callback) error {
	s, err := asString(in.val, "a path to the .wasm module")
	if err != nil {
		return err
	}
	if s == "" {
		return errors.New("must not be empty (allowed: a path to the .wasm module)")
	}
	cb.Module, err = resolvePath(in.dir, s)
	return err
}

func checkModule(cb *Callback) error {
	if cb.Module == "" {
		return errors.New("required: the path of the callback's .wasm module")
	}
	return nil
}

func parseSHA256(in input, cb *Callback) error {
	s, err := asString(in.val, "64 hex digits, quoted")
	if err != nil {
		return err
	}
	cb.SHA256 = strings.ToLower(strings.TrimSpace(s))
	return nil
}

func checkSHA256(cb *Callback) error {
	s := cb.SHA256
	if s == "" {
		return nil
	}
	if len(s) != 64 {
		return fmt.Errorf("%q has %d characters (allowed: 64 hex digits)", s, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%q has %q at position %d (allowed: 64 lower-case hex digits)", s, c, i)
		}
	}
	return nil
}

func parseExport(in input, cb *Callback) error {
	s, err := asString(in.val, "the name of the module's export")
	if err != nil {
		return err
	}
	if s == "" {
		return errors.New("must not be empty (omit it to use the callback name)")
	}
	cb.Export = s
	return nil
}

func parseSignature(in input, cb *Callback) error {
	s, err := asString(in.val, `a signature, e.g. "(x: f32[n]) -> f32[n]"`)
	if err != nil {
		return err
	}
	cb.Signature = s
	return nil
}

func checkSignature(cb *Callback) error {
	if cb.Signature == "" {
		return nil
	}
	if _, err := abi.ParseSignature(cb.Signature); err != nil {
		return err
	}
	return nil
}

// resolvePath makes p absolute: against dir, an absolute directory, or
// against the working directory when dir is "" (environment values).
func resolvePath(dir, p string) (string, error) {
	switch {
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	case dir != "":
		return filepath.Join(dir, p), nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("cannot make %q absolute: %w", p, err)
	}
	return abs, nil
}

// --- enums ---

func enumKey(key string, get func(*Callback) *string, allowed ...string) Key {
	text := strings.Join(allowed, " or ")
	return Key{
		Name: key,
		parse: func(in input, cb *Callback) error {
			s, err := asString(in.val, text)
			if err != nil {
				return err
			}
			*get(cb) = s
			return nil
		},
		check: func(cb *Callback) error {
			v := *get(cb)
			for _, a := range allowed {
				if v == a {
					return nil
				}
			}
			return fmt.Errorf("bad %s %q (allowed: %s)", key, v, text)
		},
	}
}

// batchingKey is an enum whose zero value ("", from a Config built in
// code) means sequential.
func batchingKey() Key {
	f := enumKey("batching", func(cb *Callback) *string { return &cb.Batching }, BatchingSequential, BatchingExpandDims, BatchingBroadcastAll, BatchingParallel)
	check := f.check
	f.check = func(cb *Callback) error {
		if cb.Batching == "" {
			return nil
		}
		return check(cb)
	}
	return f
}

// --- durations ---

// timeoutAllowed describes a timeout in a file; a Config built in code may
// also have 0, no timeout.
const timeoutAllowed = "a duration with a unit, > 0 and at most 1h, e.g. 50ms"

func timeoutKey() Key {
	return durationKey("timeout", func(cb *Callback) *time.Duration { return &cb.Limits.Timeout })
}

// maxCPUKey is max_cpu: a duration up to MaxTimeout; 0 (the default) is
// none.
func maxCPUKey() Key {
	field := func(cb *Callback) *time.Duration { return &cb.Limits.MaxCPU }
	const allowed = "0 for none, or a duration with a unit up to 1h, e.g. 50ms"
	return Key{
		Name: "max_cpu",
		parse: func(in input, cb *Callback) error {
			d, err := parseDuration(in.val)
			if err != nil {
				return err
			}
			if d < 0 {
				return fmt.Errorf("%s: must be >= 0 (allowed: %s)", durationText(d), allowed)
			}
			*field(cb) = d
			return nil
		},
		check: func(cb *Callback) error {
			if d := *field(cb); d < 0 || d > MaxTimeout {
				return fmt.Errorf("%s is out of range (allowed: %s)", durationText(d), allowed)
			}
			return nil
		},
	}
}

// maxWaitKey is max_wait: a positive duration up to MaxTimeout.
func maxWaitKey() Key {
	return durationKey("max_wait", func(cb *Callback) *time.Duration { return &cb.Limits.MaxWait })
}

// durationKey is a duration a file sets > 0, up to MaxTimeout (a Config
// built in code may leave it 0: none).
func durationKey(name string, field func(*Callback) *time.Duration) Key {
	return Key{
		Name: name,
		parse: func(in input, cb *Callback) error {
			d, err := parseDuration(in.val)
			if err != nil {
				return err
			}
			if d <= 0 {
				return fmt.Errorf("%s: must be > 0 (allowed: %s)", durationText(d), timeoutAllowed)
			}
			*field(cb) = d
			return nil
		},
		check: func(cb *Callback) error {
			d := *field(cb)
			if d < 0 || d > MaxTimeout {
				return fmt.Errorf("%s is out of range (allowed: %s)", durationText(d), timeoutAllowed)
			}
			return nil
		},
	}
}

// parseDuration decodes a Go duration string such as "50ms" or "1m30s".
// A bare number, written as a number or as a string of digits, is refused:
// its unit would be a guess. Zero is zero in every unit and needs none.
func parseDuration(v any) (time.Duration, error) {
	if isNumber(v) {
		return parseBareDuration(numberText(v))
	}
	s, ok := v.(string)
	if !ok {
		return 0, wrongType(v, timeoutAllowed)
	}
	s = strings.TrimSpace(s)
	if looksNumeric(s) {
		return parseBareDuration(s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (allowed: %s; units ns, us, ms, s, m, h)", s, timeoutAllowed)
	}
	return d, nil
}

// parseBareDuration handles a duration without a unit, text as written:
// zero, or an error suggesting units.
func parseBareDuration(text string) (time.Duration, error) {
	if !looksNumeric(text) { // NaN or infinity from a decoder
		return 0, fmt.Errorf("%s: not a finite number (allowed: %s)", text, timeoutAllowed)
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil && f == 0 {
		return 0, nil
	}
	if strings.HasPrefix(text, "-") {
		return 0, fmt.Errorf("%s: must be > 0 (allowed: %s)", text, timeoutAllowed)
	}
	return 0, &noUnitError{fmt.Sprintf("%s has no unit; write %sms or %ss", text, text, text)}
}

// durationText formats d without zero minutes and seconds: 1h, not 1h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// --- sizes and integers ---

// sizeRule bounds a byte size: zero (when zeroOK) or within [lo, hi], and a
// whole number of wasm pages when page is set.
type sizeRule struct {
	lo, hi uint64
	zeroOK bool
	page   bool
}

func (r sizeRule) allowed() string {
	s := fmt.Sprintf("a size from %s to %s, e.g. 64MiB", FormatSize(r.lo), FormatSize(r.hi))
	if r.zeroOK {
		s = "0 (engine default) or " + s
	}
	if r.page {
		s += ", rounded up to whole 64KiB pages"
	}
	return s
}

func (r sizeRule) check(v uint64) error {
	if v == 0 && r.zeroOK {
		return nil
	}
	if v < r.lo || v > r.hi {
		return fmt.Errorf("%s is out of range (allowed: %s)", FormatSize(v), r.allowed())
	}
	if r.page && v%abi.PageSize != 0 {
		return fmt.Errorf("%d bytes is not a whole number of 64KiB pages (allowed: %s)", v, r.allowed())
	}
	return nil
}

// round rounds v up to whole pages when the rule asks for it; values past
// hi are left for check to report.
func (r sizeRule) round(v uint64) uint64 {
	if !r.page || v > r.hi {
		return v
	}
	return (v + abi.PageSize - 1) &^ (abi.PageSize - 1)
}

func sizeKey(key string, get func(*Callback) *uint64, r sizeRule) Key {
	return Key{
		Name: key,
		parse: func(in input, cb *Callback) error {
			n, err := parseSize(in.val)
			var noUnit *noUnitError
			if errors.As(err, &noUnit) {
				return err
			}
			if err != nil {
				return fmt.Errorf("%w (allowed: %s)", err, r.allowed())
			}
			*get(cb) = r.round(n)
			return nil
		},
		check: func(cb *Callback) error { return r.check(*get(cb)) },
	}
}

const fuelAllowed = "an integer from 0 (unlimited) to 1125899906842624"

func fuelKey() Key {
	return Key{
		Name: "fuel",
		parse: func(in input, cb *Callback) error {
			n, err := parseUint(in.val)
			if err != nil {
				return fmt.Errorf("%w (allowed: %s)", err, fuelAllowed)
			}
			cb.Limits.Fuel = n
			return nil
		},
		check: func(cb *Callback) error {
			if cb.Limits.Fuel > MaxFuel {
				return fmt.Errorf("%d is out of range (allowed: %s)", cb.Limits.Fuel, fuelAllowed)
			}
			return nil
		},
	}
}

const maxInstancesAllowed = "an integer from 1 to 1024"

func maxInstancesKey() Key {
	outOfRange := func(n any) error {
		return fmt.Errorf("%v is out of range (allowed: %s)", n, maxInstancesAllowed)
	}
	return Key{
		Name: "max_instances",
		parse: func(in input, cb *Callback) error {
			n, err := parseUint(in.val)
			if err != nil {
				return fmt.Errorf("%w (allowed: %s)", err, maxInstancesAllowed)
			}
			if n > math.MaxInt32 {
				return outOfRange(n)
			}
			cb.MaxInstances = int(n)
			return nil
		},
		check: func(cb *Callback) error {
			if cb.MaxInstances < 1 || cb.MaxInstances > MaxInstancesCap {
				return outOfRange(cb.MaxInstances)
			}
			return nil
		},
	}
}

// FormatSize formats n bytes exactly, in the largest binary unit that
// divides it: 65536 is "64KiB", 65537 is "65537B". It is the one byte
// formatting of callbox's messages and reports, and its text is a size the
// config reads back.
func FormatSize(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n != 0 && n%1024 == 0 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}
