package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatchingDefaultsToSequential(t *testing.T) {
	cb := Callback{}
	assert.Equal(t, BatchingSequential, cb.BatchingRule())
	cfg := &Config{Callbacks: []Callback{{Name: "a", Module: "a.wasm", Engine: EngineWazero, Isolation: IsolationPooled, MaxInstances: 1, WASI: WASINone,
		Limits: Limits{MaxMemory: 1 << 20, MaxOutput: 1, MaxError: 1}}}}
	require.NoError(t, cfg.Validate(), "a Config built in code may leave Batching empty")
	cfg.Callbacks[0].Batching = BatchingParallel
	require.NoError(t, cfg.Validate(), "parallel is a batching rule")
	cfg.Callbacks[0].Batching = "concurrent"
	assert.ErrorContains(t, cfg.Validate(), "bad batching")
}
