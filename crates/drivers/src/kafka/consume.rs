//! Consuming: one group member per session, polled without blocking the
//! worker thread (librdkafka wakes the task when records arrive).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use futures_core::Stream;
use loadcell_core::stream::{Channels, OnRow, PollOutcome};
use loadcell_core::DriverError;
use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol,
    StreamConsumer,
};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use super::{fatal, kafka_error, until_coordinated, ADMIN_TIMEOUT};

/// What the group's events told a member between two polls.
#[derive(Default)]
pub(super) struct MemberEvents {
    /// Partitions were assigned or revoked.
    reassigned: AtomicBool,
    /// Why the last asynchronous commit failed.
    commit_failure: Mutex<Option<String>>,
}

impl ClientContext for MemberEvents {}

impl ConsumerContext for MemberEvents {
    /// Commits what was polled from partitions about to move, so that
    /// their next owner starts after it.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(partitions) = rebalance else {
            return;
        };
        if partitions.count() == 0 {
            return;
        }
        match consumer.commit_consumer_state(CommitMode::Sync) {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => self.commit_failed(e.to_string()),
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        self.reassigned.store(true, Ordering::Release);
    }

    fn commit_callback(&self, result: KafkaResult<()>, _: &TopicPartitionList) {
        if let Err(e) = result {
            self.commit_failed(e.to_string());
        }
    }
}

impl MemberEvents {
    fn commit_failed(&self, reason: String) {
        *self
            .commit_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(reason);
    }
}

/// How long dropping a consumer waits for librdkafka's close (leaving
/// the group, committing at the revoke). The close can wait forever
/// (rust-rdkafka#509); past this the group drops the member itself, after
/// its session timeout, so nothing is lost by going on.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A session's consumer, a member of its group. Only the offsets of rows
/// handed to the workload are stored for commit (`enable.auto.offset.store`
/// is off): librdkafka's close polls and drops rows still queued, and
/// with automatic storing their offsets were committed at the revoke
/// though no one counted them.
pub(super) struct GroupConsumer {
    /// `None` only inside `drop`.
    consumer: Option<StreamConsumer<MemberEvents>>,
}

impl Drop for GroupConsumer {
    /// Closes on a thread of its own, for up to [`CLOSE_TIMEOUT`].
    fn drop(&mut self) {
        let consumer = self.consumer.take();
        let (closed, done) = std::sync::mpsc::channel();
        let closing = std::thread::Builder::new()
            .name("kafka-close".into())
            .spawn(move || {
                drop(consumer);
                let _ = closed.send(());
            });
        if closing.is_ok() {
            let _ = done.recv_timeout(CLOSE_TIMEOUT);
        }
    }
}

impl GroupConsumer {
    pub(super) fn subscribe(
        config: &ClientConfig,
        stream: &str,
        channels: Channels<'_>,
    ) -> Result<GroupConsumer, DriverError> {
        let consumer: StreamConsumer<MemberEvents> = config
            .create_with_context(MemberEvents::default())
            .map_err(|e| fatal("make a Kafka consumer", &e))?;
        match channels {
            Channels::Group => consumer
                .subscribe(&[stream])
                .map_err(|e| fatal("subscribe", &e))?,
            Channels::Assigned(partitions) => {
                let mut list = TopicPartitionList::with_capacity(partitions.len());
                for &partition in partitions {
                    // From the group's committed offset.
                    list.add_partition_offset(stream, partition as i32, Offset::Stored)
                        .map_err(|e| fatal("assign partitions", &e))?;
                }
                consumer
                    .assign(&list)
                    .map_err(|e| fatal("assign partitions", &e))?;
            }
        }
        Ok(GroupConsumer {
            consumer: Some(consumer),
        })
    }

    fn consumer(&self) -> &StreamConsumer<MemberEvents> {
        self.consumer
            .as_ref()
            .expect("a consumer until it is dropped")
    }

