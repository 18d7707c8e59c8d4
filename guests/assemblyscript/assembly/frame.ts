// The call frame (ABI.md §3), read in place: a Frame is the frame header's
// address, a Tensor the address of one tensor descriptor, a View<T> the same
// descriptor read as T elements. Nothing is copied or allocated; everything
// is valid for the current call only.
import { DType, dtypeName, dtypeOf, dtypeShift } from "./dtype";
import { fail } from "./host";
import { Status, isStatus } from "./status";

// @ts-ignore: decorator
@inline const MAGIC: u32 = 0x31584243; // "CBX1"
// @ts-ignore: decorator
@inline const VERSION: u32 = 1;
// @ts-ignore: decorator
@inline const HEADER_SIZE: u64 = 32;
// @ts-ignore: decorator
@inline const DESC_SIZE: u64 = 32;
// @ts-ignore: decorator
@inline const MAX_RANK: u32 = 32;
// @ts-ignore: decorator
@inline const DATA_ALIGN: u32 = 16; // what ABI v1 promises for data buffers
// @ts-ignore: decorator
@inline const FLAG_OUTPUT: u32 = 1;
// @ts-ignore: decorator
@inline const FLAG_ALIAS: u32 = 2;

// Header field offsets.
// @ts-ignore: decorator
@inline const H_MAGIC = 0;
// @ts-ignore: decorator
@inline const H_VERSION = 4;
// @ts-ignore: decorator
@inline const H_INPUTS = 8;
// @ts-ignore: decorator
@inline const H_OUTPUTS = 12;
// @ts-ignore: decorator
@inline const H_TENSORS = 16;
// @ts-ignore: decorator
@inline const H_SIZE = 20;
// @ts-ignore: decorator
@inline const H_CALL_ID = 24;

// Descriptor field offsets.
// @ts-ignore: decorator
@inline const D_DTYPE = 0;
// @ts-ignore: decorator
@inline const D_RANK = 4;
// @ts-ignore: decorator
@inline const D_DIMS = 8;
// @ts-ignore: decorator
@inline const D_FLAGS = 12;
// @ts-ignore: decorator
@inline const D_DATA = 16;
// @ts-ignore: decorator
@inline const D_BYTE_LEN = 20;
// @ts-ignore: decorator
@inline const D_ALIAS = 24;

/**
 * One tensor of the call frame: dtype, shape and a pointer to dense
 * row-major data in guest memory. `Frame.input<T>` / `Frame.output<T>` give
 * the typed `View<T>` most callbacks want.
 */
@unmanaged
export class Tensor {
  /** The element type. */
  get dtype(): DType { return load<u32>(changetype<usize>(this), D_DTYPE); }

  /** The number of dimensions; 0 for a scalar. */
  get rank(): i32 { return load<u32>(changetype<usize>(this), D_RANK); }

  /** Dimension `i`, major to minor. */
  dim(i: i32): i32 {
    if (<u32>i >= <u32>this.rank) throw new RangeError("callbox: dimension " + i.toString() + " of a rank-" + this.rank.toString() + " tensor");
    return <i32>load<i64>(<usize>load<u32>(changetype<usize>(this), D_DIMS) + (<usize>i << 3));
  }

  /** The dimensions, major to minor (a fresh array). */
  get shape(): StaticArray<i32> {
    const out = new StaticArray<i32>(this.rank);
    for (let i = 0; i < out.length; i++) out[i] = this.dim(i);
    return out;
  }

  /** The number of elements: the product of the dimensions (1 for a scalar). */
  get length(): i32 { return this.byteLength >>> dtypeShift(this.dtype); }

  /** The size of the data in bytes. */
  get byteLength(): i32 { return load<u32>(changetype<usize>(this), D_BYTE_LEN); }

  /** The address of the first element; at least 16-byte aligned. */
  get dataStart(): usize { return <usize>load<u32>(changetype<usize>(this), D_DATA); }

  /** True for an output that passes an input through (a `$x` result). */
  get isAlias(): bool { return (load<u32>(changetype<usize>(this), D_FLAGS) & FLAG_ALIAS) != 0; }

