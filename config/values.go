package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// The decoders below turn a raw value, as YAML, TOML or JSON decoded it or
// as an environment variable gave it (always a string), into a Go value.
// They reject what they cannot represent exactly; range rules live in
// rules.go.

// asString returns v if it is a string; allowed describes what the key
// accepts.
func asString(v any, allowed string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", wrongType(v, allowed+", as a string")
	}
	return s, nil
}

// parseUint decodes a non-negative integer: an integer, an integral float
// (JSON has no other numbers) or a decimal string.
func parseUint(v any) (uint64, error) {
	switch n := v.(type) {
	case int:
		return signedToUint(int64(n))
	case int8:
		return signedToUint(int64(n))
	case int16:
		return signedToUint(int64(n))
	case int32:
		return signedToUint(int64(n))
	case int64:
		return signedToUint(n)
	case uint:
		return uint64(n), nil
	case uint8:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint32:
		return uint64(n), nil
	case uint64:
		return n, nil
	case float32:
		return floatToUint(float64(n))
	case float64:
		return floatToUint(n)
	case string:
		return stringToUint(n)
	}
	return 0, wrongType(v, "")
}

func signedToUint(n int64) (uint64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%d: must not be negative", n)
	}
	return uint64(n), nil
}

func floatToUint(f float64) (uint64, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f):
		return 0, fmt.Errorf("%v: not an integer", f)
	case f < 0:
		return 0, fmt.Errorf("%v: must not be negative", f)
	case f >= math.MaxUint64:
		return 0, fmt.Errorf("%v: too large", f)
	}
	return uint64(f), nil
}

func stringToUint(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q: too large", s)
	}
	if err != nil {
		return 0, fmt.Errorf("bad integer %q", s)
	}
	return n, nil
}

// parseSize decodes a byte size: an integer number of bytes, or a string
// such as "64MiB", "4 KB" or "1048576" read by humanize.ParseBytes.
func parseSize(v any) (uint64, error) {
	s, ok := v.(string)
	if !ok {
		return parseUint(v)
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		return n, nil
	}
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: use bytes or a unit: B, KiB, MiB, GiB, KB, MB, GB", s)
	}
	return n, nil
}

// isNumber reports whether v is a decoded number.
func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}

// looksNumeric reports whether s is a number with no unit.
func looksNumeric(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// wrongType is the error for a value of the wrong kind; allowed, when not
// empty, says what the key accepts.
func wrongType(v any, allowed string) error {
	if allowed == "" {
		return fmt.Errorf("got %s", describe(v))
	}
	return fmt.Errorf("got %s (allowed: %s)", describe(v), allowed)
}

// describe names the kind of a decoded value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "no value (null)"
	case bool:
		return fmt.Sprintf("a boolean (%v)", x)
	case string:
		return fmt.Sprintf("a string (%q)", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a map"
	case time.Time:
		return "a date/time"
	}
	if isNumber(v) {
		return fmt.Sprintf("a number (%v)", v)
	}
	return fmt.Sprintf("a value of type %T", v)
}
