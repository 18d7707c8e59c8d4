//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdlib.h>
#include "include/callbox.h"
void cbx_kinds_ready(const callbox_kind_info *table, size_t n);
*/
import "C"

import (
	"context"
	"errors"
	"sync"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
)

// Compile-time checks that package dlpack's mirrors have the C layouts
// exactly: each line fails to compile (a negative array length) when the
// sizes or offsets differ in either direction.
var (
	_ [unsafe.Sizeof(C.callbox_tensor{}) - unsafe.Sizeof(dlpack.Tensor{})]byte
	_ [unsafe.Sizeof(dlpack.Tensor{}) - unsafe.Sizeof(C.callbox_tensor{})]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.ndim) - unsafe.Offsetof(dlpack.Tensor{}.NDim)]byte
	_ [unsafe.Offsetof(dlpack.Tensor{}.NDim) - unsafe.Offsetof(C.callbox_tensor{}.ndim)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.dtype) - unsafe.Offsetof(dlpack.Tensor{}.DType)]byte
	_ [unsafe.Offsetof(dlpack.Tensor{}.DType) - unsafe.Offsetof(C.callbox_tensor{}.dtype)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.strides) - unsafe.Offsetof(dlpack.Tensor{}.Strides)]byte
	_ [unsafe.Offsetof(dlpack.Tensor{}.Strides) - unsafe.Offsetof(C.callbox_tensor{}.strides)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.byte_offset) - unsafe.Offsetof(dlpack.Tensor{}.ByteOffset)]byte
	_ [unsafe.Offsetof(dlpack.Tensor{}.ByteOffset) - unsafe.Offsetof(C.callbox_tensor{}.byte_offset)]byte
	_ [unsafe.Sizeof(C.callbox_type{}) - unsafe.Sizeof(dlpack.Type{})]byte
	_ [unsafe.Sizeof(dlpack.Type{}) - unsafe.Sizeof(C.callbox_type{})]byte
	_ [unsafe.Offsetof(C.callbox_type{}.shape) - unsafe.Offsetof(dlpack.Type{}.Shape)]byte
	_ [unsafe.Offsetof(dlpack.Type{}.Shape) - unsafe.Offsetof(C.callbox_type{}.shape)]byte
	_ [unsafe.Sizeof(C.callbox_dtype_info{}) - unsafe.Sizeof(dtypeInfo{})]byte
	_ [unsafe.Sizeof(dtypeInfo{}) - unsafe.Sizeof(C.callbox_dtype_info{})]byte
	_ [C.CALLBOX_MAX_RANK - abi.MaxRank]byte
	_ [abi.MaxRank - C.CALLBOX_MAX_RANK]byte
)

// cError allocates a callbox_error (C memory, freed by callbox_error_free).
func cError(err error) *C.callbox_error {
	if err == nil {
		return nil
	}
	return cErrorInfo(describe(err))
}

// cErrorInfo allocates the callbox_error of a described failure.
func cErrorInfo(in errInfo) *C.callbox_error {
	e := (*C.callbox_error)(C.calloc(1, C.sizeof_callbox_error))
	e.struct_size = C.uint32_t(C.sizeof_callbox_error)
	e.kind = C.int32_t(in.kind)
	e.code = C.int32_t(in.code)
	e.guest_status = C.int32_t(in.status)
	e.seq = C.uint64_t(in.seq)
	e.kind_name = C.CString(in.kind.Ident())
	e.callback = C.CString(in.callback)
	e.chain = C.CString(in.chain)
	e.message = C.CString(in.message)
	e.guest_message = C.CString(in.guest)
	e.text = C.CString(in.text)
	e.failed_callback = C.CString(in.failedCallback)
	e.failed_seq = C.uint64_t(in.failedSeq)
	e.failed_message = C.CString(in.failedMessage)
	e.batch_size = C.uint64_t(in.batchSize)
	e.batch_element = C.uint64_t(in.batchElement)
	e.failed_text = C.CString(in.failedText)
	if n := len(in.frames); n > 0 {
		p := (*C.callbox_frame)(C.calloc(C.size_t(n), C.sizeof_callbox_frame))
		if p == nil {
			return e // out of memory: the error without its frames
		}
		frames := unsafe.Slice(p, n)
		for i, f := range in.frames {
			frames[i] = C.callbox_frame{
				_func: C.CString(f.Func), module: C.CString(f.Module), file: C.CString(f.File),
				func_index: C.uint32_t(f.FuncIndex), line: C.uint32_t(f.Line), column: C.uint32_t(f.Column),
				offset: C.uint64_t(f.Offset),
			}
		}
		e.frames, e.frame_count = &frames[0], C.uint64_t(n)
	}
	return e
}

