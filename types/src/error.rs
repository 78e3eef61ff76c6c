//! The one error type of torchfn.
//!
//! Every fallible function returns [`Result`]. An [`Error`] has a [`kind`](Error::kind) that
//! names the Python exception PyTorch raises in the same situation, so code ported from PyTorch
//! (and the conformance suite) can match on it. Errors that a user's own hook returns travel
//! through dispatch unchanged and can be recovered with [`Error::downcast_ref`].
//!
//! An `Error` is one pointer wide, so `Result<usize>` and `Result<Tensor>` come back in
//! registers: dispatch returns results through several layers, and errors are the cold path.

use std::fmt;

/// The result type of every fallible torchfn function.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, named after the Python exception PyTorch raises for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Wrong type of argument, missing or extra arguments, no override handled a call.
    Type,
    /// Right type, wrong value (a shape that does not fit, a bad mode string).
    Value,
    /// An index or dimension out of range.
    Index,
    /// Everything else PyTorch reports as `RuntimeError` (broadcasting, dtype mismatches,
    /// runaway recursion in a hook).
    Runtime,
    /// The operation exists but is not implemented for these inputs.
    NotImplemented,
    /// The operating system refused a file operation (not found, no permission, disk full);
    /// the message names the file.
    Os,
    /// A value that tracing cannot know was read while tracing (`torch.fx`'s `TraceError`):
    /// `item()`, the data, or a shape without example inputs.
    Trace,
    /// An error of the user's own type, returned by a hook and passed through unchanged.
    User,
}

impl ErrorKind {
    /// The name of the Python exception class this kind stands for (`"TypeError"`, ...).
    /// User errors report `"UserError"`.
    pub fn python_name(self) -> &'static str {
        match self {
            ErrorKind::Type => "TypeError",
            ErrorKind::Value => "ValueError",
            ErrorKind::Index => "IndexError",
            ErrorKind::Runtime => "RuntimeError",
            ErrorKind::NotImplemented => "NotImplementedError",
            ErrorKind::Os => "OSError",
            ErrorKind::Trace => "TraceError",
            ErrorKind::User => "UserError",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.python_name())
    }
}

/// A torchfn error: a [`ErrorKind`] and a message, or a user's own error carried unchanged.
///
/// `Display` prints the message alone; `Debug` prefixes it with the Python exception name.
pub struct Error(Box<Repr>);

enum Repr {
    Torch {
        kind: ErrorKind,
        message: String,
    },
    /// The `TypeError` of a call that every hook and mode declined.
    Declined(String),
    User(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// An error of the given kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error(Box::new(Repr::Torch { kind, message: message.into() }))
    }

    /// A `TypeError`.
    pub fn type_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Type, message)
    }

    /// A `ValueError`.
    pub fn value_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Value, message)
    }

    /// An `IndexError`.
    pub fn index_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Index, message)
    }

    /// A `RuntimeError`.
    pub fn runtime_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Runtime, message)
    }

    /// A `NotImplementedError`.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotImplemented, message)
    }

    /// An `OSError`: a file operation failed. The message should name the file.
    pub fn os_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Os, message)
    }

    /// Wraps a user's own error so that it passes through dispatch unchanged.
    ///
    /// ```
    /// # use torchfn::Error;
    /// #[derive(Debug)]
    /// struct Overheated(f64);
    /// impl std::fmt::Display for Overheated {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         write!(f, "overheated at {} degrees", self.0)
    ///     }
    /// }
    /// impl std::error::Error for Overheated {}
    ///
    /// let err = Error::user(Overheated(99.0));
    /// assert_eq!(err.downcast_ref::<Overheated>().unwrap().0, 99.0);
    /// assert_eq!(err.to_string(), "overheated at 99 degrees");
    /// ```
    pub fn user(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error(Box::new(Repr::User(Box::new(error))))
    }

    /// The `TypeError` of a call that every hook and mode declined (returned
    /// `NotImplemented`), which a binary operator answers by trying its reflected form.
    #[doc(hidden)]
    pub fn declined(message: impl Into<String>) -> Self {
        Error(Box::new(Repr::Declined(message.into())))
    }

    /// True for the `TypeError` of a call that every hook and mode declined: what Python's
    /// binary operators turn into `NotImplemented` before trying the reflected operator.
    pub fn is_declined(&self) -> bool {
        matches!(&*self.0, Repr::Declined(_))
    }

    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match &*self.0 {
            Repr::Torch { kind, .. } => *kind,
            Repr::Declined(_) => ErrorKind::Type,
            Repr::User(_) => ErrorKind::User,
        }
    }

    /// The user's own error, if this is one of type `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match &*self.0 {
            Repr::User(inner) => inner.downcast_ref::<E>(),
            Repr::Torch { .. } | Repr::Declined(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Torch { message, .. } | Repr::Declined(message) => f.write_str(message),
            Repr::User(inner) => fmt::Display::fmt(inner, f),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Torch { kind, message } => write!(f, "{kind}: {message}"),
            Repr::Declined(message) => write!(f, "TypeError: {message}"),
            Repr::User(inner) => write!(f, "UserError: {inner:?}"),
        }
    }
}

/// A user error is transparent: its `source` is the user error's own source.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            Repr::User(inner) => inner.source(),
            Repr::Torch { .. } | Repr::Declined(_) => None,
        }
    }
}

/// Returns early with an error of the given kind and a formatted message.
#[doc(hidden)]
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($fmt:tt)+) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, format!($($fmt)+)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Mine(u8);
    impl fmt::Display for Mine {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "mine {}", self.0)
        }
    }
    impl std::error::Error for Mine {}

    #[test]
    fn user_errors_downcast_and_display_unchanged() {
        let err = Error::user(Mine(7));
        assert_eq!(err.kind(), ErrorKind::User);
        assert_eq!(err.downcast_ref::<Mine>(), Some(&Mine(7)));
        assert_eq!(err.to_string(), "mine 7");
        assert!(Error::type_error("x").downcast_ref::<Mine>().is_none());
    }

    #[test]
    fn kinds_name_python_exceptions() {
        assert_eq!(Error::index_error("i").kind().python_name(), "IndexError");
        assert_eq!(format!("{:?}", Error::value_error("bad")), "ValueError: bad");
        assert_eq!(Error::os_error("gone").kind().python_name(), "OSError");
    }

    #[test]
    fn an_error_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }
}
