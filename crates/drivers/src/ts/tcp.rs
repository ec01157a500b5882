//! Writes over a bare TCP connection, where the protocol has one: Influx
//! line protocol (QuestDB's ILP port, VictoriaMetrics'
//! `-influxListenAddr`) and OpenTSDB's telnet `put` (VictoriaMetrics'
//! `-opentsdbListenAddr`, InfluxDB's OpenTSDB listener).
//!
//! The request built by the protocol's [`Encoder`] is written as it lies
//! in the encoder's reused buffer. The server answers nothing: a write
//! counts its points as sent, not stored, and only the check after the
//! run proves they arrived. What can be seen is a connection the server
//! closes (QuestDB does on a line it cannot take): after each write, a
//! read that does not wait tells an open connection from one closed, and
//! any words the server sent before closing become the error's.
//!
//! Queries, verification and stores go to `query=http://host:port[/DB]`,
//! the database's HTTP API, on a connection of their own.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use loadcell_core::ts::{
    DatabaseLeft, Holdings, Series, Shape, StoredPoints, TimeRange, TsConn, TsQuery, WriteOutcome,
};
use loadcell_core::{Driver, DriverError, ServerInfo, Target};

use super::query::Reader;
use super::{encoder_and_reader, query_endpoint, Encoder, Kind, QueryTarget};
use crate::http::{self, Http1Connection, Shared, TargetForm};
use crate::transport::io_error::{connect_error, lost_error};
use crate::transport::peer::quoted;
use crate::transport::stream::{connect_tcp, Stream};
use crate::transport::url_text;

/// A protocol that goes over a bare TCP connection.
pub trait TcpProtocol: Encoder {
    /// The port of a host that names none.
    const TCP_PORT: u16;
    /// The protocol, for messages: "Influx line protocol".
    const NAME: &'static str;
}

/// A time-series target written over TCP with protocol `P`: its hosts,
/// taken in turn by connections, and its query endpoint.
pub struct TcpDriver<P> {
    hosts: Vec<(String, u16)>,
    next_host: AtomicUsize,
    endpoint: String,
    query: Arc<Shared>,
    /// The database `query=` names (for InfluxQL); queries go on a
    /// connection of their own to `query`.
    query_target: Arc<QueryTarget>,
    protocol: PhantomData<fn() -> P>,
}

impl<P> std::fmt::Debug for TcpDriver<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpDriver")
            .field("endpoint", &self.endpoint)
            .field("query", &self.query.origins[0].endpoint)
            .field("db", &self.query_target.db)
            .finish_non_exhaustive()
    }
}

impl<P: TcpProtocol> TcpDriver<P> {
    /// Parses the target; makes no connection.
    pub fn from_target(target: &Target) -> Result<TcpDriver<P>, String> {
        let form = TargetForm {
            params: &[],
            own: &["query"],
            default_port: Some(P::TCP_PORT),
            hint: "",
        };
        let mut settings = http::parse_target(target, &form)?;
        let scheme = target.scheme();
        if settings.credentials.is_some() || settings.sslrootcert.is_some() || settings.insecure {
            return Err(format!(
                "{scheme}:// writes plain TCP: no credentials nor TLS (put them in query=)"
            ));
        }
        let Some(url) = settings.own.take("query") else {
            return Err(format!(
                "{scheme}:// needs query=http://HOST:PORT[/DB], the database's HTTP API: {} \
                 over TCP answers nothing, so queries and the check after the run go there",
                P::NAME
            ));
        };
        if !settings.base.is_empty() {
            return Err(format!(
                "{scheme}:// has no path: {} over TCP carries no database (name InfluxDB's in \
                 query=http://host:port/DB)",
                P::NAME
            ));
        }
        let (query, db) = query_endpoint(&url)?;
        // VictoriaMetrics would be asked for a `db` label these lines never give.
        if P::KIND == Kind::Line && db.is_some() {
            return Err(format!(
                "{scheme}:// names no database, in query= either: {} over TCP carries none \
                 (QuestDB's tables are the measurements)",
                P::NAME
            ));
        }
        Ok(TcpDriver {
            endpoint: url_text::endpoints(&settings.hosts),
            hosts: settings.hosts,
            next_host: AtomicUsize::new(0),
            query: Arc::new(query),
            query_target: Arc::new(QueryTarget { shared: None, db }),
            protocol: PhantomData,
        })
    }
}

/// One session's connection: writes to one host of the target, queries
/// to the `query=` endpoint.
pub struct TcpConnection<P> {
    stream: Stream,
    /// `host:port`, for messages.
    endpoint: String,
    protocol: P,
    http: Http1Connection,
    reader: Reader,
}

