package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is one problem with a configuration: where it is (the file and the
// key path, or the environment variable) and what is wrong.
type Error struct {
	// File is the configuration file, "" for a Config built in code and
	// for a problem in an environment variable.
	File string
	// Key is the key path, e.g. callbacks.scale.timeout, or the name of the
	// environment variable, e.g. CALLBOX_DEFAULTS_TIMEOUT.
	Key string
	// Err says what is wrong and what is allowed.
	Err error
}

// Error formats the problem as "file: key: what is wrong".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Validate checks a Config built in code with the rules Load applies to a
// file: limit bounds, engine, isolation and WASI values, callback names
// (valid, unique, distinct in the environment), a module for every
// callback, sha256 and signature syntax. Defaults are checked unless they
// are the zero Callback (unused). Unlike a file, a Config built in code may
// have a zero Timeout (no timeout), a relative Module and an empty Export
// (meaning Name). All problems are returned together, joined.
func (c *Config) Validate() error {
	fs := fields()
	var errs []error
	add := func(key string, err error) {
		errs = append(errs, &Error{File: c.File, Key: key, Err: err})
	}
	if c.Defaults != (Callback{}) {
		for _, f := range fs {
			if f.check != nil && !f.perCallback {
				if err := f.check(&c.Defaults); err != nil {
					add("defaults."+f.key, err)
				}
			}
		}
	}
	seen, names := map[string]string{}, map[string]bool{}
	for i := range c.Callbacks {
		cb := &c.Callbacks[i]
		path := callbackPath(cb.Name)
		if err := checkName(cb.Name); err != nil {
			path = "callbacks[" + strconv.Itoa(i) + "]"
			add(path, err)
		} else if err := envClash(cb.Name, seen); err != nil {
			add(path, err)
		}
		if names[cb.Name] {
			add(path, errors.New("duplicate callback name"))
		}
		names[cb.Name] = true
		for _, f := range fs {
			if f.check == nil {
				continue
			}
			if err := f.check(cb); err != nil {
				add(path+"."+f.key, err)
			}
		}
	}
	return errors.Join(errs...)
}

// callbackPath is the key path of a callback entry; a name that is not a
// valid name is quoted so that the path stays readable.
func callbackPath(name string) string {
	if checkName(name) == nil {
		return "callbacks." + name
	}
	return "callbacks." + strconv.Quote(name)
}

// suggest returns " (did you mean X?)" for the candidate closest to key,
// or "" when none is close.
func suggest(key string, candidates []string) string {
	if c, ok := closest(key, candidates); ok {
		return fmt.Sprintf(" (did you mean %s?)", c)
	}
	return ""
}

// closest finds the candidate nearest to key, ignoring case, if it is
// near enough to be a likely typo: one edit, two in a longer key, or a
// truncation.
func closest(key string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	k := strings.ToLower(key)
	for _, c := range candidates {
		d := editDistance(k, c)
		if len(k) >= 5 && strings.HasPrefix(c, k) {
			d = min(d, 1) // a truncated key: max_mem for max_memory
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > 2 || bestDist == 2 && len(k) < 6 {
		return "", false
	}
	return best, true
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of adjacent
// bytes (fule for fuel) each count one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
