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

// parseSize decodes a byte size: a string with a unit, such as "64MiB",
// "4 KB" or "100B", read by humanize.ParseBytes. A bare number, written as
// a number or as a string of digits, is refused: its unit would be a
// guess. Zero is zero in every unit and needs none.
func parseSize(v any) (uint64, error) {
	if isNumber(v) {
		return parseBareSize(numberText(v), v)
	}
	s, ok := v.(string)
	if !ok {
		return 0, wrongType(v, "")
	}
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	if looksNumeric(t) {
		return parseBareSize(t, s)
	}
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: use a number with a unit: B, KiB, MiB, GiB, KB, MB, GB", s)
	}
	return n, nil
}

// parseBareSize handles a size without a unit, text as written: zero, or
// an error suggesting units.
func parseBareSize(text string, v any) (uint64, error) {
	if !looksNumeric(text) { // NaN or infinity from a decoder
		return 0, fmt.Errorf("%s: not a finite number", text)
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil && f == 0 {
		return 0, nil
	}
	if strings.HasPrefix(text, "-") {
		return 0, fmt.Errorf("%v: must not be negative", v)
	}
	return 0, &noUnitError{fmt.Sprintf("%s has no unit; write %sMiB or %sKiB (or %sB for bytes)", text, text, text, text)}
}

// noUnitError is a size or duration written without a unit. Its message
// is complete (it suggests units), so key rules return it as it is.
type noUnitError struct{ msg string }

func (e *noUnitError) Error() string { return e.msg }

// numberText writes a decoded number as a user would: 1000000, not 1e+06.
func numberText(v any) string {
	switch f := v.(type) {
	case float64:
		return strconv.FormatFloat(f, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(f), 'f', -1, 32)
	}
	return fmt.Sprint(v)
}

// isNumber reports whether v is a decoded number.
func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}

// looksNumeric reports whether s is a plain decimal number with no unit:
// an optional sign, digits and at most one decimal point.
func looksNumeric(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "+"), "-")
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// wrongType is the error for a value of the wrong kind; allowed, when not
// empty, says what the key accepts.
func wrongType(v any, allowed string) error {
	if allowed == "" {
		return fmt.Errorf("got %s", Describe(v))
	}
	return fmt.Errorf("got %s (allowed: %s)", Describe(v), allowed)
}

// Describe names the kind of a value as a YAML, TOML or JSON decoder
// returns it, for error messages: "a string (\"x\")", "a list", "no value
// (null)".
func Describe(v any) string {
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
