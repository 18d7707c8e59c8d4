//! The host side of the ABI: the `callbox` imports, the panic hook, and the
//! exports every module needs once (ABI.md §1).

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering};

#[cfg(target_arch = "wasm32")]
mod imports {
    #[link(wasm_import_module = "callbox")]
    extern "C" {
        pub fn error(ptr: *const u8, len: usize);
        pub fn log(level: i32, ptr: *const u8, len: usize);
    }
}

/// Sets the message of the current call's failure (`callbox.error`); the
/// last one wins. Callbacks return an [`Error`](crate::Error) instead.
pub(crate) fn error(message: &str) {
    #[cfg(target_arch = "wasm32")]
    unsafe {
        imports::error(message.as_ptr(), message.len())
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("callbox error: {}", message);
}

/// A log level of `callbox.log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// Emits one log line through the host (`callbox.log`). The host caps the
/// bytes logged per call (`max_log`) and drops lines past the cap.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    unsafe {
        imports::log(level as i32, message.as_ptr(), message.len())
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("callbox {:?}: {}", level, message);
}

/// Logs a `format!` line at debug level.
#[macro_export]
macro_rules! debug {
    ($($fmt:tt)+) => { $crate::log($crate::Level::Debug, &::std::format!($($fmt)+)) };
}
/// Logs a `format!` line at info level.
#[macro_export]
macro_rules! info {
    ($($fmt:tt)+) => { $crate::log($crate::Level::Info, &::std::format!($($fmt)+)) };
}
/// Logs a `format!` line at warn level.
#[macro_export]
macro_rules! warn {
    ($($fmt:tt)+) => { $crate::log($crate::Level::Warn, &::std::format!($($fmt)+)) };
}
/// Logs a `format!` line at error level (a log line; it does not fail the call).
#[macro_export]
macro_rules! error {
    ($($fmt:tt)+) => { $crate::log($crate::Level::Error, &::std::format!($($fmt)+)) };
}

/// Installs, once per instance, the panic hook that reports a panic the way
/// ABI.md §4 ("Panics") asks: the message and its location go to
/// `callbox.error`, then `panic=abort` executes `unreachable`, and the host
/// reports `guest aborted: panicked at src/lib.rs:7:9: <message>`.
pub(crate) fn install_panic_hook() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::Relaxed) {
        return;
    }
    std::panic::set_hook(std::boxed::Box::new(|info| {
        // Formatted on the stack: the panic may be an allocation failure.
        let mut buf = Truncating { buf: [0; 1024], len: 0 };
        let payload = info.payload();
        let message = match payload.downcast_ref::<&str>() {
            Some(s) => s,
            None => payload.downcast_ref::<String>().map_or("Box<dyn Any>", |s| s),
        };
        let _ = match info.location() {
            Some(l) => write!(buf, "panicked at {}:{}:{}: {}", l.file(), l.line(), l.column(), message),
            None => write!(buf, "panicked: {}", message),
        };
        error(buf.as_str());
    }));
}

/// A fixed buffer that keeps the first `N` bytes written, cut at a UTF-8
/// character boundary.
struct Truncating<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Truncating<N> {
    fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> Write for Truncating<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(N - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The ABI version this SDK implements.
pub const ABI_VERSION: i32 = 1;

#[cfg(target_arch = "wasm32")]
mod exports {
    use std::alloc::{alloc, dealloc, Layout};

    /// The largest alignment `callbox_alloc` must honour (ABI.md §1).
    const MAX_ALIGN: u32 = 1 << 16;

    #[no_mangle]
    extern "C" fn callbox_abi_version() -> i32 {
        super::ABI_VERSION
    }

    /// The layout of a `callbox_alloc(size, align)` block, or `None` when the
    /// request is not one the ABI allows. A zero size gets one byte, so every
    /// block has a distinct non-null address.
    fn layout(size: u32, align: u32) -> Option<Layout> {
        if align > MAX_ALIGN {
            return None;
        }
        Layout::from_size_align(size.max(1) as usize, align as usize).ok()
    }

    #[no_mangle]
    extern "C" fn callbox_alloc(size: u32, align: u32) -> u32 {
        match layout(size, align) {
            Some(l) => unsafe { alloc(l) as u32 },
            None => 0,
        }
    }

    #[no_mangle]
    unsafe extern "C" fn callbox_free(ptr: u32, size: u32, align: u32) {
        if let (true, Some(l)) = (ptr != 0, layout(size, align)) {
            dealloc(ptr as *mut u8, l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncating_keeps_whole_characters() {
        let mut b = Truncating { buf: [0; 5], len: 0 };
        b.write_str("abééé").unwrap();
        assert_eq!(b.as_str(), "abé");
    }
}