// guard recovers a panic in an exported function into a HostPanic error:
// no Go panic crosses the C boundary. Use as defer guard(&ret, "name").
func guard(ret **C.callbox_error, where string) {
	if p := recover(); p != nil {
		*ret = cError(panicError(where, p))
	}
}

// goString views a NUL-terminated C string as a Go string without
// copying (cString); what names the argument in errors.
func goString(p *C.char, what string) (string, error) {
	return cString((*byte)(unsafe.Pointer(p)), what)
}

// entry is the body of every exported function that returns a
// callbox_error: a panic in body becomes a HostPanic error (no Go panic
// crosses the C boundary), body's error a callbox_error.
func entry(where string, body func() error) (ret *C.callbox_error) {
	defer guard(&ret, where)
	return cError(body())
}

// withHost runs body on the open host h with its C-side data (callback
// infos) in use: close waits for it.
func withHost(h C.callbox_host, body func(bh *bridgeHost) error) error {
	bh, err := lookupHost(uint64(h))
	if err != nil {
		return err
	}
	if err := bh.enter(); err != nil {
		return err
	}
	defer bh.leave()
	return body(bh)
}

// outArg refuses a NULL out pointer, naming the argument.
func outArg[T any](p *T, name string) error {
	if p == nil {
		return badArg(arg(name), "NULL")
	}
	return nil
}

//export cbxgo_open
func cbxgo_open(path *C.char, out *C.callbox_host) *C.callbox_error {
	return entry("callbox_open", func() error {
		return openInto(out, func() (*config.Config, error) {
			p, err := goString(path, "config_path")
			if err != nil {
				return nil, err
			}
			return configfile.LoadEnv(p, environ())
		})
	})
}

//export cbxgo_open_config
func cbxgo_open_config(text, format, baseDir *C.char, out *C.callbox_host) *C.callbox_error {
	return entry("callbox_open_config", func() error {
		return openInto(out, func() (*config.Config, error) { return configText(text, format, baseDir) })
	})
}

// configText loads configuration text given through the C API
// (callbox_open_config, callbox_reload_config): format "yaml", "json" or
// "toml", relative paths from baseDir (NULL: the working directory).
func configText(text, format, baseDir *C.char) (*config.Config, error) {
	if text == nil {
		return nil, badArg(arg("text"), "NULL")
	}
	f, err := goString(format, "format")
	if err != nil {
		return nil, err
	}
	dir := ""
	if baseDir != nil {
		dir = C.GoString(baseDir)
	}
	return configfile.LoadData("<config>", f, []byte(C.GoString(text)), dir, nil)
}

//export cbxgo_reload
func cbxgo_reload(h C.callbox_host, path *C.char) *C.callbox_error {
	return entry("callbox_reload", func() error {
		return reloadFrom(h, func() (*config.Config, error) {
			p, err := goString(path, "config_path")
			if err != nil {
				return nil, err
			}
			return configfile.LoadEnv(p, environ())
		})
	})
}

//export cbxgo_reload_config
func cbxgo_reload_config(h C.callbox_host, text, format, baseDir *C.char) *C.callbox_error {
	return entry("callbox_reload_config", func() error {
		return reloadFrom(h, func() (*config.Config, error) { return configText(text, format, baseDir) })
	})
}

// reloadFrom reloads host h from the config load returns.
func reloadFrom(h C.callbox_host, load func() (*config.Config, error)) error {
	bh, err := lookupHost(uint64(h))
	if err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	return onGoThread(func() error {
		_, err := bh.reload(context.Background(), cfg, publishInfos)
		return err
	})
}

