//! Write callbox tensor callbacks in Rust.
//!
//! A callback is a function from a [`Frame`] — the call's input and output
//! tensors, already validated — to a [`Result`]. [`export!`] turns it into a
//! module export and records its signature in the module:
//!
//! ```ignore
//! callbox::export!(scale = "(x: f32[n], factor: f32[]) -> f32[n]", |f| {
//!     let x = f.input::<f32>(0)?;
//!     let factor: f32 = f.scalar(1)?;
//!     let mut y = f.output::<f32>(0)?;
//!     for (y, x) in y.iter_mut().zip(x.iter()) {
//!         *y = x * factor;
//!     }
//!     Ok(())
//! });
//! ```
//!
//! Build it as a `cdylib` for `wasm32-unknown-unknown` with `panic=abort`
//! (see the README). The crate also provides what every module exports once
//! (`callbox_abi_version`, `callbox_alloc`, `callbox_free`), reports an
//! [`Error`] through `callbox.error` with its [`Status`], logs through
//! `callbox.log` ([`log`], [`info!`], ...), and turns a panic into the host
//! error `guest aborted: panicked at <file>:<line>:<col>: <message>`.
//!
//! The ABI this implements is `abi/ABI.md` (version 1) in the callbox
//! repository.

mod dtype;
mod error;
// Natively (unit tests, `cargo check`) no frame is ever opened.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod frame;
mod host;
mod tensor;

pub use dtype::{DType, Element};
pub use error::{Error, Result, Status};
pub use frame::{Frame, MIN_DATA_ALIGN};
pub use host::{log, Level, ABI_VERSION};
pub use tensor::{Rows, RowsMut, Tensor, TensorMut};

/// Exports a callback and records its signature.
///
/// ```ignore
/// callbox::export!(name = "signature", callback);
/// ```
///
/// `name` becomes the export (`(frame: i32) -> i32`, ABI.md §1). The
/// signature (ABI.md §5) is checked by the host against every call before
/// the callback runs, so the callback may rely on its dtypes, ranks and
/// dimension equalities. `callback` is a closure or function taking
/// `&Frame` and returning `callbox::Result`: `Ok(())` returns status OK, an
/// [`Error`] returns its status and hands its message to the host.
///
/// The line `name = signature` goes into the `callbox.signatures` custom
/// section; the linker concatenates the lines of every `export!` in the
/// module. Doc comments and other attributes before `name` apply to the
/// exported function.
#[macro_export]
macro_rules! export {
    ($(#[$attr:meta])* $name:ident = $signature:literal, $callback:expr $(,)?) => {
        const _: () = {
            const LINE: &str = $crate::__signature_line(
                ::core::concat!(::core::stringify!($name), " = ", $signature, "\n"),
            );
            #[cfg_attr(target_arch = "wasm32", link_section = "callbox.signatures")]
            #[used]
            static SIGNATURE: [u8; LINE.len()] = $crate::__bytes(LINE);

            $(#[$attr])*
            #[no_mangle]
            pub extern "C" fn $name(frame: u32) -> i32 {
                $crate::__run(frame, $callback)
            }
        };
    };
}

/// Runs a callback on the frame at guest address `frame` and returns its
/// ABI status. Used by [`export!`].
#[doc(hidden)]
pub fn __run<F>(frame: u32, callback: F) -> i32
where
    F: FnOnce(&Frame<'_>) -> Result<()>,
{
    host::install_panic_hook();
    let result = match open(frame) {
        Ok(f) => callback(&f),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => 0,
        Err(e) => e.report(),
    }
}

/// The frame at `frame` in this guest's memory, validated.
fn open<'f>(frame: u32) -> Result<Frame<'f>> {
    #[cfg(target_arch = "wasm32")]
    {
        // Safety: during the callback the host does not touch guest memory,
        // and nothing else in the guest holds a reference into the frame.
        unsafe { Frame::open(frame::Memory::guest(), frame) }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = frame;
        Err(Error::internal("callbox: callbacks run only in a wasm32 guest"))
    }
}

/// Checks a signature-table line at compile time: `name = signature\n`, one
/// line, with an arrow. The host parses the signature fully at load.
#[doc(hidden)]
pub const fn __signature_line(line: &str) -> &str {
    let b = line.as_bytes();
    let mut i = 0;
    let mut arrow = false;
    while i + 1 < b.len() {
        if b[i] == b'\n' || b[i] == b'\r' {
            panic!("callbox::export!: the signature must be one line");
        }
        if b[i] == b'-' && b[i + 1] == b'>' {
            arrow = true;
        }
        i += 1;
    }
    if !arrow {
        panic!("callbox::export!: a signature looks like \"(x: f32[n]) -> f32[n]\"");
    }
    line
}

/// A string's bytes as an array, for a `static` in a custom section.
#[doc(hidden)]
pub const fn __bytes<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests;
