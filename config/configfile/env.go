package configfile

import (
	"fmt"
	"strings"

	"github.com/spf13/viper"

	"github.com/seed4b3e0ccb/callbox/config"
)

// Environment variable names and prefixes.
const (
	envPrefix         = "CALLBOX_"
	envCacheDir       = "CALLBOX_CACHE_DIR"
	envWorker         = "CALLBOX_WORKER"
	envWorkerUser     = "CALLBOX_WORKER_USER"
	envDefaultsPrefix = "CALLBOX_DEFAULTS_"
)

// environment holds the CALLBOX_ variables with a non-empty value; as
// with viper's own environment binding, an empty variable counts as unset.
type environment map[string]string

// parseEnviron collects the CALLBOX_ variables of environ ("NAME=value"
// entries); a later entry for a name wins, as in os/exec.
func parseEnviron(environ []string) environment {
	env := environment{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		if val == "" {
			delete(env, name)
			continue
		}
		env[name] = val
	}
	return env
}

// envFlag presents one environment variable to viper as a flag value, so
// that viper layers it over the file without reading the process
// environment (viper's BindEnv only reads os.Getenv).
type envFlag struct{ name, value string }

func (f envFlag) HasChanged() bool    { return true }
func (f envFlag) Name() string        { return f.name }
func (f envFlag) ValueString() string { return f.value }
func (f envFlag) ValueType() string   { return "string" }

// setupViper loads the structurally valid part of the file into a fresh
// viper instance and binds every key to its environment variable, so that
// keys absent from the file can still be set from the environment.
func (l *loader) setupViper(raw map[string]any, defaults section, cbs []rawCallback) {
	tree := map[string]any{}
	for _, k := range []string{keyCacheDir, keyWorker, keyWorkerUser} {
		if v := raw[k]; v != nil {
			tree[k] = v
		}
	}
	tree[keyDefaults] = knownKeys(defaults, l.defaultKeys())
	callbacks := map[string]any{}
	for _, rc := range cbs {
		if rc.valid {
			callbacks[rc.name] = knownKeys(rc.entries, l.keys)
		}
	}
	tree[keyCallbacks] = callbacks
	modules := map[string]any{}
	for _, rm := range l.mods {
		if rm.valid {
			modules[rm.name] = knownKeys(rm.entries, config.ModuleKeys())
		}
	}
	tree[keyModules] = modules
	l.v = viper.New()
	if err := l.v.MergeConfigMap(tree); err != nil {
		l.fail("", false, err)
	}
	l.bindEnv(cbs)
}

// knownKeys copies the keys of s that fs knows and that have a value.
func knownKeys(s section, fs []config.Key) map[string]any {
	out := map[string]any{}
	for _, f := range fs {
		if v := s[f.Name]; v != nil {
			out[f.Name] = v
		}
	}
	return out
}

// bindEnv binds cache_dir, every defaults key and every key of every
// validly named callback to its CALLBOX_ variable.
func (l *loader) bindEnv(cbs []rawCallback) {
	l.known = map[string]bool{}
	l.bind(keyCacheDir, envCacheDir)
	l.bind(keyWorker, envWorker)
	l.bind(keyWorkerUser, envWorkerUser)
	for _, f := range l.defaultKeys() {
		l.bind(keyDefaults+"."+f.Name, envDefaultsPrefix+strings.ToUpper(f.Name))
	}
	for _, rc := range cbs {
		if !rc.valid {
			continue
		}
		for _, f := range l.keys {
			l.bind(keyCallbacks+"."+rc.name+"."+f.Name, config.CallbackEnvPrefix(rc.name)+strings.ToUpper(f.Name))
		}
	}
	for _, rm := range l.mods {
		if !rm.valid {
			continue
		}
		for _, f := range config.ModuleKeys() {
			l.bind(keyModules+"."+rm.name+"."+f.Name, config.ModuleEnvPrefix(rm.name)+strings.ToUpper(f.Name))
		}
	}
}

// bind records name as the variable of key and, when it is set, binds it
// over key in viper. Unset variables are not bound: viper answers Get for a
// bound flag that has not changed with the flag's default, "", which would
// hide the file's value and turn an absent key into an empty one.
func (l *loader) bind(key, name string) {
	l.known[name] = true
	val, set := l.env[name]
	if !set {
		return
	}
	if err := l.v.BindFlagValue(key, envFlag{name: name, value: val}); err != nil {
		l.fail(name, true, err)
	}
}

// checkUnknownEnv reports CALLBOX_DEFAULTS_, CALLBOX_CALLBACKS_ and
// CALLBOX_MODULES_ variables that match no key: a typo would otherwise be
// ignored.
// Other CALLBOX_ variables are left to whoever reads them.
func (l *loader) checkUnknownEnv(cbs []rawCallback) {
	for _, name := range sortedKeys(l.env) {
		if l.known[name] {
			continue
		}
		switch {
		case strings.HasPrefix(name, envDefaultsPrefix):
			l.fail(name, true, l.unknownDefaultsVar(name))
		case strings.HasPrefix(name, config.EnvCallbacksPrefix):
			l.fail(name, true, l.unknownCallbackVar(name, cbs))
		case strings.HasPrefix(name, config.EnvModulesPrefix):
			l.fail(name, true, l.unknownModuleVar(name))
		}
	}
}

// unknownDefaultsVar explains an unbound CALLBOX_DEFAULTS_ variable.
func (l *loader) unknownDefaultsVar(name string) error {
	key := strings.ToLower(strings.TrimPrefix(name, envDefaultsPrefix))
	if f, ok := keyByName(l.keys, key); ok && f.PerCallback {
		return fmt.Errorf("%s cannot be set in defaults, only per callback (CALLBOX_CALLBACKS_<NAME>_%s)", key, strings.ToUpper(key))
	}
	return unknownVar(key, envDefaultsPrefix, keyNames(l.defaultKeys(), false))
}

// unknownCallbackVar explains an unbound CALLBOX_CALLBACKS_ variable: an
// unknown key of a callback in the file, or no such callback.
func (l *loader) unknownCallbackVar(name string, cbs []rawCallback) error {
	best := ""
	for _, rc := range cbs {
		p := config.CallbackEnvPrefix(rc.name)
		if rc.valid && strings.HasPrefix(name, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return fmt.Errorf("matches no callback in %s; callbacks are created only in the config file", l.file)
	}
	key := strings.ToLower(strings.TrimPrefix(name, best))
	return unknownVar(key, best, keyNames(l.keys, true))
}

// unknownModuleVar explains an unbound CALLBOX_MODULES_ variable: an
// unknown key of a modules entry in the file, or no such entry.
func (l *loader) unknownModuleVar(name string) error {
	best := ""
	for _, rm := range l.mods {
		p := config.ModuleEnvPrefix(rm.name)
		if rm.valid && strings.HasPrefix(name, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return fmt.Errorf("matches no modules entry in %s; modules entries are created only in the config file", l.file)
	}
	key := strings.ToLower(strings.TrimPrefix(name, best))
	return unknownVar(key, best, keyNames(config.ModuleKeys(), true))
}

// unknownVar is the error for an unknown key in a variable name.
func unknownVar(key, prefix string, allowed []string) error {
	if c, ok := closest(key, allowed); ok {
		return fmt.Errorf("unknown key %s (did you mean %s%s?)", key, prefix, strings.ToUpper(c))
	}
	return fmt.Errorf("unknown key %s (allowed: %s followed by one of %s)", key, prefix, strings.ToUpper(strings.Join(allowed, ", ")))
}
