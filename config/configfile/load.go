// Package configfile loads a callbox configuration from a YAML, TOML or
// JSON file, with CALLBOX_ environment overrides, into a config.Config.
// Validation is strict: an unknown key, a bad unit, a negative or absurd
// value is an error naming the file and the key, or the environment
// variable.
//
// The keys' rules (how a value decodes, which values are allowed) are
// package config's: a loaded Config passes config.Config.Validate. This
// package adds the file formats, the environment layering and the
// structural checks, and is the only part of callbox that imports viper; a
// program that builds its config.Config in code does not link it.
package configfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/viper"

	"github.com/seed4b3e0ccb/callbox/config"
)

// Top-level keys.
const (
	keyCacheDir   = "cache_dir"
	keyWorker     = "worker"
	keyWorkerUser = "worker_user"
	keyDefaults   = "defaults"
	keyCallbacks  = "callbacks"
	keyModules    = "modules"
)

// Load reads the configuration file at path, YAML (.yaml, .yml), TOML
// (.toml) or JSON (.json), applies CALLBOX_ overrides from the process
// environment and validates the result. See LoadEnv.
func Load(path string) (*config.Config, error) {
	return LoadEnv(path, os.Environ())
}

// LoadEnv is Load with the environment given as "NAME=value" entries, as
// os.Environ returns them.
//
// Every callback value is resolved in this order: config.DefaultCallback(),
// the file's defaults, CALLBOX_DEFAULTS_<KEY>, the callback's own keys, then
// CALLBOX_CALLBACKS_<NAME>_<KEY> (NAME upper-cased, '-' as '_'). A modules
// entry resolves the same way with CALLBOX_MODULES_<NAME>_<KEY>, and each
// of its per-callback overrides (file only) on top of the entry.
// CALLBOX_CACHE_DIR overrides cache_dir. An empty variable counts as unset.
// Relative paths in the file are relative to the file's directory, those
// in the environment to the working directory; Module and CacheDir come
// back absolute. Load does not check that the module exists.
//
// Validation is strict: unknown keys (also unknown CALLBOX_DEFAULTS_ and
// CALLBOX_CALLBACKS_ variables), wrong types, bad units and out-of-range
// values are errors. All of them are returned together, joined; each is a
// *config.Error naming the file and key, or the environment variable.
func LoadEnv(path string, environ []string) (*config.Config, error) {
	format, err := formatOf(path)
	if err != nil {
		return nil, err
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return loadData(path, format, data, filepath.Dir(path), environ)
}

// LoadData is LoadEnv for configuration text held in memory rather than in
// a file: format is "yaml", "toml" or "json", relative paths are relative
// to dir ("" for the working directory), and name stands for the file in
// error messages (and becomes Config.File).
func LoadData(name, format string, data []byte, dir string, environ []string) (*config.Config, error) {
	switch format = strings.ToLower(format); format {
	case "yaml", "toml", "json":
	case "yml":
		format = "yaml"
	default:
		return nil, &config.Error{File: name, Err: fmt.Errorf("unsupported config format %q (use yaml, toml or json)", format)}
	}
	if dir == "" {
		dir = "."
	}
	return loadData(name, format, data, dir, environ)
}

func loadData(path, format string, data []byte, dir string, environ []string) (*config.Config, error) {
	raw, err := decode(path, format, data)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, &config.Error{File: path, Err: fmt.Errorf("cannot resolve directory: %w", err)}
	}
	l := &loader{file: path, dir: dir, env: parseEnviron(environ), keys: config.Keys()}
	if format == "json" {
		l.checkJSONDuplicates(data)
	}
	cfg := l.load(raw)
	if err := errors.Join(l.errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// formatOf maps the file extension to a viper config type.
func formatOf(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".yaml", ".yml":
		return "yaml", nil
	case ".toml":
		return "toml", nil
	case ".json":
		return "json", nil
	default:
		return "", &config.Error{File: path, Err: fmt.Errorf("unsupported config format %q (use .yaml, .yml, .toml or .json)", ext)}
	}
}

// readFile reads the whole file.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("cannot %s: %w", pe.Op, pe.Err)
		}
		return nil, &config.Error{File: path, Err: err}
	}
	return data, nil
}

