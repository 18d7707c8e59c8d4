package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdlib.h>
#include "include/callbox.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/internal/atomicfile"
)

//export cbxgo_profile
func cbxgo_profile(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, calls C.int64_t, pprofPath *C.char, summary **C.char) *C.callbox_error {
	return entry("callbox_profile", func() error {
		if summary != nil {
			*summary = nil
		}
		var path string
		if pprofPath != nil {
			p, err := cString(cbytes(pprofPath), "pprof_path")
			if err != nil {
				return err
			}
			path = p
		}
		return profileDL(context.Background(), uint64(h), cbytes(callback), dlTensors(inputs), uintptr(nIn), int64(calls), path, summary)
	})
}

// profileDL is callbox_profile: Host.Profile of a callback on DLPack
// inputs, its pprof written to path ("" none) and its summary returned
// as JSON in C memory (*summary, when summary is not NULL).
func profileDL(ctx context.Context, h uint64, callback *byte, inputs *dlpack.Tensor, nIn uintptr, calls int64, path string, summary **C.char) error {
	bh, name, _, err := callSetup(h, nil, callback)
	if err != nil {
		return err
	}
	in, err := fromDLs("input", inputs, nIn, nil)
	if err != nil {
		return err
	}
	p, err := bh.h.Profile(ctx, name, int(calls), in...) // Host.Profile refuses calls below 1, in its words
	if err != nil {
		return err
	}
	if path != "" {
		if err := atomicfile.Write(path, p.WritePprof); err != nil {
			return fmt.Errorf("callbox_profile: pprof_path %w", err)
		}
	}
	if summary != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("callbox_profile: %w", err)
		}
		*summary = C.CString(string(b))
	}
	return nil
}
