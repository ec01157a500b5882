//! Driver errors, classified so the engine can decide what to do without
//! knowing any protocol.

use std::fmt;

/// What the engine does about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Deadlock, lock wait timeout, serialization failure, busy database:
    /// roll back and retry the whole event (sysbench's "ignored errors").
    Retryable,
    /// The connection is gone or unusable: reconnect with backoff.
    Connection,
    /// Authentication failure, bad SQL, missing tables: stop the run.
    Fatal,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Retryable => "retryable",
            ErrorClass::Connection => "connection",
            ErrorClass::Fatal => "fatal",
        }
    }
}

/// An error from a driver, with its class, the server's own code when it
/// has one, and a message fit to show a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverError {
    pub class: ErrorClass,
    pub code: Option<String>,
    pub message: String,
}

impl DriverError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        DriverError {
            class,
            code: None,
            message: message.into(),
        }
    }

    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Retryable, message)
    }

    pub fn connection(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Connection, message)
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Fatal, message)
    }

    /// Whether the error is this host's own limit (ports, descriptors,
    /// memory) rather than the target's: its message says so with
    /// [`CLIENT_LIMIT`].
    pub fn is_client_limit(&self) -> bool {
        self.message.contains(CLIENT_LIMIT)
    }
}

/// The words an error's message carries when the client, not the target,
/// ran out of something: a run stopped by it measured loadcell's host.
pub const CLIENT_LIMIT: &str = "a client-side limit, not the target's";

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} (code {code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DriverError {}
