//! The call frame (ABI.md §3): validated once on entry, then read through
//! typed views.

use core::cell::Cell;
use core::fmt;
use core::mem::size_of;
use core::slice;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::tensor::{List, Tensor, TensorMut};

const MAGIC: u32 = 0x3158_4243; // "CBX1"
const VERSION: u32 = 1;
const MAX_RANK: u32 = 32;
const FLAG_OUTPUT: u32 = 1 << 0;
const FLAG_ALIAS: u32 = 1 << 1;

/// The least alignment of a data buffer the ABI promises; the SDK checks it,
/// so views of every element type are aligned.
pub const MIN_DATA_ALIGN: u64 = 16;

/// The frame header, 32 bytes at an 8-aligned (in fact 64-aligned) address.
#[repr(C)]
struct Header {
    magic: u32,
    version: u32,
    n_inputs: u32,
    n_outputs: u32,
    tensors: u32,
    frame_size: u32,
    call_id: u64,
}

/// A tensor descriptor, 32 bytes.
#[repr(C)]
struct Desc {
    dtype: u32,
    rank: u32,
    dims: u32,
    flags: u32,
    data: u32,
    byte_len: u32,
    alias: u32,
    reserved: u32,
}

/// The linear memory a frame lives in: where guest address 0 is in this
/// process, and how many bytes are addressable. In a wasm guest that is
/// address 0 and the current memory size; native tests point it at a buffer.
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    pub(crate) base: usize,
    pub(crate) len: u64,
}

impl Memory {
    /// The guest's own linear memory.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn guest() -> Memory {
        Memory { base: 0, len: core::arch::wasm32::memory_size(0) as u64 * 65536 }
    }

    /// The address of guest offset `at` in this process. Callers have
    /// checked that `at` is inside the memory.
    fn ptr<T>(self, at: u64) -> *const T {
        (self.base + at as usize) as *const T
    }
}

/// One call: its inputs and outputs, validated.
///
/// A callback receives `&Frame` and borrows typed views from it:
/// [`input`](Frame::input) as often as it likes, each
/// [`output`](Frame::output) once. Views live as long as the call.
pub struct Frame<'f> {
    mem: Memory,
    descs: &'f [Desc],
    n_inputs: usize,
    call_id: u64,
    /// Outputs already lent out, one bit per output index below 64.
    taken: Cell<u64>,
}

/// Names a tensor in messages: "input 1", "output 0".
#[derive(Clone, Copy)]
struct Which(usize, usize);

impl fmt::Display for Which {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Which(k, n_in) if k < n_in => write!(f, "input {}", k),
            Which(k, n_in) => write!(f, "output {}", k - n_in),
        }
    }
}

fn malformed(what: fmt::Arguments<'_>) -> Error {
    Error::internal(format!("callbox: malformed call frame: {}", what))
}

impl<'f> Frame<'f> {
    /// Validates the frame at guest offset `at` in `mem` — every number the
    /// host wrote is checked here, once — and returns a view of it.
    ///
    /// Afterwards, for every descriptor: its dtype is known, its rank is at
    /// most 32, its dims are non-negative and 8-aligned inside the frame,
    /// `byte_len` is exactly the shape's size, the data is 16-aligned, an
    /// output's inside the frame after the metadata and an input's anywhere
    /// in memory but over the metadata, and an output's buffer overlaps no
    /// other buffer. The accessors rely on this and check only the index and
    /// the element type.
    ///
    /// # Safety
    ///
    /// `mem` must describe readable and writable memory that nothing else
    /// touches while the frame lives: in a guest, its own linear memory
    /// during the callback.
    #[inline(never)]
    pub(crate) unsafe fn open(mem: Memory, at: u32) -> Result<Frame<'f>> {
        let at = u64::from(at);
        if at == 0 || at % 8 != 0 || at + 32 > mem.len {
            return Err(malformed(format_args!(
                "header at {} is not 8-aligned inside the {}-byte memory",
                at, mem.len
            )));
        }
        let h = &*mem.ptr::<Header>(at);
        if h.magic != MAGIC || h.version != VERSION {
            return Err(malformed(format_args!(
                "magic {:#010x} version {}, want {:#010x} version {}",
                h.magic, h.version, MAGIC, VERSION
            )));
        }
        let end = at + u64::from(h.frame_size);
        if u64::from(h.frame_size) < 32 || end > mem.len {
            return Err(malformed(format_args!(
                "frame of {} bytes at {} does not fit the {}-byte memory",
                h.frame_size, at, mem.len
            )));
        }
        // Every metadata or data range must lie in the frame after the header.
        let inside = |p: u64, len: u64| p >= at + 32 && p + len <= end;