/// The endpoint, not the socket.
impl<P> std::fmt::Debug for TcpConnection<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpConnection")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl<P: TcpProtocol> Driver for TcpDriver<P> {
    type Conn = TcpConnection<P>;

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    async fn connect(&self) -> Result<TcpConnection<P>, DriverError> {
        let n = self.next_host.fetch_add(1, Ordering::Relaxed) % self.hosts.len();
        let (host, port) = &self.hosts[n];
        let endpoint = format!("{host}:{port}");
        let tcp = connect_tcp(host, *port)
            .await
            .map_err(|e| connect_error(&e, &endpoint))?;
        let http = Http1Connection::open(Arc::clone(&self.query), 0).await?;
        Ok(TcpConnection {
            stream: Stream::plain(tcp),
            reader: Reader::new(
                P::KIND,
                Arc::clone(&self.query_target),
                &self.query.origins[0].endpoint,
            ),
            endpoint,
            protocol: P::default(),
            http,
        })
    }

    /// The database behind the query endpoint.
    async fn server_info(&self, conn: &mut TcpConnection<P>) -> Result<ServerInfo, DriverError> {
        let found = conn.reader.product(&mut conn.http).await?;
        Ok(ServerInfo::new(found.product.name(), found.version.clone()))
    }

    async fn server_counters(
        &self,
        conn: &mut TcpConnection<P>,
    ) -> Result<Vec<(String, f64)>, DriverError> {
        conn.reader.counters(&mut conn.http).await
    }
}

impl<P: TcpProtocol> TcpConnection<P> {
    /// The connection is gone (`what`, in words): an error that says what
    /// that means for the points.
    fn lost(&self, what: &str) -> DriverError {
        DriverError::connection(format!(
            "{what}: the points sent on it since it was opened may be lost ({} over TCP \
             acknowledges nothing; the server's log says why)",
            P::NAME
        ))
    }

    /// Whether the server is still there: a read that does not wait finds
    /// nothing on an open connection (these servers never write), the end
    /// on one the server closed, and otherwise what it said before closing.
    fn still_open(&self) -> Result<(), DriverError> {
        let tcp = self.stream.tcp().expect("a plain TCP stream");
        let mut said = [0u8; 256];
        let endpoint = &self.endpoint;
        match tcp.try_read(&mut said) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Ok(0) => Err(self.lost(&format!("{endpoint} closed the connection"))),
            Ok(n) => Err(self.lost(&format!(
                "{endpoint} closed the connection, saying {}",
                quoted(&said[..n])
            ))),
            Err(e) => Err(self.lost(&lost_error(&e, endpoint).message)),
        }
    }
}

impl<P: TcpProtocol> TsConn for TcpConnection<P> {
    const ACKNOWLEDGED: bool = false;

    /// Writes the points; they count as sent, none as failed: the server
    /// says nothing of them.
    async fn write(
        &mut self,
        _on_failure: &mut dyn FnMut(&str),
    ) -> Result<WriteOutcome, DriverError> {
        let points = self.protocol.points();
        let written = match self.protocol.body() {
            Ok(body) => self.stream.write_all(body).await,
            Err(e) => {
                self.protocol.clear();
                return Err(e);
            }
        };
        self.protocol.clear();
        written.map_err(|e| self.lost(&lost_error(&e, &self.endpoint).message))?;
        self.still_open()?;
        Ok(WriteOutcome { points, failed: 0 })
    }

    encoder_and_reader!();
}

#[cfg(test)]
mod tests {
    use super::super::influx_tcp::InfluxTcpDriver;
    use super::super::opentsdb_tcp::OpenTsdbTcpDriver;
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn tcp_targets_write_to_their_hosts_and_query_over_http() {
        let d = InfluxTcpDriver::from_target(&target("influx+tcp://h,h2:8089?query=http://h:8428"))
            .unwrap();
        assert_eq!(d.endpoint, "h:9009,h2:8089");
        assert_eq!(d.query.origins[0].endpoint, "h:8428");
        assert_eq!(d.query_target.db, None);
        assert!(format!("{d:?}").contains("h:8428"));
        let d = OpenTsdbTcpDriver::from_target(&target(
            "opentsdb+tcp://h?query=http://h:8086/opentsdb",
        ))
        .unwrap();
        assert_eq!(d.endpoint, "h:4242");
        assert_eq!(d.query_target.db.as_deref(), Some("opentsdb"));
    }

    #[test]
    fn a_tcp_target_needs_a_query_endpoint_and_takes_no_credentials() {
        let err = |url: &str| InfluxTcpDriver::from_target(&target(url)).unwrap_err();
        let e = err("influx+tcp://h:9009");
        assert!(
            e.starts_with("influx+tcp:// needs query=http://HOST:PORT[/DB]")
                && e.contains("Influx line protocol over TCP answers nothing"),
            "{e}"
        );
        let e = err("influx+tcp://u:p@h:9009?query=http://h:9000");
        assert!(e.contains("no credentials nor TLS"), "{e}");
        let e = err("influx+tcp://h/db?query=http://h:8428");
        assert!(e.starts_with("influx+tcp:// has no path"), "{e}");
        let e = err("influx+tcp://h?query=http://h:8428/db");
        assert!(e.contains("names no database, in query= either"), "{e}");
        let e = err("influx+tcp://h?query=http://h:9000&tls=true");
        assert!(e.contains("unknown parameter 'tls'"), "{e}");
    }
}
