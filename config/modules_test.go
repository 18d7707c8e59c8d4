package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// table is a signature table declaring names, each (x: f32[n]) -> $x.
func table(t *testing.T, names ...string) map[string]*abi.Signature {
	t.Helper()
	out := map[string]*abi.Signature{}
	for _, n := range names {
		s, err := abi.ParseSignature("(x: f32[n]) -> $x")
		require.NoError(t, err)
		out[n] = s
	}
	return out
}

// codeModule is a valid modules entry built in code, with an override of b.
func codeModule() Module {
	s := DefaultCallback()
	s.Module = "kit.wasm"
	o := s
	o.Limits.Timeout = 50 * time.Millisecond
	return Module{Name: "kit", Settings: s, Overrides: map[string]Callback{"b": o}}
}

func TestModuleExpand(t *testing.T) {
	m := codeModule()
	cbs, err := m.Expand("c.yaml", table(t, "c", "b", "a"))
	require.NoError(t, err)
	require.Len(t, cbs, 3)
	for i, n := range []string{"a", "b", "c"} {
		assert.Equal(t, n, cbs[i].Name)
		assert.Equal(t, n, cbs[i].Export)
		assert.Equal(t, "kit.wasm", cbs[i].Module)
		assert.Empty(t, cbs[i].Signature, "the module's own signature is used")
	}
	assert.Equal(t, time.Second, cbs[0].Limits.Timeout)
	assert.Equal(t, 50*time.Millisecond, cbs[1].Limits.Timeout)
	c := &Config{Callbacks: cbs}
	assert.NoError(t, c.Validate())
}

func TestModuleExpandErrors(t *testing.T) {
	m := codeModule()
	_, err := m.Expand("c.yaml", nil)
	es := configErrors(t, err)
	require.Len(t, es, 1)
	assert.Equal(t, "c.yaml", es[0].File)
	assert.Equal(t, "modules.kit.module", es[0].Key)
	assert.Contains(t, es[0].Err.Error(), "module kit.wasm declares no callbacks (it has no callbox.signatures custom section)")

	_, err = m.Expand("c.yaml", table(t, "a", "c", "Bad"))
	es = configErrors(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, "modules.kit.callbacks.b", es[0].Key)
	assert.Contains(t, es[0].Err.Error(), `declares no signature for export "b" (its callbox.signatures section declares: Bad, a, c)`)
	assert.Equal(t, "modules.kit.module", es[1].Key)
	assert.Contains(t, es[1].Err.Error(), `declares export "Bad", which is not a valid callback name`)
}

func TestExpandModules(t *testing.T) {
	cb := DefaultCallback()
	cb.Name, cb.Module = "m", "m.wasm"
	m2 := codeModule()
	m2.Name, m2.Overrides = "kit2", nil
	c := &Config{File: "c.yaml", Callbacks: []Callback{cb}, Modules: []Module{codeModule(), m2}}
	tables := map[string]map[string]*abi.Signature{"kit": table(t, "b", "z"), "kit2": table(t, "a")}
	read := func(m Module) (map[string]*abi.Signature, error) { return tables[m.Name], nil }
	cbs, err := c.ExpandModules(read)
	require.NoError(t, err)
	var names []string
	for _, cb := range cbs {
		names = append(names, cb.Name)
	}
	assert.Equal(t, []string{"a", "b", "m", "z"}, names, "sorted by name")
	assert.Len(t, c.Callbacks, 1, "c is left alone")

	tables["kit2"] = table(t, "m", "z")
	_, err = c.ExpandModules(read)
	es := configErrors(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, "modules.kit2", es[0].Key)
	assert.Contains(t, es[0].Err.Error(), "declares callback m, which callbacks.m defines too")
	assert.Contains(t, es[1].Err.Error(), "declares callback z, which modules.kit defines too")
}

func TestValidateModules(t *testing.T) {
	c := &Config{File: "c.yaml", Modules: []Module{codeModule()}}
	require.NoError(t, c.Validate())

	bad := codeModule()
	bad.Name = "Kit"
	bad.Settings.Module = ""
	bad.Settings.Limits.MaxMemory = 1
	o := bad.Overrides["b"]
	o.Engine = "v8"
	bad.Overrides = map[string]Callback{"b": o, "B": bad.Settings}
	dup := codeModule()
	c = &Config{File: "c.yaml", Modules: []Module{bad, dup, dup}}
	var keys []string
	for _, e := range configErrors(t, c.Validate()) {
		assert.Equal(t, "c.yaml", e.File)
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{
		`modules."Kit"`, `modules."Kit".module`, `modules."Kit".max_memory`,
		`modules."Kit".callbacks."B"`, `modules."Kit".callbacks."B".max_memory`,
		`modules."Kit".callbacks.b.engine`,
		"modules.kit",
	}, keys)
}
