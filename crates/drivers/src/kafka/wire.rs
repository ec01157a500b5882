//! Kafka's wire, for the consumer loadcell speaks itself: each request is
//! a size-prefixed frame of a header and a body, answered in order on the
//! same connection. The `kafka-protocol` crate encodes and decodes the
//! messages; this file frames them and moves the bytes.

use std::io::{self, Read, Write};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A frame larger than this is not a Kafka answer to loadcell's requests
/// (fetches ask for at most [`super::fetch::MAX_FETCH_BYTES`]).
const MAX_FRAME: usize = 256 << 20;

/// One connection to one broker.
pub(super) struct Link {
    socket: TcpStream,
    /// Bytes read past the last whole frame: a read cut short (a
    /// cancelled future) loses nothing.
    incoming: BytesMut,
    outgoing: BytesMut,
    client_id: StrBytes,
    next_correlation: i32,
    /// False from a request's first byte sent until its answer is read:
    /// a link left in between (its future dropped) is not used again.
    settled: bool,
}

impl Link {
    pub(super) async fn connect(
        address: &str,
        client_id: &StrBytes,
        timeout: Duration,
    ) -> io::Result<Link> {
        let socket = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no connection in time"))??;
        socket.set_nodelay(true)?;
        Ok(Link {
            socket,
            incoming: BytesMut::with_capacity(64 << 10),
            outgoing: BytesMut::with_capacity(4 << 10),
            client_id: client_id.clone(),
            next_correlation: 0,
            settled: true,
        })
    }

    /// Whether the link is between requests, so usable.
    pub(super) fn settled(&self) -> bool {
        self.settled
    }

    /// Sends `request` and reads its answer.
    pub(super) async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> io::Result<R::Response> {
        let correlation = self.send(request, version).await?;
        let answer = self.receive::<R>(correlation, version).await?;
        self.settled = true;
        Ok(answer)
    }

    async fn send<R: Request>(&mut self, request: &R, version: i16) -> io::Result<i32> {
        self.settled = false;
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        self.outgoing.clear();
        frame(
            &mut self.outgoing,
            &self.client_id,
            correlation,
            request,
            version,
        )?;
        self.socket.write_all(&self.outgoing).await?;
        Ok(correlation)
    }

