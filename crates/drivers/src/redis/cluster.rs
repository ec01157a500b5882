//! Redis Cluster: the slot map from `CLUSTER SLOTS`, one connection per
//! master, requests routed by CRC16 hash slot, `MOVED` and `ASK` followed.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use loadcell_core::kv::{OnReply, ReplyAt};
use loadcell_core::DriverError;

use super::*;
use crate::transport::peer::Progress;

/// A request queued for one node: its original index and its bytes in the
/// node's write buffer. `idx == ASKING_IDX` is an `ASKING` whose reply is
/// swallowed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) idx: usize,
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) const ASKING_IDX: usize = usize::MAX;

pub(super) struct Node {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) link: Link,
    pub(super) wbuf: Vec<u8>,
    pub(super) pending: Vec<Pending>,
    /// Replies read so far this round (`pending[..head]`).
    pub(super) head: usize,
}

/// A MOVED or ASK to act on once the round's replies are all read.
#[derive(Debug)]
pub(super) struct Redirect {
    pub(super) idx: usize,
    pub(super) ask: bool,
    pub(super) slot: u16,
    pub(super) host: String,
    pub(super) port: u16,
    /// The request's bytes in `Cluster::resend`.
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) struct Cluster {
    pub(super) shared: Arc<Shared>,
    pub(super) nodes: Vec<Node>,
    /// Node index per slot (`u16::MAX`: unknown, use node 0).
    pub(super) slots: Box<[u16]>,
    pub(super) queued: usize,
    pub(super) dirty: bool,
    pub(super) redirects: Vec<Redirect>,
    pub(super) resend: Vec<u8>,
    /// Reads from any node (wrapping), for [`ReplyAt::read`].
    pub(super) reads: u32,
}

/// `(first slot, last slot, host, port)` of each master in `CLUSTER SLOTS`.
pub(super) type SlotRanges = Vec<(u16, u16, String, u16)>;

pub(super) fn parse_cluster_slots(v: &Value, seed_host: &str) -> Result<SlotRanges, String> {
    let Value::Array(entries) = v else {
        return Err("not an array".into());
    };
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Array(parts) = e else {
            return Err("entry not an array".into());
        };
        let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(master))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return Err("entry is not [start, end, [host, port, ...]]".into());
        };
        let host = match master.first() {
            Some(Value::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::Simple(h)) => h.clone(),
            // cluster-preferred-endpoint-type unknown-endpoint: a NULL host.
            Some(Value::Nil) => String::new(),
            _ => return Err("master without a host".into()),
        };
        // An unknown address ("", NULL or "?") means the node we asked.
        let host = if host.is_empty() || host == "?" {
            seed_host.to_string()
        } else {
            host
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return Err("master without a port".into());
        };
        let (Ok(a), Ok(b), Ok(port)) = (u16::try_from(*a), u16::try_from(*b), u16::try_from(*port))
        else {
            return Err("slot or port out of range".into());
        };
        if a > b || usize::from(b) >= SLOTS {
            return Err(format!("bad slot range {a}-{b}"));
        }
        out.push((a, b, host, port));
    }
    Ok(out)
}

/// `MOVED 3999 127.0.0.1:6381` / `ASK 3999 127.0.0.1:6381`: (ask, slot,
/// host, port). An empty host means the node that answered.
pub(super) fn parse_redirect(text: &[u8], from_host: &str) -> Option<(bool, u16, String, u16)> {
    let text = std::str::from_utf8(text).ok()?;
    let (ask, rest) = if let Some(r) = text.strip_prefix("MOVED ") {
        (false, r)
    } else {
        (true, text.strip_prefix("ASK ")?)
    };
    let (slot, addr) = rest.trim().split_once(' ')?;
    let slot: u16 = slot.parse().ok().filter(|&s| usize::from(s) < SLOTS)?;
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { from_host } else { host };
    Some((ask, slot, host.to_string(), port))
}