  /** The data as T elements; aborts when this is not a T tensor. */
  view<T>(): View<T> {
    if (this.dtype != dtypeOf<T>()) throw new TypeError("callbox: a " + this.type + " tensor read as " + dtypeName(dtypeOf<T>()));
    return changetype<View<T>>(this);
  }

  /** The type as a signature writes it, e.g. "f32[3,4]". */
  get type(): string {
    let s = dtypeName(this.dtype) + "[";
    for (let i = 0; i < this.rank; i++) s += (i > 0 ? "," : "") + this.dim(i).toString();
    return s + "]";
  }
}

/**
 * A tensor's data as a flat array of T, like a Float32Array over the frame:
 * `x[i]` and `x[i] = v` are bounds-checked (an index out of range aborts),
 * `unchecked(x[i])` is not. Index `(i0, …, ik)` of a row-major tensor is
 * `Σ ij * Π_{l>j} dim(l)`.
 */
@final @unmanaged
export class View<T> extends Tensor {
  // The checked accessors are inlined into the caller's loop; only the
  // failing path (indexOutOfRange) stays a call, so x[i] costs a compare
  // and a load, not a function call per element.
  // @ts-ignore: decorator
  @operator("[]") @inline private get(i: i32): T {
    if (<u32>i >= (<u32>this.byteLength >>> alignof<T>())) indexOutOfRange(i, this.length);
    return load<T>(this.dataStart + (<usize>i << alignof<T>()));
  }

  // @ts-ignore: decorator
  @operator("[]=") @inline private set(i: i32, value: T): void {
    if (<u32>i >= (<u32>this.byteLength >>> alignof<T>())) indexOutOfRange(i, this.length);
    store<T>(this.dataStart + (<usize>i << alignof<T>()), value);
  }

  // @ts-ignore: decorator
  @operator("{}") @inline private getUnchecked(i: i32): T {
    return load<T>(this.dataStart + (<usize>i << alignof<T>()));
  }

  // @ts-ignore: decorator
  @operator("{}=") @inline private setUnchecked(i: i32, value: T): void {
    store<T>(this.dataStart + (<usize>i << alignof<T>()), value);
  }
}

// indexOutOfRange aborts an out-of-range x[i]: the cold path of View's
// inlined accessors, kept out of line.
function indexOutOfRange(i: i32, length: i32): void {
  throw new RangeError("callbox: index " + i.toString() + " is out of range for a tensor of " + length.toString() + " elements");
}

export type BoolView = View<bool>;
export type I8View = View<i8>;
export type I16View = View<i16>;
export type I32View = View<i32>;
export type I64View = View<i64>;
export type U8View = View<u8>;
export type U16View = View<u16>;
export type U32View = View<u32>;
export type U64View = View<u64>;
export type F32View = View<f32>;
export type F64View = View<f64>;

/**
 * The call frame a callback receives: its inputs, then its outputs, as the
 * signature declares them. `run` validates it before the callback sees it.
 */
@final @unmanaged
export class Frame {
  /** The number of inputs. */
  get numInputs(): i32 { return load<u32>(changetype<usize>(this), H_INPUTS); }

  /** The number of outputs (aliased ones included). */
  get numOutputs(): i32 { return load<u32>(changetype<usize>(this), H_OUTPUTS); }

  /** The host's sequence number of this call on this instance. */
  get callId(): u64 { return load<u64>(changetype<usize>(this), H_CALL_ID); }

  /** Tensor `i` of the frame: inputs are 0..numInputs-1, outputs follow. */
  tensor(i: i32): Tensor {
    const n = this.numInputs + this.numOutputs;
    if (<u32>i >= <u32>n) throw new RangeError("callbox: tensor " + i.toString() + " of a frame with " + n.toString());
    return changetype<Tensor>(<usize>load<u32>(changetype<usize>(this), H_TENSORS) + (<usize>i << 5));
  }