// decode decodes the file with viper's decoder for format, keeping keys
// exactly as written (viper itself lower-cases them when it loads a map).
func decode(path, format string, data []byte) (map[string]any, error) {
	dec, err := viper.NewCodecRegistry().Decoder(format)
	if err != nil {
		return nil, &config.Error{File: path, Err: err}
	}
	raw := map[string]any{}
	if err := decodeSafely(dec, data, raw); err != nil {
		return nil, &config.Error{File: path, Err: fmt.Errorf("bad %s: %w", strings.ToUpper(format), err)}
	}
	return raw, nil
}

// decodeSafely runs a third-party decoder, turning a panic inside it into
// an error: a parser bug on a malformed file must not take the host down.
// Only the decoder call is covered; a panic in this package's own code
// still crashes (and fails FuzzLoad).
func decodeSafely(dec viper.Decoder, data []byte, raw map[string]any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser panicked: %v", r)
		}
	}()
	return dec.Decode(data, raw)
}

// loader holds the state of one LoadEnv call.
type loader struct {
	file  string      // the path as given, for messages
	dir   string      // its absolute directory
	env   environment // CALLBOX_ variables
	keys  []config.Key
	v     *viper.Viper
	known map[string]bool // the variable names of all keys
	mods  []rawModule     // the modules entries
	errs  []error
	// origins: for each entry (config.Origins' keys), where each key it
	// gave came from.
	origins map[string]map[string]string
}

// section is a map in the file (defaults, or one callback) with
// string keys.
type section map[string]any

// rawCallback is one entry of callbacks as written in the file.
type rawCallback struct {
	name    string  // as written
	path    string  // key path for messages
	entries section // nil when the entry had no keys
	valid   bool    // the name is valid and its values come through viper
}

// load walks the raw tree for structural errors, hands the valid part to
// viper with the environment bound over it, and resolves every value.
func (l *loader) load(raw map[string]any) *config.Config {
	defaults, cbs := l.walk(raw)
	l.setupViper(raw, defaults, cbs)
	cfg := &config.Config{File: l.file, Defaults: config.DefaultCallback()}
	l.resolveCacheDir(cfg)
	l.resolveWorker(cfg)
	l.resolvePath(keyWorkerUser, envWorkerUser, config.ParseWorkerUser, &cfg.WorkerUser)
	l.apply(keyDefaults, &cfg.Defaults, l.defaultKeys(), l.viperLookup(keyDefaults, envDefaultsPrefix))
	for _, rc := range cbs {
		cfg.Callbacks = append(cfg.Callbacks, l.resolveCallback(cfg.Defaults, rc))
	}
	for _, rm := range l.mods {
		cfg.Modules = append(cfg.Modules, l.resolveModule(cfg.Defaults, rm))
	}
	l.checkUnknownEnv(cbs)
	cfg.Origins = l.origins
	return cfg
}

// fail records a problem at key (a key path in the file, or an
// environment variable when env is set).
func (l *loader) fail(key string, env bool, err error) {
	e := &config.Error{File: l.file, Key: key, Err: err}
	if env {
		e.File = ""
	}
	l.errs = append(l.errs, e)
}

// --- structure ---

// walk checks the shape of the raw tree: known top-level keys, maps where
// maps belong, known keys in each section, valid callback names.
func (l *loader) walk(raw map[string]any) (section, []rawCallback) {
	var defaults section
	var cbs []rawCallback
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		switch k {
		case keyCacheDir:
			if v == nil {
				l.fail(k, false, errors.New(`no value (use "" for no cache, or remove the key)`))
			}
		case keyWorker:
			if v == nil {
				l.fail(k, false, errors.New(`no value (a path to callbox-worker, or remove the key)`))
			}
		case keyWorkerUser:
			if v == nil {
				l.fail(k, false, errors.New(`no value (a user name, UID or UID:GID, or remove the key)`))
			}
		case keyDefaults:
			defaults = l.walkSection(k, v, l.defaultKeys())
		case keyCallbacks:
			cbs = l.walkCallbacks(v)
		case keyModules:
			l.mods = l.walkModules(v)
		default:
			l.fail(k, false, unknownKey(k, []string{keyCacheDir, keyWorker, keyWorkerUser, keyDefaults, keyCallbacks, keyModules}))
		}
	}
	return defaults, cbs
}