    /// Waits up to `wait` for the first record, then takes the records
    /// already fetched, up to `max_rows`. A rebalance ends the batch so
    /// that [`PollOutcome::reassigned`] is true only for the rows after it.
    pub(super) async fn poll(
        &self,
        max_rows: usize,
        wait: Duration,
        on_row: &mut OnRow<'_>,
    ) -> Result<PollOutcome, DriverError> {
        let consumer = self.consumer();
        let events = consumer.context();
        let mut stream = consumer.stream();
        let mut outcome = PollOutcome::default();
        let batch = std::future::poll_fn(|cx| loop {
            let taken = (outcome.rows + outcome.undecodable) as usize;
            if events.reassigned.load(Ordering::Acquire) {
                if taken > 0 {
                    return Poll::Ready(Ok(()));
                }
                outcome.reassigned |= events.reassigned.swap(false, Ordering::AcqRel);
            }
            if taken >= max_rows {
                return Poll::Ready(Ok(()));
            }
            match Pin::new(&mut stream).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    // SAFETY: a message of this consumer, not yet dropped.
                    // A partition revoked meanwhile refuses the store; its
                    // next owner reads the row again, as Kafka promises.
                    // (rdkafka's `store_offset_from_message` calls the
                    // legacy `rd_kafka_offset_store`, which librdkafka
                    // says is for the simple consumer, not a group's.)
                    unsafe { rd::rd_kafka_offset_store_message(message.ptr()) };
                    outcome.take(message.payload().unwrap_or_default(), on_row);
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => unreachable!("a Kafka consumer's stream never ends"),
                Poll::Pending if taken > 0 => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        });
        let finished = tokio::time::timeout(wait, batch).await;
        match finished {
            Ok(Ok(())) | Err(_) => Ok(outcome),
            Ok(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset))) => {
                outcome.vanished += self.pass_deleted().map_err(|e| {
                    kafka_error("go past rows deleted before the group read them", &e)
                })?;
                Ok(outcome)
            }
            Ok(Err(e)) => Err(kafka_error("consume", &e)),
        }
    }

    /// librdkafka found the offset a partition was to be read from out of
    /// its log's range (`auto.offset.reset=error`) and stopped fetching
    /// it, without saying which partition: each partition assigned is
    /// looked at. The rows between a partition's next offset and a start
    /// offset above it were deleted before the group read them: they are
    /// counted, and the partition restarts at its start offset. An offset
    /// past the end (the topic made again) or none restarts there too, as
    /// `earliest` did, with nothing counted. The group's offset is
    /// committed past the rows counted, so that they are missing once,
    /// from the run that passed them, and not again from
    /// `StreamConn::positions`. A few blocking requests on the worker
    /// thread, once per deletion met, never per row.
    fn pass_deleted(&self) -> KafkaResult<u64> {
        let consumer = self.consumer();
        // What was handed over becomes the group's first: the committed
        // offsets are then where each partition is read from next, and the
        // assignment made again below forgets the offsets stored.
        match consumer.commit_consumer_state(CommitMode::Sync) {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => return Err(e),
        }
        let next = until_coordinated(|| consumer.committed(ADMIN_TIMEOUT))?;
        let mut vanished = 0;
        let mut moved = TopicPartitionList::new();
        let mut whole = TopicPartitionList::with_capacity(next.count());
        for e in next.elements() {
            let (topic, partition) = (e.topic(), e.partition());
            let (low, high) = consumer.fetch_watermarks(topic, partition, ADMIN_TIMEOUT)?;
            let from = match e.offset() {
                Offset::Offset(at) if (low..=high).contains(&at) => at,
                start => {
                    // Below the start: deleted unread. Past the end, or
                    // none: nothing to count.
                    if let Offset::Offset(at) = start {
                        vanished += (low - at).max(0) as u64;
                    }
                    moved.add_partition_offset(topic, partition, Offset::Offset(low))?;
                    low
                }
            };
            whole.add_partition_offset(topic, partition, Offset::Offset(from))?;
        }
        if moved.count() == 0 {
            return Ok(0);
        }
        // Seeking a partition librdkafka stopped is refused (ERR__STATE):
        // it is assigned again. An eager group takes only a whole
        // assignment, a cooperative one only the partitions changed.
        if matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        ) {
            consumer.incremental_unassign(&moved)?;
            consumer.incremental_assign(&moved)?;
        } else {
            consumer.assign(&whole)?;
        }
        until_coordinated(|| consumer.commit(&moved, CommitMode::Sync))?;
        Ok(vanished)
    }

    pub(super) fn assignment(&self) -> Result<Vec<u32>, DriverError> {
        let list = self
            .consumer()
            .assignment()
            .map_err(|e| fatal("read the assignment", &e))?;
        let mut channels: Vec<u32> = list
            .elements()
            .iter()
            .map(|e| e.partition() as u32)
            .collect();
        channels.sort_unstable();
        Ok(channels)
    }

    /// Commits the positions polled so far, asynchronously; reports the
    /// failure of the previous commit, if it failed.
    pub(super) fn commit(&self) -> Result<(), DriverError> {
        let consumer = self.consumer();
        let failed = consumer
            .context()
            .commit_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(reason) = failed {
            return Err(DriverError::fatal(format!(
                "an offset commit failed: {reason}"
            )));
        }
        match consumer.commit_consumer_state(CommitMode::Async) {
            // Nothing polled since the last commit.
            Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => Ok(()),
            result => result.map_err(|e| kafka_error("commit offsets", &e)),
        }
    }
}