impl Cluster {
    pub(super) async fn build(
        shared: Arc<Shared>,
        seed: (String, u16),
        seed_link: Link,
        ranges: SlotRanges,
    ) -> Result<Cluster, DriverError> {
        let mut cluster = Cluster {
            shared,
            nodes: Vec::new(),
            slots: vec![u16::MAX; SLOTS].into_boxed_slice(),
            queued: 0,
            dirty: false,
            redirects: Vec::new(),
            resend: Vec::new(),
            reads: 0,
        };
        let mut seed_link = Some(seed_link);
        for (a, b, host, port) in ranges {
            let ni = match cluster.find(&host, port) {
                Some(i) => i,
                None => {
                    let link = match seed_link.take_if(|_| host == seed.0 && port == seed.1) {
                        Some(l) => l,
                        None => Link::open(&host, port, &cluster.shared, &Progress::new()).await?,
                    };
                    cluster.add(host, port, link)
                }
            };
            for s in a..=b {
                cluster.slots[usize::from(s)] = ni as u16;
            }
        }
        if cluster.nodes.is_empty() {
            let ep = seed_link
                .as_ref()
                .map_or("the seed".into(), |l| l.ep.to_string());
            return Err(DriverError::retryable(format!(
                "the Redis Cluster at {ep} has no slots assigned yet"
            ))
            .with_code("CLUSTERDOWN"));
        }
        Ok(cluster)
    }