// walkCallbacks checks the callbacks map; null means no callbacks.
func (l *loader) walkCallbacks(v any) []rawCallback {
	m, ok := l.stringMap(keyCallbacks, v)
	if !ok {
		if v != nil {
			l.fail(keyCallbacks, false, fmt.Errorf("must be a map from callback name to its settings, got %s", config.Describe(v)))
		}
		return nil
	}
	var cbs []rawCallback
	var names config.CallbackNames
	for _, name := range sortedKeys(m) {
		rc := rawCallback{name: name, path: config.CallbackPath(name)}
		if err := names.Check(name); err != nil {
			l.fail(rc.path, false, err)
		} else {
			rc.valid = true
		}
		v := m[name]
		if v != nil && !isMap(v) {
			l.fail(rc.path, false, fmt.Errorf("must be a map of callback settings (module, export, ...), got %s", config.Describe(v)))
			continue
		}
		rc.entries = l.walkSection(rc.path, v, l.keys)
		cbs = append(cbs, rc)
	}
	return cbs
}

// walkSection checks one map of callback settings against fs and returns
// it with string keys; null is an empty section.
func (l *loader) walkSection(path string, v any, fs []config.Key) section {
	m, ok := l.stringMap(path, v)
	if !ok {
		if v != nil {
			l.fail(path, false, fmt.Errorf("must be a map of settings, got %s", config.Describe(v)))
		}
		return nil
	}
	for _, k := range sortedKeys(m) {
		if _, known := keyByName(fs, k); !known {
			l.fail(path+"."+k, false, l.unknownSectionKey(path, k, fs))
			continue
		}
		if m[k] == nil {
			l.fail(path+"."+k, false, errors.New("no value (remove the key to use the default)"))
		}
	}
	return m
}

// unknownSectionKey explains an unknown key in a section; a per-callback
// key in defaults gets its own message.
func (l *loader) unknownSectionKey(path, k string, fs []config.Key) error {
	if f, ok := keyByName(l.keys, k); ok && f.PerCallback && path == keyDefaults {
		return fmt.Errorf("%s cannot be set in defaults, only in each callback", k)
	}
	return unknownKey(k, keyNames(fs, true))
}

// unknownKey is the error for key, with a suggestion or the allowed keys.
func unknownKey(key string, allowed []string) error {
	if s := suggest(key, allowed); s != "" {
		return fmt.Errorf("unknown key%s", s)
	}
	return fmt.Errorf("unknown key (allowed: %s)", strings.Join(allowed, ", "))
}

// stringMap returns v as a map with string keys, reporting any key that
// is not a string (YAML allows numbers and booleans as keys).
func (l *loader) stringMap(path string, v any) (section, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := section{}
		for k, val := range m {
			s, ok := k.(string)
			if !ok {
				l.fail(path+"."+fmt.Sprint(k), false, fmt.Errorf("key is %s, not a string (quote it)", config.Describe(k)))
				continue
			}
			out[s] = val
		}
		return out, true
	}
	return nil, false
}

// isMap reports whether v is a decoded map.
func isMap(v any) bool {
	switch v.(type) {
	case map[string]any, map[any]any:
		return true
	}
	return false
}

// sortedKeys returns the keys of m in order, for deterministic messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// defaultKeys are the keys a defaults section may set.
func (l *loader) defaultKeys() []config.Key {
	var fs []config.Key
	for _, f := range l.keys {
		if !f.PerCallback {
			fs = append(fs, f)
		}
	}
	return fs
}

// --- values ---

// input is one raw value for a key: as decoded from the file, or an
// environment variable's string, with the absolute directory its relative
// paths are relative to ("" for the environment: the working directory).
type input struct {
	val any
	dir string
}

// lookup finds the raw value of a key: its input, where it came from
// (key path or variable name) and whether that is the environment.
type lookup func(key string) (in input, at string, env, ok bool)

