/** Element type codes (ABI.md §3): XLA's PrimitiveType numbers. */
export enum DType {
  PRED = 1,
  S8 = 2,
  S16 = 3,
  S32 = 4,
  S64 = 5,
  U8 = 6,
  U16 = 7,
  U32 = 8,
  U64 = 9,
  F16 = 10,
  F32 = 11,
  F64 = 12,
  C64 = 15,
  BF16 = 16,
  C128 = 18,
}

// log2 of each code's element size, indexed by code; 0xff marks a code
// ABI v1 does not define.
const SHIFTS = memory.data<u8>([
  0xff, 0, 0, 1, 2, 3, 0, 1, 2, 3, 1, 2, 3, 0xff, 0xff, 3, 1, 0xff, 4,
]);
const NUM_CODES: u32 = 19;

/** log2 of the element size of `code`, or -1 when ABI v1 has no such code. */
export function dtypeShift(code: u32): i32 {
  if (code >= NUM_CODES) return -1;
  const s = load<u8>(SHIFTS + code);
  return s == 0xff ? -1 : <i32>s;
}

/** The ABI name of a dtype code, as signatures write it ("f32", "s64"). */
export function dtypeName(code: u32): string {
  switch (code) {
    case DType.PRED: return "pred";
    case DType.S8: return "s8";
    case DType.S16: return "s16";
    case DType.S32: return "s32";
    case DType.S64: return "s64";
    case DType.U8: return "u8";
    case DType.U16: return "u16";
    case DType.U32: return "u32";
    case DType.U64: return "u64";
    case DType.F16: return "f16";
    case DType.F32: return "f32";
    case DType.F64: return "f64";
    case DType.C64: return "c64";
    case DType.BF16: return "bf16";
    case DType.C128: return "c128";
  }
  return "dtype " + code.toString();
}

/**
 * The dtype of the AssemblyScript element type T, resolved at compile time:
 * bool is pred, i8..i64 are s8..s64, u8..u64 are u8..u64, f32 and f64.
 * (f16, bf16 and the complex types have no AssemblyScript type; read them
 * through a u16 / f32 / f64 view of `Tensor.dataStart`.)
 */
// @ts-ignore: decorator
@inline
export function dtypeOf<T>(): DType {
  if (isBoolean<T>()) return DType.PRED;
  if (isFloat<T>()) return sizeof<T>() == 4 ? DType.F32 : DType.F64;
  if (isInteger<T>() && !isReference<T>()) {
    if (isSigned<T>()) {
      if (sizeof<T>() == 1) return DType.S8;
      if (sizeof<T>() == 2) return DType.S16;
      if (sizeof<T>() == 4) return DType.S32;
      return DType.S64;
    }
    if (sizeof<T>() == 1) return DType.U8;
    if (sizeof<T>() == 2) return DType.U16;
    if (sizeof<T>() == 4) return DType.U32;
    return DType.U64;
  }
  ERROR("callbox: a tensor element type must be bool, i8..i64, u8..u64, f32 or f64");
  return 0;
}
