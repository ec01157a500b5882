//! Socket errors in words, for the drivers that speak over TCP themselves.

use std::io;

use loadcell_core::{DriverError, ErrorClass, CLIENT_LIMIT};

/// Why this host could not open another socket, when it is the client's
/// own limit (not the target's): ephemeral ports used up, file
/// descriptors or socket memory exhausted.
pub(crate) fn client_limit(e: &io::Error) -> Option<String> {
    let what = match e.raw_os_error()? {
        libc::EADDRNOTAVAIL => {
            "no free local port (EADDRNOTAVAIL): this host's ephemeral ports are used up, \
             most likely by closed connections in TIME_WAIT"
        }
        libc::EMFILE => "out of file descriptors (EMFILE): raise `ulimit -n`",
        libc::ENFILE => "the system is out of file descriptors (ENFILE)",
        libc::ENOBUFS | libc::ENOMEM => "out of socket memory (ENOBUFS)",
        _ => return None,
    };
    let hint = if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        "; spread the source addresses (loadcell does over 127.0.0.x for a loopback \
         target), widen net.ipv4.ip_local_port_range or set net.ipv4.tcp_tw_reuse=1"
    } else {
        ""
    };
    Some(format!("{what} — {CLIENT_LIMIT}{hint}"))
}

/// A host name that did not resolve, as an error: fatal, unless the
/// resolver said its failure was temporary. `None` for any other error.
pub(crate) fn unresolved_host(e: &io::Error, endpoint: &str) -> Option<DriverError> {
    let text = e.to_string();
    if !text.contains("failed to lookup address") {
        return None;
    }
    let class = if text.contains("Temporary failure") {
        ErrorClass::Connection
    } else {
        ErrorClass::Fatal
    };
    Some(DriverError::new(
        class,
        format!("cannot resolve the host of {endpoint}: {text}"),
    ))
}

/// A failed connect to `endpoint`, in words and classified: a host that
/// does not resolve is fatal (unless the resolver said "temporary").
pub(crate) fn connect_error(e: &io::Error, endpoint: &str) -> DriverError {
    if let Some(unresolved) = unresolved_host(e, endpoint) {
        return unresolved;
    }
    let text = e.to_string();
    if let Some(limit) = client_limit(e) {
        return DriverError::connection(format!("cannot connect to {endpoint}: {limit}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhausted_ports_are_named_as_the_clients_limit_with_a_hint() {
        let e = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        let err = connect_error(&e, "127.0.0.1:80");
        assert!(err.is_client_limit(), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with("cannot connect to 127.0.0.1:80: no free local port (EADDRNOTAVAIL)"),
            "{text}"
        );
        for hint in [
            "TIME_WAIT",
            "ip_local_port_range",
            "tcp_tw_reuse",
            "source addresses",
        ] {
            assert!(text.contains(hint), "{hint} in {text}");
        }
        let fds = connect_error(&io::Error::from_raw_os_error(libc::EMFILE), "h:1");
        assert!(fds.is_client_limit() && fds.to_string().contains("ulimit -n"));
    }

    #[test]
    fn the_targets_refusals_resets_and_timeouts_are_named_and_not_the_clients() {
        for (errno, word) in [
            (libc::ECONNREFUSED, "connection refused"),
            (libc::ECONNRESET, "connection reset"),
            (libc::ETIMEDOUT, "timed out"),
        ] {
            let err = connect_error(&io::Error::from_raw_os_error(errno), "h:1");
            assert!(err.to_string().contains(word), "{err}");
            assert!(!err.is_client_limit(), "{err}");
        }
    }
}
