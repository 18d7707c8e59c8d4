package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// input is one raw value for a key, from the file or the environment.
type input struct {
	val any    // as decoded (file) or a string (environment)
	dir string // absolute base directory for relative paths
}

// field is one Callback key: how to decode a raw value into a Callback and
// the rule the decoded value must satisfy. check is shared by Load and
// Validate, so both apply the same rules.
type field struct {
	key         string
	perCallback bool // only in a callback entry, never in defaults
	parse       func(in input, cb *Callback) error
	check       func(cb *Callback) error
}

// fields lists every Callback key in file order.
func fields() []field {
	return []field{
		{key: "module", perCallback: true, parse: parseModule, check: checkModule},
		{key: "sha256", perCallback: true, parse: parseSHA256, check: checkSHA256},
		{key: "export", perCallback: true, parse: parseExport},
		{key: "signature", perCallback: true, parse: parseSignature, check: checkSignature},
		enumField("engine", func(cb *Callback) *string { return &cb.Engine }, EngineWazero, EngineWasmtime),
		timeoutField(),
		sizeField("max_memory", func(cb *Callback) *uint64 { return &cb.Limits.MaxMemory },
			sizeRule{lo: MinMemory, hi: MaxMemoryLimit, page: true}),
		fuelField(),
		sizeField("max_stack", func(cb *Callback) *uint64 { return &cb.Limits.MaxStack },
			sizeRule{lo: MinStack, hi: MaxStackLimit, zeroOK: true}),
		sizeField("max_output", func(cb *Callback) *uint64 { return &cb.Limits.MaxOutput },
			sizeRule{lo: 1, hi: MaxOutputLimit}),
		sizeField("max_error", func(cb *Callback) *uint64 { return &cb.Limits.MaxError },
			sizeRule{lo: 1, hi: MaxErrorLimit}),
		sizeField("max_log", func(cb *Callback) *uint64 { return &cb.Limits.MaxLog },
			sizeRule{lo: 0, hi: MaxLogLimit}),
		enumField("isolation", func(cb *Callback) *string { return &cb.Isolation }, IsolationPooled, IsolationFresh),
		maxInstancesField(),
		enumField("wasi", func(cb *Callback) *string { return &cb.WASI }, WASINone, WASIMinimal),
		batchingField(),
	}
}

// keyNames returns the keys of fs, optionally leaving out per-callback ones.
func keyNames(fs []field, withPerCallback bool) []string {
	var names []string
	for _, f := range fs {
		if withPerCallback || !f.perCallback {
			names = append(names, f.key)
		}
	}
	return names
}

// fieldByKey finds the field named key.
func fieldByKey(fs []field, key string) (field, bool) {
	for _, f := range fs {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
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

// envName is the part of a callback's environment variables that names it:
// upper case, '-' replaced by '_'.
func envName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envClash reports a name whose environment variables would collide with
// an earlier name's; seen maps envName to the first name that used it.
func envClash(name string, seen map[string]string) error {
	e := envName(name)
	if other, ok := seen[e]; ok && other != name {
		return fmt.Errorf("callback names %s and %s both map to environment variables %s%s_*; rename one", other, name, envCallbacksPrefix, e)
	}
	seen[e] = name
	return nil
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

func enumField(key string, get func(*Callback) *string, allowed ...string) field {
	text := strings.Join(allowed, " or ")
	return field{
		key: key,
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

// batchingField is an enum whose zero value ("", from a Config built in
// code) means sequential.
func batchingField() field {
	f := enumField("batching", func(cb *Callback) *string { return &cb.Batching }, BatchingSequential, BatchingExpandDims, BatchingBroadcastAll)
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

func timeoutField() field {
	return field{
		key: "timeout",
		parse: func(in input, cb *Callback) error {
			d, err := parseDuration(in.val)
			if err != nil {
				return err
			}
			if d <= 0 {
				return fmt.Errorf("%s: must be > 0 (allowed: %s)", durationText(d), timeoutAllowed)
			}
			cb.Limits.Timeout = d
			return nil
		},
		check: func(cb *Callback) error {
			d := cb.Limits.Timeout
			if d < 0 || d > MaxTimeout {
				return fmt.Errorf("%s is out of range (allowed: %s)", durationText(d), timeoutAllowed)
			}
			return nil
		},
	}
}

// parseDuration decodes a Go duration string; bare numbers are refused
// because their unit would be a guess.
func parseDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		if isNumber(v) {
			return 0, fmt.Errorf("bare number %v: use a unit, e.g. 50ms", v)
		}
		return 0, wrongType(v, timeoutAllowed)
	}
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if looksNumeric(s) {
		return 0, fmt.Errorf("bare number %q: use a unit, e.g. 50ms", s)
	}
	return 0, fmt.Errorf("bad duration %q (allowed: %s; units ns, us, ms, s, m, h)", s, timeoutAllowed)
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
	s := fmt.Sprintf("a size from %s to %s, e.g. 64MiB", sizeText(r.lo), sizeText(r.hi))
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
		return fmt.Errorf("%s is out of range (allowed: %s)", sizeText(v), r.allowed())
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

func sizeField(key string, get func(*Callback) *uint64, r sizeRule) field {
	return field{
		key: key,
		parse: func(in input, cb *Callback) error {
			n, err := parseSize(in.val)
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

func fuelField() field {
	return field{
		key: "fuel",
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

func maxInstancesField() field {
	outOfRange := func(n any) error {
		return fmt.Errorf("%v is out of range (allowed: %s)", n, maxInstancesAllowed)
	}
	return field{
		key: "max_instances",
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

// sizeText formats n bytes exactly, in the largest binary unit that
// divides it: 65536 is "64KiB", 65537 is "65537B".
func sizeText(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n != 0 && n%1024 == 0 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}
