//! The native consumer: loadcell's own group member ([`Member`]) and one
//! fetch task per partition leader, reading record batches in place
//! ([`Records`]). librdkafka's consumer makes an op and a message per
//! record on its broker thread and copies each into its queue; this one
//! hands each row to the workload as a slice of the fetch answer it came
//! in (docs/BENCHMARKS.md, "Kafka consume"). It serves plaintext targets
//! whose properties it honours ([`super::Settings::native_consumer`]);
//! the others keep librdkafka's consumer.
//!
//! Each fetch task keeps one request in flight: it asks for the next
//! offsets (known from the batch headers alone) as soon as an answer is
//! handed to the session, which reads the rows of that answer meanwhile.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{ApiVersionsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use loadcell_core::stream::{Channels, OnRow, PollOutcome};
use loadcell_core::DriverError;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::batches::{self, Next, Records};
use super::member::{
    leaders, list_offsets, lost, refused, version, GroupTiming, Member, Membership, Owned, EARLIEST,
};
use super::wire::{Cluster, Link};
use super::{ADMIN_TIMEOUT, CONNECT_TIMEOUT};

/// The most one fetch answer carries (librdkafka's `fetch.max.bytes` is
/// 50 MB; a smaller answer is read while it is still in the cache).
pub(super) const MAX_FETCH_BYTES: i32 = 8 << 20;
/// The most of one partition an answer carries (`max.partition.fetch.bytes`).
const PARTITION_FETCH_BYTES: i32 = 1 << 20;
/// How long the broker holds a fetch with nothing to answer.
const FETCH_WAIT_MS: i32 = 500;

/// One partition of a fetch answer.
struct FetchedPartition {
    /// Index into the ownership's partitions.
    slot: usize,
    /// The offset it was fetched from.
    from: i64,
    error: i16,
    records: Bytes,
}

/// What a fetch task sends: an answer, or why it stopped.
enum Fetched {
    Answer(Vec<FetchedPartition>),
    Failed(String),
}

/// What a poll waiting for rows woke to.
enum Woke {
    Fetched(Option<Fetched>),
    OwnershipChanged,
    Deadline,
}

/// A fetch answer being handed over.
struct Current {
    parts: Vec<FetchedPartition>,
    index: usize,
    records: Option<Records>,
}

pub(super) struct NativeConsumer {
    /// For commits, offsets and leaders; the membership task has its own.
    cluster: Cluster,
    membership: Membership,
    /// The ownership epoch the fetch tasks were set up for.
    fetching_epoch: u64,
    fetched: Option<mpsc::Receiver<Fetched>>,
    fetchers: Vec<JoinHandle<()>>,
    current: Option<Current>,
    /// A fetch task stopped (an error, a partition out of range): fetching
    /// is set up again before the next answer.
    troubled: bool,
    /// Partitions a fetch found out of range.
    out_of_range: Vec<usize>,
    /// Since when fetching has failed without a row, and why.
    failing: Option<(Instant, String)>,
    left: bool,
}

impl Drop for NativeConsumer {
    /// Commits what was handed over and leaves the group, on a thread of
    /// its own for up to [`super::consume::CLOSE_TIMEOUT`], as the
    /// librdkafka consumer's close does.
    fn drop(&mut self) {
        self.stop_fetching();
        self.membership.stop();
        if self.left {
            return;
        }
        let member = self.membership.member();
        let offsets = member.ownership().uncommitted();
        let Some(farewell) = member.farewell(&offsets) else {
            return;
        };
        let client_id = self.cluster.client_id().clone();
        let (sent, done) = std::sync::mpsc::channel();
        let leaving = std::thread::Builder::new()
            .name("kafka-leave".into())
            .spawn(move || {
                farewell.send(&client_id);
                let _ = sent.send(());
            });
        if leaving.is_ok() {
            let _ = done.recv_timeout(super::consume::CLOSE_TIMEOUT);
        }
    }
}

impl NativeConsumer {
    /// Whether the broker serves every API version the native consumer
    /// speaks (Kafka 2.7 or newer); asked of the first broker that answers.
    pub(super) async fn speaks_to(bootstrap: &[String]) -> Result<bool, DriverError> {
        let mut cluster = Cluster::new(
            bootstrap.to_vec(),
            StrBytes::from_static_str("loadcell"),
            CONNECT_TIMEOUT,
        );
        let answer = cluster
            .call_any(&ApiVersionsRequest::default(), 0)
            .await
            .map_err(|e| lost("ask the broker's API versions", &e))?;
        Ok(version::ALL.iter().all(|&(key, wanted)| {
            answer
                .api_keys
                .iter()
                .any(|k| k.api_key == key && (k.min_version..=k.max_version).contains(&wanted))
        }))
    }