    pub(super) fn find(&self, host: &str, port: u16) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.port == port && n.host == host)
    }

    pub(super) fn add(&mut self, host: String, port: u16, link: Link) -> usize {
        self.nodes.push(Node {
            host,
            port,
            link,
            wbuf: Vec::with_capacity(8 * 1024),
            pending: Vec::with_capacity(64),
            head: 0,
        });
        self.nodes.len() - 1
    }

    /// The node for `host:port`, connecting to it if it is new.
    pub(super) async fn node(&mut self, host: &str, port: u16) -> Result<usize, DriverError> {
        if let Some(i) = self.find(host, port) {
            return Ok(i);
        }
        if self.nodes.len() >= usize::from(u16::MAX) {
            return Err(DriverError::fatal("too many cluster nodes"));
        }
        let link = Link::open(host, port, &self.shared, &Progress::new()).await?;
        Ok(self.add(host.to_string(), port, link))
    }

    #[inline]
    pub(super) fn queue(&mut self, key: Option<&[u8]>, encode: impl FnOnce(&mut Vec<u8>)) {
        let ni = match key {
            Some(k) => match self.slots[usize::from(hash_slot(k))] {
                u16::MAX => 0,
                n => usize::from(n),
            },
            None => 0,
        };
        let node = &mut self.nodes[ni];
        let start = node.wbuf.len();
        encode(&mut node.wbuf);
        node.pending.push(Pending {
            idx: self.queued,
            start,
            end: node.wbuf.len(),
        });
        self.queued += 1;
    }

    pub(super) fn clear(&mut self) {
        self.queued = 0;
        for n in &mut self.nodes {
            n.wbuf.clear();
            n.pending.clear();
            n.head = 0;
        }
        self.redirects.clear();
        self.resend.clear();
    }

    pub(super) async fn flush(&mut self, on_reply: &mut OnReply<'_>) -> Result<(), DriverError> {
        if self.queued == 0 {
            return Ok(());
        }
        if self.dirty {
            self.clear();
            return Err(interrupted(&self.shared.endpoint));
        }
        self.dirty = true;
        let result = self.flush_rounds(on_reply).await;
        self.clear();
        if result.is_ok() {
            self.dirty = false;
        }
        result
    }

    pub(super) async fn flush_rounds(
        &mut self,
        on_reply: &mut OnReply<'_>,
    ) -> Result<(), DriverError> {
        let mut round = 0;
        loop {
            for node in &mut self.nodes {
                if !node.pending.is_empty() {
                    if let Err(e) = node.link.stream.send(&node.wbuf).await {
                        return Err(node.link.io_error(&e));
                    }
                }
            }
            self.read_round(on_reply).await?;
            for n in &mut self.nodes {
                n.wbuf.clear();
                n.pending.clear();
                n.head = 0;
            }
            if self.redirects.is_empty() {
                return Ok(());
            }
            round += 1;
            let redirects = std::mem::take(&mut self.redirects);
            if round > MAX_REDIRECT_ROUNDS {
                for r in &redirects {
                    let kind = if r.ask { "ASK" } else { "MOVED" };
                    on_reply(
                        ReplyAt {
                            index: r.idx,
                            read: self.reads,
                        },
                        Err(DriverError::retryable(format!(
                            "slot {} still redirected after {MAX_REDIRECT_ROUNDS} rounds \
                             (last: {kind} to {})",
                            r.slot,
                            endpoint(&r.host, r.port)
                        ))
                        .with_code(kind)),
                    );
                }
                return Ok(());
            }
            for r in &redirects {
                let ni = self.node(&r.host, r.port).await?;
                let node = &mut self.nodes[ni];
                if r.ask {
                    let start = node.wbuf.len();
                    node.wbuf.extend_from_slice(ASKING);
                    node.pending.push(Pending {
                        idx: ASKING_IDX,
                        start,
                        end: node.wbuf.len(),
                    });
                } else {
                    self.slots[usize::from(r.slot)] = ni as u16;
                }
                let start = node.wbuf.len();
                node.wbuf.extend_from_slice(&self.resend[r.start..r.end]);
                node.pending.push(Pending {
                    idx: r.idx,
                    start,
                    end: node.wbuf.len(),
                });
            }
            self.redirects = redirects;
            self.redirects.clear();
            self.resend.clear();
        }
    }

    /// Reads the replies of every node concurrently, delivering each as soon
    /// as it is parsed; MOVED/ASK are set aside in `redirects`.
    pub(super) async fn read_round(
        &mut self,
        on_reply: &mut OnReply<'_>,
    ) -> Result<(), DriverError> {
        let nodes = &mut self.nodes;
        let redirects = &mut self.redirects;
        let resend = &mut self.resend;
        let reads = &mut self.reads;
        poll_fn(|cx| {
            let mut done = true;
            for node in nodes.iter_mut() {
                while node.head < node.pending.len() {
                    let reply = match node.link.next_reply() {
                        Ok(Some(r)) => r,
                        Ok(None) => match node.link.poll_fill(cx) {
                            Poll::Ready(Ok(())) => {
                                *reads = reads.wrapping_add(1);
                                continue;
                            }
                            Poll::Ready(Err(e)) => return Poll::Ready(Err(node.link.io_error(&e))),
                            Poll::Pending => {
                                done = false;
                                break;
                            }
                        },
                        Err(e) => return Poll::Ready(Err(e)),
                    };
                    let p = node.pending[node.head];
                    node.head += 1;
                    if p.idx == ASKING_IDX {
                        continue;
                    }
                    match reply {
                        Reply::Error(s) => {
                            let text = &node.link.rbuf.received()[s.start..s.end];
                            match parse_redirect(text, &node.host) {
                                Some((ask, slot, host, port)) => {
                                    let start = resend.len();
                                    resend.extend_from_slice(&node.wbuf[p.start..p.end]);
                                    redirects.push(Redirect {
                                        idx: p.idx,
                                        ask,
                                        slot,
                                        host,
                                        port,
                                        start,
                                        end: resend.len(),
                                    });
                                }
                                None => on_reply(
                                    ReplyAt {
                                        index: p.idx,
                                        read: *reads,
                                    },
                                    Err(reply_error(text, &node.link.ep)),
                                ),
                            }
                        }
                        reply => on_reply(
                            ReplyAt {
                                index: p.idx,
                                read: *reads,
                            },
                            Ok(kv_reply(reply, node.link.rbuf.received())),
                        ),
                    }
                }
            }
            if done {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis
/// Cluster uses, by table.
pub(super) const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

pub(super) fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The Redis Cluster hash slot of `key`: CRC16 of the key, or of its hash
/// tag (the text between the first `{` and the next `}`, if not empty),
/// modulo 16384.
#[inline]
pub fn hash_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        },
        None => key,
    };
    crc16(hashed) & (SLOTS as u16 - 1)
}