  /** Input `i` as T elements; aborts when it is not a T tensor. */
  input<T>(i: i32): View<T> {
    if (<u32>i >= <u32>this.numInputs) throw new RangeError("callbox: input " + i.toString() + " of " + this.numInputs.toString());
    return typed<T>(this.tensor(i), "input", i);
  }

  /**
   * Output `i` as T elements, to be filled entirely; aborts when it is not
   * a T tensor, or when it aliases an input (there is nothing to write).
   */
  output<T>(i: i32): View<T> {
    if (<u32>i >= <u32>this.numOutputs) throw new RangeError("callbox: output " + i.toString() + " of " + this.numOutputs.toString());
    const t = this.tensor(this.numInputs + i);
    if (t.isAlias) throw new TypeError("callbox: output " + i.toString() + " passes an input through and must not be written");
    return typed<T>(t, "output", i);
  }
}

// typed views t as T elements; what and i name it if it is not a T tensor.
function typed<T>(t: Tensor, what: string, i: i32): View<T> {
  if (t.dtype != dtypeOf<T>()) throw new TypeError("callbox: " + what + " " + i.toString() + " is " + t.type + ", not " + dtypeName(dtypeOf<T>()));
  return changetype<View<T>>(t);
}

/** A callback body: reads its inputs, fills its outputs, returns a status. */
export type Callback = (frame: Frame) => Status;

/**
 * Runs a callback on the frame the host passed to the export:
 *
 *     export function scale(frame: usize): Status {
 *       return run(frame, (f) => { ...; return Status.OK; });
 *     }
 *
 * It validates the frame first (a frame this SDK cannot read is reported
 * as INTERNAL with the reason, and the body does not run), reports a status
 * ABI v1 does not define as UNKNOWN, and frees what the call allocated.
 */
export function run(frame: usize, body: Callback): Status {
  let status = validate(frame);
  if (status == Status.OK) status = body(changetype<Frame>(frame));
  if (!isStatus(status)) status = Status.UNKNOWN;
  // No managed reference outlives the call (Frame and views are unmanaged),
  // so this is the point where the `minimal` runtime may collect.
  __collect();
  return status;
}

/**
 * Checks every number the host wrote into the frame against ABI v1, so that
 * the accessors above can trust them: header, counts, dtypes, ranks, flags,
 * byte lengths that match the shapes, and where everything lies. The
 * metadata (header, descriptors, dims) is in the frame; an output's data is
 * in the frame after the metadata; an input's data (which the host's
 * zero-copy API may place anywhere) is in memory, clear of the metadata; an
 * aliased output is its input's buffer. Data is 16-byte aligned.
 */