// apply decodes and checks every key of fs that lookup finds, into cb,
// and reports which keys were given; it records where each came from
// under entry (config.Config.Origins).
func (l *loader) apply(entry string, cb *config.Callback, fs []config.Key, get lookup) map[string]bool {
	given := map[string]bool{}
	for _, f := range fs {
		in, at, env, ok := get(f.Name)
		if !ok {
			continue
		}
		given[f.Name] = true
		if l.origins == nil {
			l.origins = map[string]map[string]string{}
		}
		if l.origins[entry] == nil {
			l.origins[entry] = map[string]string{}
		}
		if env {
			l.origins[entry][f.Name] = "$" + at
		} else {
			l.origins[entry][f.Name] = at
		}
		if err := f.Parse(in.val, in.dir, cb); err != nil {
			l.fail(at, env, err)
			continue
		}
		if err := f.Check(cb); err != nil {
			l.fail(at, env, err)
		}
	}
	return given
}

// resolveCallback builds one callback on top of the resolved defaults.
func (l *loader) resolveCallback(defaults config.Callback, rc rawCallback) config.Callback {
	cb := defaults
	cb.Name = rc.name
	get := sectionLookup(rc.path, rc.entries, l.dir)
	if rc.valid {
		get = l.viperLookup(keyCallbacks+"."+rc.name, config.CallbackEnvPrefix(rc.name))
	}
	given := l.apply(config.CallbackPath(rc.name), &cb, l.keys, get)
	if !given["module"] {
		module, _ := keyByName(l.keys, "module")
		l.fail(rc.path+".module", false, module.Check(&cb))
	}
	if cb.Export == "" {
		cb.Export = cb.Name
	}
	return cb
}

// resolveCacheDir sets cfg.CacheDir from the file or CALLBOX_CACHE_DIR.
func (l *loader) resolveCacheDir(cfg *config.Config) {
	l.resolvePath(keyCacheDir, envCacheDir, config.ParseCacheDir, &cfg.CacheDir)
}

// resolveWorker sets cfg.Worker from the file or CALLBOX_WORKER.
func (l *loader) resolveWorker(cfg *config.Config) {
	l.resolvePath(keyWorker, envWorker, config.ParseWorker, &cfg.Worker)
}

// resolvePath sets *to from a top-level path key, or from its environment
// variable (whose relative path is the working directory's, where the
// file's is the file's directory), parsed by parse.
func (l *loader) resolvePath(key, env string, parse func(any, string) (string, error), to *string) {
	v := l.v.Get(key)
	if v == nil {
		return
	}
	at, fromEnv, dir := key, false, l.dir
	if _, ok := l.env[env]; ok {
		at, fromEnv, dir = env, true, ""
	}
	s, err := parse(v, dir)
	if err != nil {
		l.fail(at, fromEnv, err)
		return
	}
	*to = s
}

// sectionLookup reads keys straight from a file section, for callbacks
// whose names viper cannot hold (they are errors anyway; their values are
// still checked so that one pass reports everything).
func sectionLookup(path string, s section, dir string) lookup {
	return func(key string) (input, string, bool, bool) {
		v, ok := s[key]
		if !ok || v == nil {
			return input{}, "", false, false
		}
		return input{val: v, dir: dir}, path + "." + key, false, true
	}
}

// viperLookup reads keys under prefix (a key path) from viper, where the
// environment variable varPrefix+KEY is bound over the file.
func (l *loader) viperLookup(prefix, varPrefix string) lookup {
	return func(key string) (input, string, bool, bool) {
		path := prefix + "." + key
		v := l.v.Get(path)
		if v == nil {
			return input{}, "", false, false
		}
		name := varPrefix + strings.ToUpper(key)
		if _, ok := l.env[name]; ok {
			return input{val: v}, name, true, true
		}
		return input{val: v, dir: l.dir}, path, false, true
	}
}

// keyNames returns the names of keys, optionally leaving out per-callback
// ones.
func keyNames(keys []config.Key, withPerCallback bool) []string {
	var names []string
	for _, k := range keys {
		if withPerCallback || !k.PerCallback {
			names = append(names, k.Name)
		}
	}
	return names
}

// keyByName finds the key named name.
func keyByName(keys []config.Key, name string) (config.Key, bool) {
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return config.Key{}, false
}
