//! PostgreSQL's errors, classified: retryable (serialization, deadlock),
//! connection, or fatal with a message that says what to do.

use std::fmt::Write as _;
use std::io;

use loadcell_core::{DriverError, ErrorClass};

use crate::transport::tls::SslMode;

/// What error messages need to know about the target.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct ErrCtx {
    pub(super) endpoint: String,
    pub(super) user: Option<String>,
    pub(super) dbname: Option<String>,
    /// Only to make sure no message ever shows it.
    pub(super) password: Option<String>,
    pub(super) sslmode: SslMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Connect,
    Session,
}

/// What went wrong, before it is described for the user (so that it can
/// be unit-tested without a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// An error the server reported.
    Db {
        code: String,
        message: String,
        hint: Option<String>,
        position: Option<u32>,
    },
    /// The server closed the connection.
    Closed,
    /// The connection is unusable for this reason.
    Lost(Box<Failure>),
    /// Could not open the socket.
    Connect {
        kind: io::ErrorKind,
        text: String,
    },
    /// The socket failed.
    Io {
        kind: io::ErrorKind,
        text: String,
    },
    Tls {
        kind: Option<io::ErrorKind>,
        text: String,
    },
    Auth(String),
    Other(String),
}

/// The class of a SQLSTATE.
pub(super) fn sqlstate_class(code: &str) -> ErrorClass {
    match code {
        // deadlock, serialization failure, duplicate key (sysbench ignores
        // it), lock not available (NOWAIT, lock_timeout).
        "40P01" | "40001" | "23505" | "55P03" => ErrorClass::Retryable,
        // admin shutdown, crash shutdown, cannot connect now; too many
        // clients, which a reconnect with backoff may get past (as MySQL's
        // 1040).
        "57P01" | "57P02" | "57P03" | "53300" => ErrorClass::Connection,
        c if c.starts_with("08") => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    }
}

pub(super) fn describe(failure: Failure, ctx: &ErrCtx, phase: Phase) -> DriverError {
    let ep = &ctx.endpoint;
    let mut err = match failure {
        Failure::Db {
            code,
            message,
            hint,
            position,
        } => {
            let class = sqlstate_class(&code);
            let text = match code.as_str() {
                "28P01" => format!(
                    "password authentication failed for user '{}' at {ep}: check the user and password in --target",
                    ctx.user.as_deref().unwrap_or("(default)")
                ),
                "28000" => format!(
                    "{message} at {ep}: check the user and password in --target"
                ),
                "3D000" => format!("{message} at {ep}: check the database name in --target"),
                "57P01" | "57P02" | "57P03" => {
                    format!("server at {ep} closed the connection: {message}")
                }
                c if c.starts_with("08") => format!("connection to {ep} failed: {message}"),
                _ if class == ErrorClass::Retryable => message,
                _ => {
                    let mut text = message;
                    if let Some(p) = position {
                        let _ = write!(text, " (at character {p})");
                    }
                    if let Some(h) = hint {
                        let _ = write!(text, "; hint: {h}");
                    }
                    text
                }
            };
            DriverError::new(class, text).with_code(code)
        }
        Failure::Closed => DriverError::connection(format!("connection to {ep} closed")),
        Failure::Lost(why) if *why == Failure::Closed => DriverError::connection(format!(
            "connection to {ep} lost: the server closed the connection"
        )),
        Failure::Lost(why) => {
            let inner = describe(*why, ctx, phase);
            let mut e = DriverError::connection(match phase {
                Phase::Connect => inner.message,
                Phase::Session if inner.message.contains(ep.as_str()) => inner.message,
                Phase::Session => format!("connection to {ep} lost: {}", inner.message),
            });
            e.code = inner.code;
            e
        }
        Failure::Connect { kind, text } => DriverError::connection(match kind {
            io::ErrorKind::ConnectionRefused => {
                format!("cannot connect to {ep}: connection refused (is the server running?)")
            }
            io::ErrorKind::TimedOut => format!("cannot connect to {ep}: timed out"),
            _ => format!("cannot connect to {ep}: {text}"),
        }),
        Failure::Io { text, .. } => DriverError::connection(match phase {
            Phase::Connect => format!("connection to {ep} failed: {text}"),
            Phase::Session => format!("connection to {ep} lost: {text}"),
        }),
        Failure::Tls { text, .. } if text.contains("does not support TLS") => {
            DriverError::fatal(format!(
                "server at {ep} does not support TLS, which sslmode={} requires: use sslmode=prefer or disable",
                ctx.sslmode.as_str()
            ))
        }
        // rustls reports certificate and protocol problems as InvalidData:
        // connecting again will not help.
        Failure::Tls {
            kind: Some(io::ErrorKind::InvalidData) | None,
            text,
        } => DriverError::fatal(format!(
            "TLS handshake with {ep} failed (sslmode={}): {text}",
            ctx.sslmode.as_str()
        )),
        Failure::Tls { text, .. } => {
            DriverError::connection(format!("TLS handshake with {ep} failed: {text}"))
        }
        Failure::Auth(text) => {
            DriverError::fatal(format!("authentication at {ep} failed: {text}"))
        }
        Failure::Other(text) => DriverError::fatal(text),
    };
    if let Some(pw) = ctx.password.as_deref() {
        if pw.len() >= 3 && err.message.contains(pw) {
            err.message = err.message.replace(pw, "***");
        }
    }
    err
}
