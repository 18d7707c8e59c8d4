//! Callback errors: a status (ABI.md §4) and a message for the host.

use std::borrow::Cow;
use std::fmt;

/// A failure status a callback returns (ABI.md §4; the absl / XLA FFI error
/// codes). Success is `Ok(())`, so there is no `Ok` status here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    Unknown = 2,
    InvalidArgument = 3,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Internal = 13,
}

/// A callback's error: the status the host sees and the message it reports
/// as the guest message (`callback "x" failed: guest returned
/// INVALID_ARGUMENT: <message>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: Cow<'static, str>,
}

/// The result of a callback, or of anything it calls.
pub type Result<T = (), E = Error> = core::result::Result<T, E>;

impl Error {
    /// An error with the given status and message.
    pub fn new(status: Status, message: impl Into<Cow<'static, str>>) -> Error {
        Error { status, message: message.into() }
    }
    /// `INVALID_ARGUMENT`: the inputs are wrong (a negative length, a NaN).
    pub fn invalid_argument(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::InvalidArgument, message)
    }
    /// `FAILED_PRECONDITION`: the callback's own state forbids the call.
    pub fn failed_precondition(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::FailedPrecondition, message)
    }
    /// `RESOURCE_EXHAUSTED`: out of memory or another budget.
    pub fn resource_exhausted(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::ResourceExhausted, message)
    }
    /// `UNIMPLEMENTED`: a case the callback does not handle.
    pub fn unimplemented(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::Unimplemented, message)
    }
    /// `INTERNAL`: a bug in the callback or the SDK.
    pub fn internal(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::Internal, message)
    }
    /// `UNKNOWN`: anything else.
    pub fn unknown(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Status::Unknown, message)
    }

    /// The status the callback returns.
    pub fn status(&self) -> Status {
        self.status
    }
    /// The message the host reports.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Hands the message to the host (`callbox.error`) and returns the status
    /// code for the callback to return. Out of line: one copy per module.
    #[inline(never)]
    pub(crate) fn report(&self) -> i32 {
        crate::host::error(&self.message);
        self.status as i32
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// Returns early with an error: `bail!(InvalidArgument, "x[{}] is NaN", i)`.
/// The first argument names a [`Status`] variant; the rest is `format!`.
#[macro_export]
macro_rules! bail {
    ($status:ident, $($fmt:tt)+) => {
        return ::core::result::Result::Err($crate::Error::new(
            $crate::Status::$status,
            ::std::format!($($fmt)+),
        ))
    };
}

/// Returns early with an error unless a condition holds:
/// `ensure!(k > 0, InvalidArgument, "k = {} must be positive", k)`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $status:ident, $($fmt:tt)+) => {
        if !$cond {
            $crate::bail!($status, $($fmt)+);
        }
    };
}