    async fn receive<R: Request>(
        &mut self,
        correlation: i32,
        version: i16,
    ) -> io::Result<R::Response> {
        loop {
            if let Some(body) = whole_frame(&mut self.incoming)? {
                return answer::<R>(body, correlation, version);
            }
            // Room for exactly the rest of the frame once its size is
            // known: a rounder reserve near its end grew the buffer and
            // copied the whole frame, 7% of a consumer's CPU (perf, 10M
            // rows, 8 partitions). Before that, room for its start.
            let missing = match frame_size(&self.incoming) {
                Some(size) => size.saturating_sub(self.incoming.len()),
                None => 64 << 10,
            };
            self.incoming.reserve(missing);
            if self.socket.read_buf(&mut self.incoming).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// One request and its answer over a blocking connection of its own: for
/// a consumer dropped outside any runtime, whose last commit and leave
/// still have to reach the coordinator.
pub(super) fn call_blocking<R: Request>(
    address: &str,
    client_id: &StrBytes,
    request: &R,
    version: i16,
    timeout: Duration,
) -> io::Result<R::Response> {
    use std::net::{TcpStream, ToSocketAddrs};
    let to = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
    let mut socket = TcpStream::connect_timeout(&to, timeout)?;
    socket.set_read_timeout(Some(timeout))?;
    socket.set_write_timeout(Some(timeout))?;
    let mut outgoing = BytesMut::new();
    frame(&mut outgoing, client_id, 0, request, version)?;
    socket.write_all(&outgoing)?;
    let mut size = [0u8; 4];
    socket.read_exact(&mut size)?;
    let size = checked_size(i32::from_be_bytes(size))?;
    let mut body = vec![0u8; size];
    socket.read_exact(&mut body)?;
    answer::<R>(Bytes::from(body), 0, version)
}

/// Encodes `request` as a frame at the end of `into`.
fn frame<R: Request>(
    into: &mut BytesMut,
    client_id: &StrBytes,
    correlation: i32,
    request: &R,
    version: i16,
) -> io::Result<()> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(client_id.clone()));
    let start = into.len();
    into.put_i32(0);
    header
        .encode(into, R::header_version(version))
        .and_then(|()| request.encode(into, version))
        .map_err(invalid)?;
    let size = (into.len() - start - 4) as i32;
    into[start..start + 4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// The size of the frame `buffer` starts with, prefix included.
fn frame_size(buffer: &[u8]) -> Option<usize> {
    let prefix: [u8; 4] = buffer.get(..4)?.try_into().ok()?;
    Some(4 + i32::from_be_bytes(prefix).max(0) as usize)
}

/// The body of the first frame, once it is whole.
fn whole_frame(incoming: &mut BytesMut) -> io::Result<Option<Bytes>> {
    let Some(size) = frame_size(incoming) else {
        return Ok(None);
    };
    checked_size(size as i32 - 4)?;
    if incoming.len() < size {
        return Ok(None);
    }
    let mut frame = incoming.split_to(size).freeze();
    frame.advance(4);
    Ok(Some(frame))
}

fn checked_size(size: i32) -> io::Result<usize> {
    match usize::try_from(size) {
        Ok(size) if size <= MAX_FRAME => Ok(size),
        _ => Err(invalid(format!("a frame of {size} bytes"))),
    }
}

/// Decodes an answer's header and body; the body's byte fields (records)
/// stay slices of `body`.
fn answer<R: Request>(mut body: Bytes, correlation: i32, version: i16) -> io::Result<R::Response> {
    let header =
        ResponseHeader::decode(&mut body, R::Response::header_version(version)).map_err(invalid)?;
    if header.correlation_id != correlation {
        return Err(invalid(format!(
            "an answer to request {} where {correlation} was awaited",
            header.correlation_id
        )));
    }
    R::Response::decode(&mut body, version).map_err(invalid)
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Links to a cluster's brokers by address, made when first needed and
/// made again after a failure.
pub(super) struct Cluster {
    bootstrap: Vec<String>,
    client_id: StrBytes,
    links: std::collections::HashMap<String, Link>,
    timeout: Duration,
}

impl Cluster {
    pub(super) fn new(bootstrap: Vec<String>, client_id: StrBytes, timeout: Duration) -> Cluster {
        Cluster {
            bootstrap,
            client_id,
            links: std::collections::HashMap::new(),
            timeout,
        }
    }

    pub(super) fn client_id(&self) -> &StrBytes {
        &self.client_id
    }

    /// How long a call waits for its answer unless told otherwise.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Calls the broker at `address`, over its link if it has a settled
    /// one; a link that failed is dropped, so the next call connects again.
    pub(super) async fn call<R: Request>(
        &mut self,
        address: &str,
        request: &R,
        version: i16,
    ) -> io::Result<R::Response> {
        self.call_within(address, request, version, self.timeout)
            .await
    }

    /// [`Cluster::call`], waiting up to `wait` for the answer (a JoinGroup
    /// is answered once every member has joined).
    pub(super) async fn call_within<R: Request>(
        &mut self,
        address: &str,
        request: &R,
        version: i16,
        wait: Duration,
    ) -> io::Result<R::Response> {
        let link = match self.links.get_mut(address) {
            Some(link) if link.settled() => link,
            _ => {
                let link = Link::connect(address, &self.client_id, self.timeout).await?;
                self.links.insert(address.to_string(), link);
                self.links.get_mut(address).expect("just inserted")
            }
        };
        let answer = tokio::time::timeout(wait, link.call(request, version)).await;
        match answer {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.links.remove(address);
                Err(e)
            }
            Err(_) => {
                self.links.remove(address);
                Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"))
            }
        }
    }

    /// Calls the bootstrap brokers in turn until one answers.
    pub(super) async fn call_any<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> io::Result<R::Response> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no broker named");
        for address in self.bootstrap.clone() {
            match self.call(&address, request, version).await {
                Ok(answer) => return Ok(answer),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}
