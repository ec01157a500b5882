//! MySQL's and MariaDB's errors, classified: retryable (deadlock, lock
//! wait timeout), connection, or fatal with a message that says what to do.

use std::io;

use loadcell_core::{DriverError, ErrorClass};

use super::*;
use crate::transport::io_error::unresolved_host;

/// When an error happened: while connecting, or on an established connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Connect,
    Use,
}

/// Something that is not a MySQL/MariaDB server (or a broken one) at connect.
pub(super) fn not_mysql(ctx: &Ctx, why: &str) -> DriverError {
    DriverError::fatal(format!(
        "{} does not answer like a MySQL/MariaDB server ({why})",
        ctx.endpoint
    ))
}

pub(super) fn unsupported_plugin(ctx: &Ctx, name: &str) -> DriverError {
    DriverError::fatal(format!(
        "the server at {} asks user '{}' to authenticate with '{name}', which loadcell \
         does not support; use mysql_native_password or caching_sha2_password for this user",
        ctx.endpoint, ctx.user
    ))
}

/// The error a request was answered with; after it the session is ready
/// for the next request, unless the error means the connection is lost.
pub(super) fn answered_error(state: &mut State, e: &ServerErr<'_>, ctx: &Ctx) -> DriverError {
    let err = classify_server(e.code, e.message, ctx);
    *state = if err.class == ErrorClass::Connection {
        State::Broken
    } else {
        State::Ready
    };
    err
}

/// Server error numbers, as in the server's `mysqld_error.h`.
pub(super) fn classify_server(code: u16, message: &str, ctx: &Ctx) -> DriverError {
    let ep = &ctx.endpoint;
    let class = server_error_class(code);
    let message = match code {
        1045 | 1698 => format!(
            "access denied for user '{}' at {ep}: check the user and password in --target",
            ctx.user
        ),
        1044 => format!(
            "{message} (at {ep}): grant the user access or fix the database name in --target"
        ),
        1049 => format!("{message} at {ep}: create it or fix the database name in --target"),
        1040 | 1203 => format!("{message} (at {ep})"),
        // Each session prepares its own statements (per table for the
        // OLTP suite), so the server's global limit caps the sessions.
        1461 => format!(
            "{message} at {ep}: every session prepares its own statements; run fewer sessions \
             (--threads, or --tables for the OLTP workloads) or raise the limit on the server \
             (SET GLOBAL max_prepared_stmt_count = ...)"
        ),
        1053 => format!("the server at {ep} is shutting down: {message}"),
        1927 => format!("connection to {ep} was killed: {message}"),
        2006 | 2013 | 2055 => format!("lost connection to {ep}: {message}"),
        _ => message.to_string(),
    };
    DriverError::new(class, message).with_code(code.to_string())
}

pub(super) fn server_error_class(code: u16) -> ErrorClass {
    match code {
        // sysbench's default --mysql-ignore-errors: deadlock, lock wait
        // timeout, and MariaDB's "record has changed since last read"; and
        // NOWAIT's lock not available and "table definition has changed,
        // please retry transaction" (PostgreSQL's 55P03 is retried too).
        1213 | 1205 | 1020 | 3572 | 1412 => ErrorClass::Retryable,
        // Gone / lost / killed / shutting down; and too many connections,
        // which a reconnect with backoff may get past.
        2006 | 2013 | 2055 | 1927 | 1053 | 1152 | 1040 | 1203 | 4031 => ErrorClass::Connection,
        _ => ErrorClass::Fatal,
    }
}

pub(super) fn classify_io(e: &io::Error, ctx: &Ctx, phase: Phase) -> DriverError {
    let ep = &ctx.endpoint;
    // A TLS handshake failure arrives as an io::Error wrapping rustls's.
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        let text = tls.to_string();
        return DriverError::fatal(format!(
            "TLS handshake with {ep} failed: {text}{}",
            tls_hint(&text)
        ));
    }
    if let Some(unresolved) = unresolved_host(e, ep) {
        return unresolved.with_code(CR_CONN_HOST_ERROR);
    }
    let text = e.to_string();
    let what = match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            return DriverError::connection(format!(
                "cannot connect to {ep}: connection refused (is the server running?)"
            ))
            .with_code(CR_CONN_HOST_ERROR)
        }
        io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
        io::ErrorKind::ConnectionAborted => "connection aborted".to_string(),
        io::ErrorKind::BrokenPipe => "the server closed the connection (broken pipe)".to_string(),
        io::ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
        _ => text,
    };
    match phase {
        Phase::Connect => DriverError::connection(format!("cannot connect to {ep}: {what}"))
            .with_code(CR_CONN_HOST_ERROR),
        Phase::Use => DriverError::connection(format!("lost connection to {ep}: {what}"))
            .with_code(CR_SERVER_LOST),
    }
}

pub(super) fn tls_hint(text: &str) -> &'static str {
    if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        " (pass the CA certificate with sslrootcert=PATH, or use sslmode=require)"
    } else {
        ""
    }
}
