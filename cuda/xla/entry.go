package xla

/*
#include "xla_cuda.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
)

// EnvCopy names the environment variable NewGPU reads the copy mode from:
// auto (default), staged or pageable.
const EnvCopy = "CALLBOX_CUDA_COPY"

// ParseMode parses a copy mode name (auto, staged, pageable).
func ParseMode(s string) (cuda.Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto", "pinned":
		return cuda.Auto, nil
	case "staged":
		return cuda.Staged, nil
	case "pageable":
		return cuda.Pageable, nil
	}
	return cuda.Auto, fmt.Errorf("%s=%q: want auto, staged or pageable", EnvCopy, s)
}

// NewGPU is the GPU path a shared library serves: the CUDA runtime loaded
// on first use (a process that never calls on a GPU never loads it), the
// copy mode from getenv(EnvCopy). Pass the result's Hooks() to host.New
// and Install the two together.
func NewGPU(getenv func(string) string, logger *slog.Logger) (*cuda.GPU, error) {
	mode, err := ParseMode(getenv(EnvCopy))
	if err != nil {
		return nil, err
	}
	return cuda.New(&cuda.LazyRuntime{}, cuda.Options{Mode: mode, Logger: logger}), nil
}

// statsJSON is the installed GPU's totals as the C entry reports them.
type statsJSON struct {
	Mode            string  `json:"mode"`
	Calls           uint64  `json:"calls"`
	PinnedCalls     uint64  `json:"pinned_calls"`
	StagedCalls     uint64  `json:"staged_calls"`
	PageableCalls   uint64  `json:"pageable_calls"`
	Pins            uint64  `json:"pins"`
	PinTimeMS       float64 `json:"pin_time_ms"`
	PinnedBytes     uint64  `json:"pinned_bytes"`
	PinnedInstances int     `json:"pinned_instances"`
	Unpins          uint64  `json:"unpins"`
	StagingBuffers  int     `json:"staging_buffers"`
	StagingBytes    uint64  `json:"staging_bytes"`
}

// StatsJSON is the installed GPU path's totals as JSON ("" before Install).
func StatsJSON() string {
	t := installed.Load()
	if t == nil {
		return ""
	}
	tot := t.gpu.Totals()
	b, _ := json.Marshal(statsJSON{
		Mode: t.gpu.Mode().String(), Calls: tot.Calls, PinnedCalls: tot.PinnedCalls, StagedCalls: tot.StagedCalls, PageableCalls: tot.PageableCalls,
		Pins: tot.Pins, PinTimeMS: float64(tot.PinTime) / float64(time.Millisecond), PinnedBytes: tot.PinnedBytes,
		PinnedInstances: tot.PinnedInstances, Unpins: tot.Unpins, StagingBuffers: tot.StagingBuffers, StagingBytes: tot.StagingBytes,
	})
	return string(b)
}

// callbox_cuda_stats writes the installed GPU path's totals as JSON
// (NUL-terminated, truncated to cap) and returns the JSON's length, or -1
// when nothing is installed.
//
//export callbox_cuda_stats
func callbox_cuda_stats(buf *C.char, capacity C.size_t) C.int64_t {
	s := StatsJSON()
	if s == "" {
		return -1
	}
	writeMsg(buf, capacity, s)
	return C.int64_t(len(s))
}

// CallDLPack calls the installed host's callback on DLPack tensors in
// CUDA memory, on stream s.
func CallDLPack(ctx context.Context, callback string, s cuda.Stream, inputs, outputs []*cuda.DLTensor) (cuda.Stats, error) {
	t := installed.Load()
	if t == nil {
		return cuda.Stats{}, ErrNotInstalled
	}
	cb, err := t.h.Lookup(callback)
	if err != nil {
		return cuda.Stats{}, err
	}
	return t.gpu.CallDLPack(ctx, cb, s, inputs, outputs)
}

// callbox_cuda_call_dlpack calls the installed host's callback on DLPack
// tensors in CUDA memory (PyTorch, CuPy): inputs and outputs are arrays of
// DLTensor pointers (a DLManagedTensor* works: its tensor comes first),
// stream the CUDA stream the tensors are ordered on. It returns 0, or an
// absl error code with the message in msg.
//
//export callbox_cuda_call_dlpack
func callbox_cuda_call_dlpack(callback *C.char, stream C.uintptr_t, inputs unsafe.Pointer, nInputs C.size_t,
	outputs unsafe.Pointer, nOutputs C.size_t, msg *C.char, msgCap C.size_t) (code C.int) {
	defer func() {
		if p := recover(); p != nil {
			writeMsg(msg, msgCap, fmt.Sprintf("callbox_cuda_call_dlpack: internal error: %v", p))
			code = C.int(abi.CodeInternal)
		}
	}()
	err := func() error {
		if callback == nil {
			return &refused{"null callback name"}
		}
		list := func(p unsafe.Pointer, n C.size_t, what string) ([]*cuda.DLTensor, error) {
			if n > MaxBuffers || (n > 0 && p == nil) {
				return nil, &refused{fmt.Sprintf("%d %s (at most %d, and a non-null list)", n, what, MaxBuffers)}
			}
			if n == 0 {
				return nil, nil
			}
			return append([]*cuda.DLTensor(nil), unsafe.Slice((**cuda.DLTensor)(p), n)...), nil
		}
		ins, err := list(inputs, nInputs, "inputs")
		if err != nil {
			return err
		}
		outs, err := list(outputs, nOutputs, "outputs")
		if err != nil {
			return err
		}
		_, err = CallDLPack(context.Background(), C.GoString(callback), cuda.Stream(stream), ins, outs)
		return err
	}()
	if err == nil {
		return 0
	}
	writeMsg(msg, msgCap, err.Error())
	return C.int(codeOf(err))
}
