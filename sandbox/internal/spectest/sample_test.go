package spectest

import "github.com/seed4b3e0ccb/callbox/internal/testing/wasmspec"

// sample is every script, or under the race detector (which slows the
// suite about threefold and has nothing concurrent to watch in it) every
// fourth: make test runs the whole suite once without it.
func sample(s []*wasmspec.Script) []*wasmspec.Script {
	if !raceEnabled {
		return s
	}
	var out []*wasmspec.Script
	for i := 0; i < len(s); i += 4 {
		out = append(out, s[i])
	}
	return out
}