// openInto opens a host from the config load returns and stores its
// handle in *out (0 on failure).
func openInto(out *C.callbox_host, load func() (*config.Config, error)) error {
	if err := outArg(out, "out"); err != nil {
		return err
	}
	*out = 0
	cfg, err := load()
	if err != nil {
		return err
	}
	bh, err := openHost(context.Background(), cfg)
	if err != nil {
		return err
	}
	*out = C.callbox_host(publish(bh))
	return nil
}

// publish gives an opened host its C-side callback infos and a handle:
// every host the library opens (callbox_open, callbox_open_config, the
// default host from CALLBOX_CONFIG) goes through it.
func publish(bh *bridgeHost) uint64 {
	publishInfos(bh.cat.Load())
	return register(bh)
}

// publishInfos gives a catalog's callbacks their C-side infos, which
// callbox_callback_at and callbox_callback_find copy out (their strings
// stay valid until the host is closed, across reloads).
func publishInfos(cat *catalog) {
	for _, ci := range cat.infos {
		info := (*C.callbox_callback_info)(C.calloc(1, C.sizeof_callbox_callback_info))
		info.name = C.CString(ci.name)
		info.id = C.CString(ci.id)
		info.signature = C.CString(ci.signature)
		info.engine = C.CString(ci.engine)
		info.batching = C.CString(ci.batching)
		info.num_inputs = C.int32_t(len(ci.sig.Params))
		info.num_outputs = C.int32_t(len(ci.sig.Results))
		ci.cinfo = unsafe.Pointer(info)
		if n := len(ci.sig.Params); n > 0 {
			params := unsafe.Slice((*C.callbox_param_info)(C.calloc(C.size_t(n), C.sizeof_callbox_param_info)), n)
			for i, p := range ci.sig.Params {
				params[i] = C.callbox_param_info{name: C.CString(p.Name), xla: C.int32_t(p.DType), rank: C.int32_t(len(p.Dims))}
			}
			ci.cparams = unsafe.Pointer(&params[0])
		}
	}
}

//export cbxgo_close
func cbxgo_close(h C.callbox_host) *C.callbox_error {
	defer coverFlush()
	return entry("callbox_close", func() error {
		bh, err := lookupHost(uint64(h))
		if err != nil {
			return err
		}
		first, err := bh.close(context.Background())
		if first {
			for _, cat := range bh.catalogs() {
				for _, ci := range cat.infos {
					info := (*C.callbox_callback_info)(ci.cinfo)
					ci.cinfo = nil
					if info == nil {
						continue
					}
					for _, s := range []*C.char{info.name, info.id, info.signature, info.engine, info.batching} {
						C.free(unsafe.Pointer(s))
					}
					C.free(unsafe.Pointer(info))
					if ci.cparams != nil {
						for _, p := range unsafe.Slice((*C.callbox_param_info)(ci.cparams), len(ci.sig.Params)) {
							C.free(unsafe.Pointer(p.name))
						}
						C.free(ci.cparams)
						ci.cparams = nil
					}
				}
			}
		}
		return err
	})
}

//export cbxgo_callback_count
func cbxgo_callback_count(h C.callbox_host, out *C.size_t) *C.callbox_error {
	return entry("callbox_callback_count", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		return withHost(h, func(bh *bridgeHost) error {
			*out = C.size_t(len(bh.cat.Load().infos))
			return nil
		})
	})
}

//export cbxgo_callback_at
func cbxgo_callback_at(h C.callbox_host, index C.size_t, out *C.callbox_callback_info) *C.callbox_error {
	return entry("callbox_callback_at", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		return withHost(h, func(bh *bridgeHost) error {
			infos := bh.cat.Load().infos
			if uint64(index) >= uint64(len(infos)) {
				return badArg(arg("index"), "%d is out of range (the host has %d callbacks)", uint64(index), len(infos))
			}
			*out = *(*C.callbox_callback_info)(infos[index].cinfo)
			return nil
		})
	})
}