        let n_inputs = h.n_inputs as usize;
        let n = u64::from(h.n_inputs) + u64::from(h.n_outputs);
        let descs_at = u64::from(h.tensors);
        if descs_at % 8 != 0 || !inside(descs_at, n * 32) {
            return Err(malformed(format_args!(
                "{} descriptors at {} are not 8-aligned inside the frame [{}, {})",
                n, descs_at, at, end
            )));
        }
        let descs: &'f [Desc] = slice::from_raw_parts(mem.ptr(descs_at), n as usize);

        // Metadata first: it ends where the data may begin.
        let mut meta_end = descs_at + n * 32;
        for (k, d) in descs.iter().enumerate() {
            let which = Which(k, n_inputs);
            let dims_len = u64::from(d.rank) * 8;
            if d.rank > MAX_RANK || (d.rank > 0 && (d.dims % 8 != 0 || !inside(d.dims.into(), dims_len))) {
                return Err(malformed(format_args!(
                    "{}: rank {} dims at {} are not 8-aligned inside the frame (rank at most {})",
                    which, d.rank, d.dims, MAX_RANK
                )));
            }
            if d.rank > 0 {
                meta_end = meta_end.max(u64::from(d.dims) + dims_len);
            }
        }

        let frame = Frame { mem, descs, n_inputs, call_id: h.call_id, taken: Cell::new(0) };
        for (k, d) in descs.iter().enumerate() {
            let which = Which(k, n_inputs);
            let dtype = DType::from_code(d.dtype)
                .ok_or_else(|| malformed(format_args!("{}: unknown dtype code {}", which, d.dtype)))?;
            let alias = d.flags & FLAG_ALIAS != 0;
            let flags_ok = if k < n_inputs {
                d.flags == 0
            } else {
                d.flags & !FLAG_ALIAS == FLAG_OUTPUT && (!alias || (d.alias as usize) < n_inputs)
            };
            if !flags_ok {
                return Err(malformed(format_args!("{}: flags {:#x}, alias {}", which, d.flags, d.alias)));
            }
            // byte_len must be the shape's size. The product of the non-zero
            // dimensions must fit in u32 even for an empty tensor, so that
            // every dimension and stride fits in a wasm32 usize.
            let mut size = dtype.size() as u64;
            let mut empty = false;
            for &dim in frame.dims(k) {
                match dim {
                    0 => empty = true,
                    1..=0xFFFF_FFFF => size = size.saturating_mul(dim as u64),
                    _ => size = u64::MAX,
                }
            }
            if size > u64::from(u32::MAX) || u64::from(d.byte_len) != if empty { 0 } else { size } {
                return Err(malformed(format_args!(
                    "{}: byte_len {} does not match {}{}",
                    which,
                    d.byte_len,
                    dtype,
                    List(frame.dims(k))
                )));
            }
            // Outputs live in the frame's data area. An input (and so an
            // output passing one through) may also lie elsewhere in memory
            // (the host's zero-copy API places caller buffers there), but
            // never over the frame's metadata.
            let data = u64::from(d.data);
            let len = u64::from(d.byte_len);
            let placed = if k < n_inputs || alias {
                data + len <= mem.len && (data + len <= at || data >= meta_end)
            } else {
                data >= meta_end && inside(data, len)
            };
            if data % MIN_DATA_ALIGN != 0 || !placed {
                return Err(malformed(format_args!(
                    "{}: {} bytes at {} are not {}-aligned in memory outside the frame's metadata [{}, {})",
                    which, d.byte_len, data, MIN_DATA_ALIGN, at, meta_end
                )));
            }
        }
        // An output is written through a `&mut [T]`: no other buffer may
        // share a byte with it. (An aliased output is its input's buffer and
        // is never lent out mutably.)
        for (k, d) in descs.iter().enumerate().skip(n_inputs) {
            if d.flags & FLAG_ALIAS != 0 || d.byte_len == 0 {
                continue;
            }
            let span = |e: &Desc| (u64::from(e.data), u64::from(e.data) + u64::from(e.byte_len));
            let (lo, hi) = span(d);
            for (j, e) in descs.iter().enumerate() {
                let aliased = e.flags & FLAG_ALIAS != 0;
                if j != k && !aliased && e.byte_len != 0 && span(e).0 < hi && lo < span(e).1 {
                    return Err(malformed(format_args!(
                        "{} overlaps {}",
                        Which(k, n_inputs),
                        Which(j, n_inputs)
                    )));
                }
            }
        }
        Ok(frame)
    }

    /// The number of inputs.
    pub fn inputs(&self) -> usize {
        self.n_inputs
    }

    /// The number of outputs.
    pub fn outputs(&self) -> usize {
        self.descs.len() - self.n_inputs
    }

    /// The host's sequence number of this call on this instance.
    pub fn call_id(&self) -> u64 {
        self.call_id
    }

    /// Input `i` viewed as `&[T]`, with its shape.
    ///
    /// Fails with `INVALID_ARGUMENT` when there is no input `i`, when its
    /// dtype is not `T`'s, or (for `bool`) when a byte is neither 0 nor 1.
    pub fn input<T: Element>(&self, i: usize) -> Result<Tensor<'f, T>> {
        if i >= self.n_inputs {
            return Err(Error::invalid_argument(format!(
                "input {} does not exist: the call has {} inputs",
                i, self.n_inputs
            )));
        }
        let (dtype, data) = self.data::<T>(i)?;
        let data: &'f [T] = unsafe { slice::from_raw_parts(data, self.len(i)) };
        if T::DTYPE == DType::Pred {
            let bytes = unsafe { slice::from_raw_parts(data.as_ptr() as *const u8, data.len()) };
            if let Some(at) = bytes.iter().position(|&b| b > 1) {
                return Err(Error::invalid_argument(format!(
                    "input {} is pred, but element {} is {}, not 0 or 1",
                    i, at, bytes[at]
                )));
            }
        }
        Ok(Tensor::new(data, self.dims(i), dtype))
    }

    /// Input `i`, which must hold exactly one element (a rank-0 tensor, say),
    /// as a `T`.
    pub fn scalar<T: Element>(&self, i: usize) -> Result<T> {
        let t = self.input::<T>(i)?;
        match *t.data() {
            [v] => Ok(v),
            _ => Err(Error::invalid_argument(format!(
                "input {} is {}{}, not a single element",
                i,
                t.dtype(),
                List(t.shape())
            ))),
        }
    }

    /// Output `i` viewed as `&mut [T]`, with its shape. Its initial content
    /// is unspecified (a `bool` output starts all `false`): write every
    /// element.
    ///
    /// Each output can be borrowed once per call. Fails with
    /// `INVALID_ARGUMENT` when there is no output `i` or its dtype is not
    /// `T`'s, and with `INTERNAL` when it was already borrowed, when it passes
    /// an input through (`-> $x`: there is nothing to write), or when `i` is
    /// 64 or more.
    pub fn output<T: Element>(&self, i: usize) -> Result<TensorMut<'f, T>> {
        if i >= self.outputs() {
            return Err(Error::invalid_argument(format!(
                "output {} does not exist: the call has {} outputs",
                i,
                self.outputs()
            )));
        }
        let k = self.n_inputs + i;
        if self.descs[k].flags & FLAG_ALIAS != 0 {
            return Err(Error::internal(format!(
                "output {} passes input {} through; it has no buffer to write",
                i, self.descs[k].alias
            )));
        }
        let (dtype, data) = self.data::<T>(k)?;
        let bit = match 1u64.checked_shl(i as u32) {
            Some(bit) => bit,
            None => {
                return Err(Error::internal(format!(
                    "output {}: only the first 64 outputs can be borrowed",
                    i
                )))
            }
        };
        if self.taken.get() & bit != 0 {
            return Err(Error::internal(format!("output {} is already borrowed", i)));
        }
        self.taken.set(self.taken.get() | bit);
        let data = data as *mut T;
        if T::DTYPE == DType::Pred {
            // Not every byte is a valid bool: start from all false.
            unsafe { data.cast::<u8>().write_bytes(0, self.len(k)) };
        }
        let data: &'f mut [T] = unsafe { slice::from_raw_parts_mut(data, self.len(k)) };
        Ok(TensorMut::new(data, self.dims(k), dtype))
    }

    /// Descriptor `k`'s dimensions (validated by `open`).
    fn dims(&self, k: usize) -> &'f [i64] {
        let d = &self.descs[k];
        if d.rank == 0 {
            return &[];
        }
        unsafe { slice::from_raw_parts(self.mem.ptr(d.dims.into()), d.rank as usize) }
    }

    /// Descriptor `k`'s element count (validated by `open`).
    fn len(&self, k: usize) -> usize {
        let d = &self.descs[k];
        let size = DType::from_code(d.dtype).map_or(1, DType::size);
        d.byte_len as usize / size
    }

    /// Descriptor `k`'s dtype and data pointer, if `T` can view it.
    fn data<T: Element>(&self, k: usize) -> Result<(DType, *const T)> {
        let d = &self.descs[k];
        let dtype = DType::from_code(d.dtype).unwrap_or(DType::Pred);
        if !T::views(dtype) {
            let want = match T::DTYPE {
                DType::U16 => "u16, f16 or bf16",
                d => d.name(),
            };
            return Err(Error::invalid_argument(format!(
                "{} is {}, not {}",
                Which(k, self.n_inputs),
                dtype,
                want
            )));
        }
        debug_assert_eq!(size_of::<T>(), dtype.size());
        Ok((dtype, self.mem.ptr(d.data.into())))
    }
}
