package config

import (
	"errors"
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

// Validate checks a Config built in code with the rules configfile.Load
// applies to a file: limit bounds, engine, isolation and WASI values,
// callback names (valid, unique, distinct in the environment), a module for
// every callback, sha256 and signature syntax, and the same for every
// modules entry (names, a module, its keys and its per-callback
// overrides). Defaults are checked unless they are the zero Callback
// (unused). Unlike a file, a Config built in code may
// have a zero Timeout (no timeout), a relative Module and an empty Export
// (meaning Name). All problems are returned together, joined.
func (c *Config) Validate() error {
	keys := Keys()
	var errs []error
	add := func(key string, err error) {
		errs = append(errs, &Error{File: c.File, Key: key, Err: err})
	}
	if c.Defaults != (Callback{}) {
		for _, k := range keys {
			if k.PerCallback {
				continue
			}
			if err := k.Check(&c.Defaults); err != nil {
				add("defaults."+k.Name, err)
			}
		}
	}
	var names CallbackNames
	seen := map[string]bool{}
	for i := range c.Callbacks {
		cb := &c.Callbacks[i]
		path := CallbackPath(cb.Name)
		if err := names.Check(cb.Name); err != nil {
			if checkName(cb.Name) != nil {
				path = "callbacks[" + strconv.Itoa(i) + "]"
			}
			add(path, err)
		}
		if seen[cb.Name] {
			add(path, errors.New("duplicate callback name"))
		}
		seen[cb.Name] = true
		for _, k := range keys {
			if err := k.Check(cb); err != nil {
				add(path+"."+k.Name, err)
			}
		}
	}
	c.validateModules(add)
	return errors.Join(errs...)
}