// resolvePublished resolves the callback named by a C string (the
// argument name_or_id) to an info whose C side is published: one found
// between a reload's switch and its catalog's publication (which holds
// mu) is looked up again once the publication is done.
func (bh *bridgeHost) resolvePublished(key *C.char) (*cbInfo, error) {
	ci, err := bh.resolveC(key, "name_or_id")
	if err != nil || ci.cinfo != nil {
		return ci, err
	}
	bh.mu.Lock()
	bh.mu.Unlock() //nolint:staticcheck // an empty critical section: waiting for the publication
	if ci, err = bh.resolveC(key, "name_or_id"); err != nil {
		return nil, err
	}
	if ci.cinfo == nil {
		return nil, &bridgeError{kind: abi.UnknownCallback, callback: ci.name, msg: "replaced by a reload while it was looked up; look it up again"}
	}
	return ci, nil
}

// resolveC resolves a callback named by a C string, the C argument what
// (its absence or bad UTF-8 is an error naming it).
func (bh *bridgeHost) resolveC(key *C.char, what string) (*cbInfo, error) {
	name, err := goString(key, what)
	if err != nil {
		return nil, err
	}
	return bh.resolve(name)
}

//export cbxgo_callback_find
func cbxgo_callback_find(h C.callbox_host, key *C.char, out *C.callbox_callback_info) *C.callbox_error {
	return entry("callbox_callback_find", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		return withHost(h, func(bh *bridgeHost) error {
			ci, err := bh.resolvePublished(key)
			if err != nil {
				return err
			}
			*out = *(*C.callbox_callback_info)(ci.cinfo)
			return nil
		})
	})
}

// limitsSize is callbox_limits' size now; limitsSize15 its size in C API
// 1.5, the least struct_size callbox_callback_limits takes.
const (
	limitsSize   = unsafe.Sizeof(C.callbox_limits{})
	limitsSize15 = unsafe.Offsetof(C.callbox_limits{}.max_wait_ns) // 1.5's struct ends before max_wait_ns
)

//export cbxgo_callback_limits
func cbxgo_callback_limits(h C.callbox_host, key *C.char, out *C.callbox_limits) *C.callbox_error {
	return entry("callbox_callback_limits", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		if size := uintptr(out.struct_size); size < limitsSize15 {
			return badArg(arg("out"), "struct_size is %d: set it to sizeof(callbox_limits), %d bytes since 1.5", uint64(size), limitsSize15)
		}
		return withHost(h, func(bh *bridgeHost) error {
			ci, err := bh.resolveC(key, "name_or_id")
			if err != nil {
				return err
			}
			info := ci.cb.Info()
			l := info.Limits
			full := C.callbox_limits{
				struct_size:  C.size_t(limitsSize),
				timeout_ns:   C.uint64_t(l.Timeout.Nanoseconds()),
				max_memory:   C.uint64_t(l.MaxMemory),
				fuel:         C.uint64_t(l.Fuel),
				max_stack:    C.uint64_t(l.MaxStack),
				max_output:   C.uint64_t(l.MaxOutput),
				caller_stack: C.uint64_t(info.CallerStack),
				max_wait_ns:  C.uint64_t(l.MaxWait.Nanoseconds()),
				max_cpu_ns:   C.uint64_t(l.MaxCPU.Nanoseconds()),
			}
			// A caller of an older version has a shorter struct: fill what
			// fits and write no byte past it.
			n := min(uintptr(out.struct_size), limitsSize)
			full.struct_size = C.size_t(n)
			copy(unsafe.Slice((*byte)(unsafe.Pointer(out)), n), unsafe.Slice((*byte)(unsafe.Pointer(&full)), n))
			return nil
		})
	})
}

