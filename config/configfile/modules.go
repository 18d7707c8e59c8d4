package configfile

import (
	"errors"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/config"
)

// keyModuleCallbacks is the key of a modules entry's per-callback
// overrides.
const keyModuleCallbacks = "callbacks"

// rawModule is one entry of modules as written in the file.
type rawModule struct {
	name      string             // as written
	path      string             // key path for messages
	entries   section            // the entry's own keys, without callbacks
	overrides map[string]section // callbacks: export name -> its keys
	valid     bool               // the name is valid and its values come through viper
}

// walkModules checks the modules map; null means no entries.
func (l *loader) walkModules(v any) []rawModule {
	m, ok := l.stringMap(keyModules, v)
	if !ok {
		if v != nil {
			l.fail(keyModules, false, fmt.Errorf("must be a map from an entry name to a module and its settings, got %s", config.Describe(v)))
		}
		return nil
	}
	var mods []rawModule
	var names config.ModuleNames
	for _, name := range sortedKeys(m) {
		rm := rawModule{name: name, path: config.ModulePath(name)}
		if err := names.Check(name); err != nil {
			l.fail(rm.path, false, err)
		} else {
			rm.valid = true
		}
		entry, ok := l.stringMap(rm.path, m[name])
		if !ok {
			l.fail(rm.path, false, fmt.Errorf("must be a map of settings (module, callbacks, limits), got %s", config.Describe(m[name])))
			continue
		}
		own := section{}
		for k, v := range entry {
			if k != keyModuleCallbacks {
				own[k] = v
			}
		}
		rm.entries = l.walkModuleSection(rm.path, own)
		if ov, given := entry[keyModuleCallbacks]; given {
			rm.overrides = l.walkOverrides(rm.path, ov)
		}
		mods = append(mods, rm)
	}
	return mods
}

// walkModuleSection checks a modules entry's own keys.
func (l *loader) walkModuleSection(path string, m section) section {
	keys := config.ModuleKeys()
	for _, k := range sortedKeys(m) {
		if _, known := keyByName(keys, k); !known {
			err := unknownKey(k, append(keyNames(keys, true), keyModuleCallbacks))
			if k == "export" || k == "signature" {
				err = fmt.Errorf("%s cannot be set in a modules entry: it loads every export the module declares a signature for, with that signature (for one export, use a callbacks entry)", k)
			}
			l.fail(path+"."+k, false, err)
			continue
		}
		if m[k] == nil {
			l.fail(path+"."+k, false, errors.New("no value (remove the key to use the default)"))
		}
	}
	return m
}

// walkOverrides checks the callbacks of the modules entry at path: a map
// from export name to settings; null means none.
func (l *loader) walkOverrides(path string, v any) map[string]section {
	m, ok := l.stringMap(path+"."+keyModuleCallbacks, v)
	if !ok {
		if v != nil {
			l.fail(path+"."+keyModuleCallbacks, false, fmt.Errorf("must be a map from an export name to the settings of its callback, got %s", config.Describe(v)))
		}
		return nil
	}
	keys := config.OverrideKeys()
	out := map[string]section{}
	for _, name := range sortedKeys(m) {
		p := path + "." + config.CallbackPath(name)
		if err := (&config.CallbackNames{}).Check(name); err != nil {
			l.fail(p, false, err)
		}
		v := m[name]
		if v != nil && !isMap(v) {
			l.fail(p, false, fmt.Errorf("must be a map of settings (timeout, max_memory, ...), got %s", config.Describe(v)))
			continue
		}
		s, _ := l.stringMap(p, v)
		for _, k := range sortedKeys(s) {
			if _, known := keyByName(keys, k); !known {
				err := unknownKey(k, keyNames(keys, true))
				if f, ok := keyByName(l.keys, k); ok && f.PerCallback {
					err = fmt.Errorf("%s cannot be set for one callback of a modules entry (the module and each signature come from the module; for another, use a callbacks entry)", k)
				}
				l.fail(p+"."+k, false, err)
				continue
			}
			if s[k] == nil {
				l.fail(p+"."+k, false, errors.New("no value (remove the key to use the module's)"))
			}
		}
		out[name] = s
	}
	return out
}

// resolveModule builds one modules entry on top of the resolved defaults:
// its own keys (with CALLBOX_MODULES_<NAME>_<KEY> over them), then each
// override's keys on top of those.
func (l *loader) resolveModule(defaults config.Callback, rm rawModule) config.Module {
	m := config.Module{Name: rm.name, Settings: defaults}
	m.Settings.Name = ""
	keys := config.ModuleKeys()
	get := sectionLookup(rm.path, rm.entries, l.dir)
	if rm.valid {
		get = l.viperLookup(keyModules+"."+rm.name, config.ModuleEnvPrefix(rm.name))
	}
	given := l.apply(config.ModulePath(rm.name), &m.Settings, keys, get)
	if !given["module"] {
		module, _ := keyByName(keys, "module")
		l.fail(rm.path+".module", false, module.Check(&m.Settings))
	}
	if len(rm.overrides) > 0 {
		m.Overrides = map[string]config.Callback{}
	}
	for _, name := range sortedKeys(rm.overrides) {
		cb := m.Settings
		l.apply(config.ModulePath(rm.name)+"."+config.CallbackPath(name), &cb, config.OverrideKeys(), sectionLookup(rm.path+"."+config.CallbackPath(name), rm.overrides[name], l.dir))
		m.Overrides[name] = cb
	}
	return m
}
