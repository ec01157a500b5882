//! Socket errors in words, for the drivers that speak over TCP themselves.

use std::io;

use loadcell_core::{DriverError, ErrorClass};

/// A failed connect to `endpoint`, in words and classified: a host that
/// does not resolve is fatal (unless the resolver said "temporary").
pub(crate) fn connect_error(e: &io::Error, endpoint: &str) -> DriverError {
    let text = e.to_string();
    if text.contains("failed to lookup address") {
        let class = if text.contains("Temporary failure") {
            ErrorClass::Connection
        } else {
            ErrorClass::Fatal
        };
        return DriverError::new(
            class,
            format!("cannot resolve the host of {endpoint}: {text}"),
        );
    }
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            "connection refused (is the server running?)".to_string()
        }
        io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
        io::ErrorKind::HostUnreachable => "host unreachable".to_string(),
        io::ErrorKind::NetworkUnreachable => "network unreachable".to_string(),
        io::ErrorKind::AddrNotAvailable => "address not available".to_string(),
        _ => text,
    };
    DriverError::connection(format!("cannot connect to {endpoint}: {what}"))
}

/// A connection to `endpoint` that broke mid-exchange.
pub(crate) fn lost_error(e: &io::Error, endpoint: &str) -> DriverError {
    let what = match e.kind() {
        io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
        io::ErrorKind::ConnectionAborted => "connection aborted".to_string(),
        io::ErrorKind::BrokenPipe => "the server closed the connection (broken pipe)".to_string(),
        io::ErrorKind::TimedOut => "timed out".to_string(),
        _ => e.to_string(),
    };
    DriverError::connection(format!("connection to {endpoint} lost: {what}"))
}