//export cbxgo_callback_params
func cbxgo_callback_params(h C.callbox_host, key *C.char, out *C.callbox_param_info, capacity C.size_t, count *C.size_t) *C.callbox_error {
	return entry("callbox_callback_params", func() error {
		if err := outArg(count, "count"); err != nil {
			return err
		}
		if out == nil && capacity > 0 {
			return badArg(arg("out"), "NULL with a capacity of %d", uint64(capacity))
		}
		return withHost(h, func(bh *bridgeHost) error {
			ci, err := bh.resolvePublished(key)
			if err != nil {
				return err
			}
			n := len(ci.sig.Params)
			*count = C.size_t(n)
			if n > 0 && ci.cparams != nil && capacity > 0 {
				copy(unsafe.Slice(out, min(uintptr(capacity), uintptr(n))), unsafe.Slice((*C.callbox_param_info)(ci.cparams), n))
			}
			return nil
		})
	})
}

//export cbxgo_callback_refusal
func cbxgo_callback_refusal(h C.callbox_host, key, reason *C.char) *C.callbox_error {
	return entry("callbox_callback_refusal", func() error {
		if reason == nil {
			return badArg(arg("reason"), "NULL")
		}
		why := C.GoString(reason)
		return withHost(h, func(bh *bridgeHost) error {
			ci, err := bh.resolvePublished(key)
			if err != nil {
				return err
			}
			return ci.cb.Refuse(errors.New(why))
		})
	})
}

//export cbxgo_output_types
func cbxgo_output_types(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_type, nOut C.size_t) *C.callbox_error {
	return entry("callbox_output_types", func() error {
		return withHost(h, func(bh *bridgeHost) error {
			ci, err := bh.resolveC(callback, "callback")
			if err != nil {
				return err
			}
			in, err := typesFromDL((*dlpack.Tensor)(unsafe.Pointer(inputs)), uintptr(nIn))
			if err != nil {
				return err
			}
			specs, err := bh.outputTypes(ci, in)
			if err != nil {
				return err
			}
			if uintptr(nOut) != uintptr(len(specs)) {
				return badArg(arg("num_outputs"), "%d, but callback %q has %d results", uint64(nOut), ci.name, len(specs))
			}
			if len(specs) == 0 {
				return nil
			}
			if outputs == nil {
				return badArg(arg("outputs"), "NULL with a count of %d", len(specs))
			}
			outs := unsafe.Slice((*dlpack.Type)(unsafe.Pointer(outputs)), len(specs))
			for i, s := range specs {
				outs[i] = dlpack.Type{DType: dlpack.FromABI(s.DType), NDim: int32(len(s.Shape))}
				copy(outs[i].Shape[:], s.Shape)
			}
			return nil
		})
	})
}

// typesFromDL reads only the dtypes and shapes of n C tensors.
func typesFromDL(p *dlpack.Tensor, n uintptr) ([]abi.Tensor, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, badArg(arg("inputs"), "NULL with a count of %d", n)
	}
	if n > maxTensors {
		return nil, badArg(arg("inputs"), "count %d exceeds the maximum %d", n, maxTensors)
	}
	ts := unsafe.Slice(p, n)
	out := make([]abi.Tensor, n)
	for i := range ts {
		d, shape, err := dlpack.CheckType(&ts[i])
		if err != nil {
			return nil, dlError("input", i, err)
		}
		out[i] = abi.Tensor{DType: d, Shape: shape}
	}
	return out, nil
}