    pub(super) async fn subscribe(
        bootstrap: Vec<String>,
        client_id: &str,
        group: &str,
        topic: &str,
        timing: GroupTiming,
        channels: Channels<'_>,
    ) -> Result<NativeConsumer, DriverError> {
        let client_id = StrBytes::from_string(client_id.to_string());
        let cluster = || Cluster::new(bootstrap.clone(), client_id.clone(), CONNECT_TIMEOUT);
        let mut own = cluster();
        let membership = match channels {
            Channels::Group => Membership::join(Member::new(group, topic, timing, true), cluster()),
            Channels::Assigned(partitions) => {
                let partitions: Vec<i32> = partitions.iter().map(|&p| p as i32).collect();
                let member = Member::new(group, topic, timing, false);
                Membership::assign(member, &mut own, &partitions).await?
            }
        };
        Ok(NativeConsumer {
            cluster: own,
            membership,
            fetching_epoch: 0,
            fetched: None,
            fetchers: Vec::new(),
            current: None,
            troubled: false,
            out_of_range: Vec::new(),
            failing: None,
            left: false,
        })
    }

    /// The partitions read now, in order.
    pub(super) fn assignment(&self) -> Vec<u32> {
        let ownership = self.membership.member().ownership();
        let mut partitions: Vec<u32> = ownership
            .read()
            .iter()
            .map(|o| o.partition as u32)
            .collect();
        partitions.sort_unstable();
        partitions
    }

    /// Hands over the rows already fetched, up to `max_rows`, waiting up
    /// to `wait` for the first. A change of the partitions read ends the
    /// batch, so [`PollOutcome::reassigned`] covers only rows after it.
    pub(super) async fn poll(
        &mut self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut outcome = PollOutcome::default();
        loop {
            let taken = (outcome.rows + outcome.undecodable) as usize;
            // Under the ownership's lock, released before any wait.
            let step = {
                let mut ownership = self.membership.member().ownership();
                if let Some(reason) = &ownership.failure {
                    return Err(DriverError::fatal(reason.clone()));
                }
                if ownership.epoch != self.fetching_epoch {
                    None
                } else if let Some(current) = self.current.as_mut() {
                    Some(hand_over(
                        current,
                        &mut ownership.partitions,
                        max_rows,
                        &mut outcome,
                        on_row,
                    )?)
                } else {
                    Some(Handed::Nothing)
                }
            };
            match step {
                // The partitions changed: set up again for the new ones.
                None if taken > 0 => return Ok(outcome),
                None => {
                    self.start_fetching().await?;
                    outcome.reassigned = true;
                    continue;
                }
                Some(Handed::Nothing) => {}
                Some(Handed::All) => {
                    self.current = None;
                    continue;
                }
                Some(Handed::Max) => return Ok(outcome),
                Some(Handed::Trouble { slot, error }) => {
                    self.troubled = true;
                    match error.err() {
                        Some(ResponseError::OffsetOutOfRange) => self.out_of_range.push(slot),
                        Some(e) if e.is_retriable() => {
                            self.failing.get_or_insert((Instant::now(), e.to_string()));
                        }
                        Some(e) => return Err(refused("fetch", e)),
                        None => {
                            return Err(DriverError::fatal(format!(
                                "could not fetch: error code {error}"
                            )))
                        }
                    }
                    continue;
                }
            }
            if self.troubled {
                self.mend(&mut outcome).await?;
                continue;
            }
            let next = match (&mut self.fetched, taken > 0) {
                (Some(fetched), true) => match fetched.try_recv() {
                    Ok(next) => Some(next),
                    Err(_) => return Ok(outcome),
                },
                (None, true) => return Ok(outcome),
                (fetched, false) => {
                    let answer = async {
                        match fetched {
                            Some(fetched) => fetched.recv().await,
                            None => std::future::pending().await,
                        }
                    };
                    let woke = tokio::select! {
                        next = answer => Woke::Fetched(next),
                        () = self.membership.member().changed() => Woke::OwnershipChanged,
                        () = tokio::time::sleep_until(deadline) => Woke::Deadline,
                    };
                    match woke {
                        Woke::Fetched(next) => next,
                        Woke::OwnershipChanged => continue,
                        Woke::Deadline => return Ok(outcome),
                    }
                }
            };
            match next {
                Some(Fetched::Answer(parts)) => {
                    self.current = Some(Current {
                        parts,
                        index: 0,
                        records: None,
                    })
                }
                Some(Fetched::Failed(reason)) => {
                    self.failing.get_or_insert((Instant::now(), reason));
                    self.troubled = true;
                }
                // Every fetch task stopped, each having said why.
                None => self.troubled = true,
            }
        }
    }

