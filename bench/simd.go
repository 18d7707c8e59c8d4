package bench

import (
	"fmt"
	"math"

	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
)

// The SIMD variants: callbox running scale and matmul compiled with
// simd128 (guests/bench/kernels_simd.c, embedded as
// guests/prebuilt/bench-kernels_simd.wasm), copying and in a zero-copy
// session, on every engine. They compute the scalar kernels' results bit
// for bit; the report compares them with native Go's loop and, at 32 MiB,
// copying with zero-copy (target 11).

// SIMDKernels are the callbacks of the SIMD module.
var SIMDKernels = []string{"scale", "matmul"}

// SIMDKernelsModule is the simd128 benchmark module
// (guests/bench/kernels_simd.c), embedded through guests/prebuilt.
func SIMDKernelsModule() ([]byte, error) { return prebuilt.Module("bench", "kernels_simd") }

// simdSupports reports whether the SIMD module runs the workload: the
// single-call scale and matmul workloads.
func simdSupports(w Workload) bool {
	return !w.Chain() && (w.Kernel == "scale" || w.Kernel == "matmul")
}

// simdVariants are the SIMD callbox variants, for the engines this build
// has.
func simdVariants() []Variant {
	var vs []Variant
	for _, e := range Engines() {
		vs = append(vs,
			Variant{ID: "callbox-" + e + ":simd", Name: "callbox " + e + ": simd128 kernel, copy", Group: GroupCallbox, Engine: e, Mode: ModeDefault, SIMD: true},
			Variant{ID: "callbox-" + e + ":simd-zero-copy", Name: "callbox " + e + ": simd128 kernel, zero-copy session", Group: GroupCallbox, Engine: e, Mode: ModeZeroCopy, SIMD: true},
		)
	}
	return vs
}

// kernels is the module a callbox variant loads and the callbacks in it.
func (v Variant) kernels() ([]byte, []string, error) {
	if v.SIMD {
		wasm, err := SIMDKernelsModule()
		return wasm, SIMDKernels, err
	}
	wasm, err := KernelsModule()
	return wasm, Kernels, err
}

// SIMD target limits.
const (
	simdNativeLimit   = 1.2 // SIMD scale in a zero-copy session / native Go, at most
	simdZeroCopyLimit = 2.5 // 32 MiB SIMD scale copying / zero-copy, at least
)

// simdTarget is target 11: the SIMD scale kernel against native Go's loop,
// and what zero-copy saves at 32 MiB once the kernel is that fast. The
// kernel is timed in a zero-copy session, which copies nothing, so the
// ratio is the kernel's and the call's cost against Go's loop over the
// same slices.
func (r *Report) simdTarget() Target {
	t := Target{N: 11, Title: "SIMD scale (zero-copy) within 1.2x of native Go; zero-copy >= 2.5x faster than copying at 32 MiB with the SIMD kernel"}
	for _, e := range Engines() {
		for _, wl := range []string{"scale-64KiB", "scale-4MiB", "scale-32MiB"} {
			x, wall := r.ratios(wl, "callbox-"+e+":simd-zero-copy", "go-native")
			t.Checks = append(t.Checks, ratioCheck(fmt.Sprintf("%s %s: SIMD zero-copy / native Go", e, wl), x, wall, simdNativeLimit, true))
		}
	}
	for _, e := range Engines() {
		x, wall := r.ratios("scale-32MiB", "callbox-"+e+":simd", "callbox-"+e+":simd-zero-copy")
		t.Checks = append(t.Checks, ratioCheck(e+" scale-32MiB: SIMD copying / SIMD zero-copy", x, wall, simdZeroCopyLimit, false))
	}
	return t
}

// simdReading is the report's paragraph on the SIMD kernels: how they
// compare with native Go and with the scalar kernel, and how much
// zero-copy can save with them at 32 MiB, per engine.
func (r *Report) simdReading() []string {
	var out []string
	for _, e := range Engines() {
		simd := r.ratio("scale-32MiB", "callbox-"+e+":simd-zero-copy", "go-native")
		scalar := r.ratio("scale-32MiB", "callbox-"+e+":zero-copy", "go-native")
		copying := r.ratio("scale-32MiB", "callbox-"+e+":simd", "callbox-"+e+":simd-zero-copy")
		scalarCopying := r.ratio("scale-32MiB", "callbox-"+e, "callbox-"+e+":zero-copy")
		if math.IsNaN(simd) || math.IsNaN(copying) {
			continue
		}
		s := fmt.Sprintf("**SIMD (%s):** the simd128 scale kernel in a zero-copy session takes %s native Go's loop at 32 MiB (the scalar kernel %s), %s at 4 MiB and %s at 64 KiB; "+
			"with it, copying costs %s zero-copy at 32 MiB (scalar %s): the faster the kernel, the larger the share of a copying call the copies are.",
			e, fmtRatio(simd), fmtRatio(scalar), fmtRatio(r.ratio("scale-4MiB", "callbox-"+e+":simd-zero-copy", "go-native")),
			fmtRatio(r.ratio("scale-64KiB", "callbox-"+e+":simd-zero-copy", "go-native")), fmtRatio(copying), fmtRatio(scalarCopying))
		if z, c := r.result("scale-32MiB", "callbox-"+e+":simd-zero-copy"), r.result("scale-32MiB", "go-copy"); z != nil && c != nil {
			best := (z.Cost() + c.Cost()) / z.Cost()
			s += fmt.Sprintf(" The SIMD kernel alone takes %s and Go's own copy of the same bytes (the floor) %s: with copies no dearer than that, copying would cost (kernel + copies) / kernel = %s of zero-copy.", formatNs(z.Cost()), formatNs(c.Cost()), fmtRatio(best))
			if best < simdZeroCopyLimit {
				s += " That is below 2.5x: 2.5x needs the two copies to take 1.5x the kernel, each copy of 32 MiB 0.75x of a pass that reads 32 MiB and writes 32 MiB, so the target sits at the edge of what this machine's memory allows. A likely reason the copies are that cheap: Go's memmove moves blocks this large with non-temporal stores (runtime/memmove_amd64.s), which do not read the destination before writing it, while a WebAssembly kernel has only ordinary stores (simd128 has none other)."
			}
		}
		if mm := r.ratio("matmul-256", "callbox-"+e+":simd", "callbox-"+e); !math.IsNaN(mm) {
			s += fmt.Sprintf(" matmul 256³ with simd128 takes %s the scalar kernel's time.", fmtRatio(mm))
		}
		out = append(out, s)
	}
	return out
}