//export cbxgo_call
func cbxgo_call(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) *C.callbox_error {
	return entry("callbox_call", func() error {
		return callDL(context.Background(), uint64(h), nil, cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
	})
}

//export cbxgo_chain_call
func cbxgo_chain_call(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) *C.callbox_error {
	return entry("callbox_chain_call", func() error {
		if chain == nil {
			return badArg(arg("chain"), "NULL")
		}
		return callDL(context.Background(), uint64(h), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
	})
}

//export cbxgo_call_cancelable
func cbxgo_call_cancelable(h C.callbox_host, cancel C.callbox_cancel_token, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) *C.callbox_error {
	return entry("callbox_call_cancelable", func() error {
		tok, err := lookupCancel(uint64(cancel))
		if err != nil {
			return err
		}
		return callDL(tok.context(), uint64(h), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
	})
}

//export cbxgo_call_within
func cbxgo_call_within(h C.callbox_host, cancel C.callbox_cancel_token, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t, budgetNs C.uint64_t, expired *C.int32_t) *C.callbox_error {
	return entry("callbox_call_within", func() error {
		if err := outArg(expired, "expired"); err != nil {
			return err
		}
		*expired = 0
		tok, err := lookupCancel(uint64(cancel))
		if err != nil {
			return err
		}
		gaveUp, err := callWithin(tok.context(), uint64(budgetNs), uint64(h), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
		if gaveUp {
			*expired = 1
		}
		return err
	})
}

//export cbxgo_call_batch
func cbxgo_call_batch(h C.callbox_host, cancel C.callbox_cancel_token, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) *C.callbox_error {
	return entry("callbox_call_batch", func() error {
		tok, err := lookupCancel(uint64(cancel))
		if err != nil {
			return err
		}
		return callBatchDL(tok.context(), uint64(h), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
	})
}

//export cbxgo_cancel_token_new
func cbxgo_cancel_token_new(out *C.callbox_cancel_token) *C.callbox_error {
	return entry("callbox_cancel_token_new", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		*out = C.callbox_cancel_token(newCancel())
		return nil
	})
}

//export cbxgo_cancel_token_fire
func cbxgo_cancel_token_fire(cancel C.callbox_cancel_token) *C.callbox_error {
	return entry("callbox_cancel_token_fire", func() error {
		tok, err := lookupCancel(uint64(cancel))
		if err != nil {
			return err
		}
		if tok == nil {
			return badArg(arg("cancel"), "token 0 is no token")
		}
		tok.fire()
		return nil
	})
}

//export cbxgo_cancel_token_free
func cbxgo_cancel_token_free(cancel C.callbox_cancel_token) *C.callbox_error {
	return entry("callbox_cancel_token_free", func() error { return freeCancel(uint64(cancel)) })
}

//export cbxgo_cancel_on_signal
func cbxgo_cancel_on_signal(cancel C.callbox_cancel_token, signum C.int) *C.callbox_error {
	return entry("callbox_cancel_on_signal", func() error { return cancelOnSignal(uint64(cancel), int(signum)) })
}

//export cbxgo_tap
func cbxgo_tap(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t) *C.callbox_error {
	return entry("callbox_tap", func() error {
		return tapDL(uint64(h), nil, cbytes(callback), dlTensors(inputs), uintptr(nIn))
	})
}

//export cbxgo_chain_tap
func cbxgo_chain_tap(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t) *C.callbox_error {
	return entry("callbox_chain_tap", func() error {
		if chain == nil {
			return badArg(arg("chain"), "NULL")
		}
		return tapDL(uint64(h), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn))
	})
}

// cbytes and dlTensors view C arguments as the Go types callDL and tapDL
// take.
func cbytes(p *C.char) *byte                       { return (*byte)(unsafe.Pointer(p)) }
func dlTensors(p *C.callbox_tensor) *dlpack.Tensor { return (*dlpack.Tensor)(unsafe.Pointer(p)) }

//export cbxgo_barrier
func cbxgo_barrier(h C.callbox_host) *C.callbox_error {
	return entry("callbox_barrier", func() error {
		return withHost(h, func(bh *bridgeHost) error { return bh.h.Barrier(context.Background()) })
	})
}

//export cbxgo_barrier_cancelable
func cbxgo_barrier_cancelable(h C.callbox_host, cancel C.callbox_cancel_token, chain *C.char) *C.callbox_error {
	return entry("callbox_barrier_cancelable", func() error {
		tok, err := lookupCancel(uint64(cancel))
		if err != nil {
			return err
		}
		ctx := tok.context()
		return withHost(h, func(bh *bridgeHost) error {
			// A wait the token cut short is the host's Canceled error.
			if chain == nil {
				return bh.h.Barrier(ctx)
			}
			name, err := goString(chain, "chain")
			if err != nil {
				return err
			}
			return bh.chainBarrier(ctx, name)
		})
	})
}

// chainOp runs a barrier or a reset on a named chain.
func chainOp(h C.callbox_host, chain *C.char, op func(bh *bridgeHost, name string) error) error {
	return withHost(h, func(bh *bridgeHost) error {
		name, err := goString(chain, "chain")
		if err != nil {
			return err
		}
		return op(bh, name)
	})
}

//export cbxgo_chain_barrier
func cbxgo_chain_barrier(h C.callbox_host, chain *C.char) *C.callbox_error {
	return entry("callbox_chain_barrier", func() error {
		return chainOp(h, chain, func(bh *bridgeHost, name string) error {
			return bh.chainBarrier(context.Background(), name)
		})
	})
}

//export cbxgo_chain_reset
func cbxgo_chain_reset(h C.callbox_host, chain *C.char) *C.callbox_error {
	return entry("callbox_chain_reset", func() error {
		return chainOp(h, chain, func(bh *bridgeHost, name string) error {
			return bh.chainReset(context.Background(), name)
		})
	})
}

//export cbxgo_set_default_host
func cbxgo_set_default_host(h C.callbox_host) *C.callbox_error {
	return entry("callbox_set_default_host", func() error { return setDefault(uint64(h)) })
}

//export cbxgo_default_host
func cbxgo_default_host(out *C.callbox_host) *C.callbox_error {
	return entry("callbox_default_host", func() error {
		if err := outArg(out, "out"); err != nil {
			return err
		}
		*out = 0
		bh, err := getDefault(context.Background())
		if err != nil {
			return err
		}
		*out = C.callbox_host(bh.handle)
		return nil
	})
}

// dtypeInfo mirrors callbox_dtype_info.
type dtypeInfo struct {
	Name   *C.char
	DLPack dlpack.DType
	XLA    int32
	Bytes  uint32
	_      uint32
}

// dtypeTable is callbox_dtypes' table, in C memory for the process's
// life (built once, never freed: a few hundred bytes).
var dtypeTable = sync.OnceValue(func() []dtypeInfo {
	infos := dlpack.DTypes()
	p := (*dtypeInfo)(C.calloc(C.size_t(len(infos)), C.size_t(unsafe.Sizeof(dtypeInfo{}))))
	out := unsafe.Slice(p, len(infos))
	for i, d := range infos {
		out[i] = dtypeInfo{Name: C.CString(d.Name), DLPack: d.DLPack, XLA: d.XLA, Bytes: uint32(d.Bytes)}
	}
	return out
})

// kindInfo mirrors callbox_kind_info.
type kindInfo struct {
	Kind int32
	Code int32
	Name *C.char
}

// kindTable is callbox_kinds' table, in C memory for the process's life.
// It is also the table the library's own C code (exports.c: errors made
// where Go cannot run, in a fork child or without memory) reads its codes
// and names from, handed over when the library loads (init, below).
var kindTable = sync.OnceValue(func() []kindInfo {
	kinds := abi.Kinds()
	p := (*kindInfo)(C.calloc(C.size_t(len(kinds)), C.size_t(unsafe.Sizeof(kindInfo{}))))
	out := unsafe.Slice(p, len(kinds))
	for i, k := range kinds {
		out[i] = kindInfo{Kind: int32(k), Code: int32(k.Code(abi.StatusOK)), Name: C.CString(k.Ident())}
	}
	return out
})

func init() {
	tab := kindTable()
	C.cbx_kinds_ready((*C.callbox_kind_info)(unsafe.Pointer(&tab[0])), C.size_t(len(tab)))
}

// callbox_dtypes writes up to capacity descriptions of the dtypes callbox
// has into out and returns how many there are (the whole count, even when
// it is more than capacity): binding layers read the DLPack table from
// here instead of keeping their own.
//
//export cbxgo_dtypes
func cbxgo_dtypes(out *C.callbox_dtype_info, capacity C.size_t) (n C.size_t) {
	defer func() { _ = recover() }()
	tab := dtypeTable()
	if out != nil {
		copy(unsafe.Slice((*dtypeInfo)(unsafe.Pointer(out)), min(uintptr(capacity), uintptr(len(tab)))), tab)
	}
	return C.size_t(len(tab))
}