    /// Sets fetching up again after a fetch task stopped: partitions out
    /// of range are moved past their deleted rows (counted), the leaders
    /// are read again, and every partition is fetched from its position.
    async fn mend(&mut self, outcome: &mut PollOutcome) -> Result<(), DriverError> {
        self.stop_fetching();
        self.troubled = false;
        if let Some((since, reason)) = &self.failing {
            if since.elapsed() >= ADMIN_TIMEOUT {
                return Err(DriverError::connection(format!(
                    "could not fetch for {}: {reason}",
                    humantime::format_duration(ADMIN_TIMEOUT)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut out_of_range = std::mem::take(&mut self.out_of_range);
        out_of_range.sort_unstable();
        out_of_range.dedup();
        if !out_of_range.is_empty() {
            outcome.vanished += self.pass_deleted(&out_of_range).await?;
        }
        self.start_fetching().await
    }

    /// A partition's position lies outside its log: below its start, the
    /// rows between were deleted (DeleteRecords, retention) before the
    /// group read them, and are counted; past its end (the topic made
    /// again) nothing is. Either way it restarts at its start offset, and
    /// that is committed at once, so that the rows are missing once, from
    /// the run that passed them, and not again from `positions`.
    async fn pass_deleted(&mut self, slots: &[usize]) -> Result<u64, DriverError> {
        let member = self.membership.member();
        let (epoch, partitions) = {
            let ownership = member.ownership();
            let partitions: Vec<i32> = slots
                .iter()
                .map(|&s| ownership.partitions[s].partition)
                .collect();
            (ownership.epoch, partitions)
        };
        let starts = list_offsets(&mut self.cluster, member.topic(), &partitions, EARLIEST).await?;
        let mut vanished = 0;
        let mut moved = Vec::with_capacity(slots.len());
        {
            let mut ownership = member.ownership();
            // Taken back meanwhile: the next owner sees to them.
            if ownership.epoch != epoch {
                return Ok(0);
            }
            for (&slot, start) in slots.iter().zip(starts) {
                let owned = &mut ownership.partitions[slot];
                if owned.position < start {
                    vanished += (start - owned.position) as u64;
                }
                owned.position = start;
                moved.push((owned.partition, start));
            }
        }
        member.commit(&mut self.cluster, &moved).await?;
        member.ownership().committed(&moved);
        Ok(vanished)
    }

    /// Commits the positions handed over since the last commit.
    pub(super) async fn commit(&mut self) -> Result<(), DriverError> {
        let member = self.membership.member();
        let offsets = member.ownership().uncommitted();
        member.commit(&mut self.cluster, &offsets).await?;
        member.ownership().committed(&offsets);
        Ok(())
    }

    /// Commits and leaves the group.
    pub(super) async fn leave(&mut self) -> Result<(), DriverError> {
        self.stop_fetching();
        self.membership.stop();
        let member = self.membership.member();
        let offsets = member.ownership().uncommitted();
        member.leave(&mut self.cluster, &offsets).await?;
        self.left = true;
        Ok(())
    }

    fn stop_fetching(&mut self) {
        for task in self.fetchers.drain(..) {
            task.abort();
        }
        self.fetched = None;
        self.current = None;
    }

    /// One fetch task per leader of the partitions owned now.
    async fn start_fetching(&mut self) -> Result<(), DriverError> {
        self.stop_fetching();
        let member = self.membership.member();
        let (epoch, wanted) = {
            let ownership = member.ownership();
            let wanted: Vec<(usize, i32, i64)> = ownership
                .read()
                .iter()
                .enumerate()
                .map(|(slot, o)| (slot, o.partition, o.position))
                .collect();
            (ownership.epoch, wanted)
        };
        self.fetching_epoch = epoch;
        if wanted.is_empty() {
            return Ok(());
        }
        let partitions: Vec<i32> = wanted.iter().map(|w| w.1).collect();
        let leaders = leaders(&mut self.cluster, member.topic(), &partitions).await?;
        let mut by_leader: HashMap<String, Vec<(usize, i32, i64)>> = HashMap::new();
        for (want, leader) in wanted.into_iter().zip(leaders) {
            by_leader.entry(leader).or_default().push(want);
        }
        let (sender, fetched) = mpsc::channel(by_leader.len());
        for (leader, wanted) in by_leader {
            self.fetchers.push(tokio::spawn(fetch_from(
                leader,
                self.cluster.client_id().clone(),
                member.topic().clone(),
                wanted,
                sender.clone(),
            )));
        }
        self.fetched = Some(fetched);
        Ok(())
    }
}

/// How far [`hand_over`] went.
enum Handed {
    /// No answer to hand over.
    Nothing,
    /// Every row of the answer.
    All,
    /// `max_rows`, with rows left.
    Max,
    /// A partition's fetch failed; the answer's other rows are left.
    Trouble { slot: usize, error: i16 },
}

/// Hands over rows of `current`, moving the partitions' positions.
fn hand_over(
    current: &mut Current,
    partitions: &mut [Owned],
    max_rows: usize,
    outcome: &mut PollOutcome,
    on_row: &mut OnRow<'_>,
) -> Result<Handed, DriverError> {
    while let Some(part) = current.parts.get(current.index) {
        let owned = &mut partitions[part.slot];
        if current.records.is_none() {
            // Fetched before the partition's position moved (a seek past
            // deleted rows): stale.
            if part.from != owned.position {
                current.index += 1;
                continue;
            }
            if part.error != 0 {
                current.index += 1;
                return Ok(Handed::Trouble {
                    slot: part.slot,
                    error: part.error,
                });
            }
            current.records = Some(Records::new(part.records.clone()));
        }
        let records = current.records.as_mut().expect("set above");
        loop {
            if (outcome.rows + outcome.undecodable) as usize >= max_rows {
                return Ok(Handed::Max);
            }
            match records.next(owned.position).map_err(DriverError::fatal)? {
                Next::Record { offset, value } => {
                    owned.position = offset + 1;
                    outcome.take(value, on_row);
                }
                Next::End(next) => {
                    owned.position = next;
                    break;
                }
            }
        }
        current.records = None;
        current.index += 1;
    }
    Ok(Handed::All)
}

/// Fetches `wanted` (slot, partition, offset) from one leader until an
/// error or the consumer stops it, one request in flight while the
/// session reads the last answer.
async fn fetch_from(
    leader: String,
    client_id: StrBytes,
    topic: TopicName,
    mut wanted: Vec<(usize, i32, i64)>,
    answers: mpsc::Sender<Fetched>,
) {
    let failed = |what: String| Fetched::Failed(format!("{what} (broker {leader})"));
    let mut link = match Link::connect(&leader, &client_id, CONNECT_TIMEOUT).await {
        Ok(link) => link,
        Err(e) => {
            let _ = answers.send(failed(format!("no connection: {e}"))).await;
            return;
        }
    };
    while !wanted.is_empty() {
        let request = FetchRequest::default()
            .with_max_wait_ms(FETCH_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(MAX_FETCH_BYTES)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic.clone())
                .with_partitions(
                    wanted
                        .iter()
                        .map(|&(_, partition, at)| {
                            FetchPartition::default()
                                .with_partition(partition)
                                .with_fetch_offset(at)
                                .with_partition_max_bytes(PARTITION_FETCH_BYTES)
                        })
                        .collect(),
                )]);
        let answer = match link.call(&request, version::FETCH).await {
            Ok(answer) => answer,
            Err(e) => {
                let _ = answers.send(failed(format!("a fetch failed: {e}"))).await;
                return;
            }
        };
        if let Some(e) = answer.error_code.err() {
            let _ = answers
                .send(failed(format!("a fetch was refused: {e}")))
                .await;
            return;
        }
        let mut parts = Vec::with_capacity(wanted.len());
        for part in answer.responses.into_iter().flat_map(|t| t.partitions) {
            let Some(i) = wanted.iter().position(|w| w.1 == part.partition_index) else {
                continue;
            };
            let (slot, _, from) = wanted[i];
            let records = part.records.unwrap_or_default();
            if part.error_code == 0 {
                match batches::end_offset(&records) {
                    Ok(end) => wanted[i].2 = end.map_or(from, |end| end.max(from)),
                    Err(e) => {
                        let _ = answers.send(failed(e)).await;
                        return;
                    }
                }
            } else {
                // Fetched again once the consumer has seen to it.
                wanted.remove(i);
            }
            if part.error_code != 0 || !records.is_empty() {
                parts.push(FetchedPartition {
                    slot,
                    from,
                    error: part.error_code,
                    records,
                });
            }
        }
        // Partitions just served go to the back, as a fetch session's do:
        // the broker fills an answer in the order asked, and the first
        // partitions alone would fill it while the others wait.
        wanted.sort_by_key(|w| parts.iter().any(|p| p.slot == w.0));
        if !parts.is_empty() && answers.send(Fetched::Answer(parts)).await.is_err() {
            return;
        }
    }
}