function validate(frame: usize): Status {
  const memEnd = <u64>memory.size() << 16;
  if (frame == 0 || (frame & 7) != 0 || <u64>frame + HEADER_SIZE > memEnd) return malformed("frame pointer " + frame.toString());
  const magic = load<u32>(frame, H_MAGIC);
  if (magic != MAGIC) return malformed("magic 0x" + magic.toString(16) + ", want 0x" + MAGIC.toString(16));
  const version = load<u32>(frame, H_VERSION);
  if (version != VERSION) return malformed("version " + version.toString() + ", this SDK implements " + VERSION.toString());
  const start = <u64>frame;
  const end = start + <u64>load<u32>(frame, H_SIZE);
  if (end < start + HEADER_SIZE || end > memEnd) return malformed("frame_size " + (end - start).toString() + " at " + start.toString() + " in " + memEnd.toString() + " bytes of memory");
  const nIn = load<u32>(frame, H_INPUTS);
  const n = <u64>nIn + <u64>load<u32>(frame, H_OUTPUTS);
  const tensors = <u64>load<u32>(frame, H_TENSORS);
  if ((tensors & 7) != 0 || tensors < start + HEADER_SIZE || tensors + n * DESC_SIZE > end) return malformed("descriptor array at " + tensors.toString());

  // The metadata: each descriptor, and the end of everything the host
  // checks is unchanged after the call.
  let metaEnd = tensors + n * DESC_SIZE;
  for (let k: u64 = 0; k < n; k++) {
    const d = <usize>(tensors + k * DESC_SIZE);
    const code = load<u32>(d, D_DTYPE);
    if (dtypeShift(code) < 0) return malformed(nameOf(k, nIn) + ": unknown dtype " + code.toString());
    const rank = load<u32>(d, D_RANK);
    if (rank > MAX_RANK) return malformed(nameOf(k, nIn) + ": rank " + rank.toString());
    const flags = load<u32>(d, D_FLAGS);
    const want = k < <u64>nIn ? 0 : FLAG_OUTPUT;
    if ((flags & ~FLAG_ALIAS) != want || (want == 0 && flags != 0)) return malformed(nameOf(k, nIn) + ": flags " + flags.toString());
    const dims = <u64>load<u32>(d, D_DIMS);
    if (rank > 0) {
      if ((dims & 7) != 0 || dims < start + HEADER_SIZE || dims + <u64>rank * 8 > end) return malformed(nameOf(k, nIn) + ": dims pointer " + dims.toString());
      metaEnd = max(metaEnd, dims + <u64>rank * 8);
    }
  }

  // The shapes and the buffers.
  for (let k: u64 = 0; k < n; k++) {
    const d = <usize>(tensors + k * DESC_SIZE);
    const rank = load<u32>(d, D_RANK);
    const dims = <u64>load<u32>(d, D_DIMS);
    // Each dimension is below 2^31 and the product is only extended while
    // it is below 2^32, so it cannot overflow.
    let elems: u64 = 1;
    let empty = false;
    for (let j: u32 = 0; j < rank; j++) {
      const dim = load<i64>(<usize>(dims + <u64>j * 8));
      if (dim < 0) return malformed(nameOf(k, nIn) + ": dimension " + j.toString() + " is " + dim.toString());
      if (dim > <i64>i32.MAX_VALUE) {
        return fail(Status.INVALID_ARGUMENT, "callbox: " + nameOf(k, nIn) + " dimension " + j.toString() + " is " + dim.toString() + ", beyond the i32 indices of this SDK");
      }
      if (dim == 0) empty = true;
      else if (elems <= <u64>u32.MAX_VALUE) elems *= <u64>dim;
    }
    if (empty) elems = 0;
    const byteLen = <u64>load<u32>(d, D_BYTE_LEN);
    if (elems > <u64>u32.MAX_VALUE || elems << dtypeShift(load<u32>(d, D_DTYPE)) != byteLen) {
      return malformed(nameOf(k, nIn) + ": byte_len " + byteLen.toString() + " does not match its dtype and shape");
    }
    const data = <u64>load<u32>(d, D_DATA);
    if ((data & (DATA_ALIGN - 1)) != 0) return malformed(nameOf(k, nIn) + ": data pointer " + data.toString() + " is not " + DATA_ALIGN.toString() + "-byte aligned");
    const flags = load<u32>(d, D_FLAGS);
    if ((flags & FLAG_ALIAS) != 0) {
      const a = load<u32>(d, D_ALIAS);
      const src = <usize>(tensors + <u64>a * DESC_SIZE);
      if (a >= nIn || load<u32>(src, D_DATA) != <u32>data || load<u32>(src, D_BYTE_LEN) != <u32>byteLen) {
        return malformed(nameOf(k, nIn) + ": alias of input " + a.toString() + " does not match that input");
      }
    } else if (k >= <u64>nIn ? data < metaEnd || data + byteLen > end : data + byteLen > memEnd || (data < metaEnd && data + byteLen > start)) {
      return malformed(nameOf(k, nIn) + ": data at " + data.toString() + " (" + byteLen.toString() + " bytes) is " +
        (k >= <u64>nIn ? "outside the frame's buffers" : "outside memory or over the frame's metadata"));
    }
  }
  return Status.OK;
}

// nameOf names descriptor k for a message: "input 1", "output 0".
function nameOf(k: u64, nIn: u32): string {
  return k < <u64>nIn ? "input " + k.toString() : "output " + (k - <u64>nIn).toString();
}

function malformed(reason: string): Status {
  return fail(Status.INTERNAL, "callbox: malformed call frame: " + reason);
}
