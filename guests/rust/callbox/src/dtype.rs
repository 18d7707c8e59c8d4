//! Element types (ABI.md §3, "Element types") and the Rust types that view them.

use core::fmt;

/// An element type of the ABI. The codes are XLA's `PrimitiveType` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DType {
    Pred = 1,
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

impl DType {
    /// The dtype with this code, or `None` for a code ABI v1 does not define.
    pub fn from_code(code: u32) -> Option<DType> {
        use DType::*;
        Some(match code {
            1 => Pred,
            2 => S8,
            3 => S16,
            4 => S32,
            5 => S64,
            6 => U8,
            7 => U16,
            8 => U32,
            9 => U64,
            10 => F16,
            11 => F32,
            12 => F64,
            15 => C64,
            16 => BF16,
            18 => C128,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        use DType::*;
        match self {
            Pred | S8 | U8 => 1,
            S16 | U16 | F16 | BF16 => 2,
            S32 | U32 | F32 => 4,
            S64 | U64 | F64 | C64 => 8,
            C128 => 16,
        }
    }

    /// The name signatures use: `f32`, `s64`, `pred`, ...
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            Pred => "pred",
            S8 => "s8",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F16 => "f16",
            F32 => "f32",
            F64 => "f64",
            C64 => "c64",
            BF16 => "bf16",
            C128 => "c128",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type a tensor's data can be viewed as: `&[T]` for an input,
/// `&mut [T]` for an output.
///
/// | dtype | `T` |
/// |---|---|
/// | pred | `bool` |
/// | s8, s16, s32, s64 | `i8`, `i16`, `i32`, `i64` |
/// | u8, u16, u32, u64 | `u8`, `u16`, `u32`, `u64` |
/// | f16, bf16 | `u16` (the raw bits) |
/// | f32, f64 | `f32`, `f64` |
/// | c64, c128 | `[f32; 2]`, `[f64; 2]` (real, imaginary) |
///
/// Sealed: every implementor has the dtype's size, an alignment of at most
/// 8 (the ABI guarantees 16), and accepts every bit pattern except `bool`,
/// whose bytes the SDK checks.
pub trait Element: Copy + 'static + sealed::Sealed {
    /// The dtype this type stands for.
    const DTYPE: DType;
    /// Whether a tensor of `dtype` can be viewed as this type.
    fn views(dtype: DType) -> bool {
        dtype == Self::DTYPE
    }
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

element! {
    bool => Pred,
    i8 => S8, i16 => S16, i32 => S32, i64 => S64,
    u8 => U8, u32 => U32, u64 => U64,
    f32 => F32, f64 => F64,
    [f32; 2] => C64, [f64; 2] => C128,
}

impl sealed::Sealed for u16 {}
impl Element for u16 {
    const DTYPE: DType = DType::U16;
    fn views(dtype: DType) -> bool {
        matches!(dtype, DType::U16 | DType::F16 | DType::BF16)
    }
}
