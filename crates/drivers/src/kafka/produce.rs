//! Producing: the driver's one librdkafka producer, and each session's
//! rows in it, counted until the brokers acknowledge them.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use loadcell_core::stream::{ProduceOutcome, RowCodec, StreamRow};
use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaResult, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{Producer as _, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use tokio::sync::Notify;

/// The driver's producer: its own thread serves the delivery reports.
pub(super) type SharedProducer = ThreadedProducer<AckCounter>;

fn new_producer(config: &ClientConfig) -> KafkaResult<SharedProducer> {
    config.create_with_context(AckCounter)
}

/// The driver's producer, made when a session first produces: a run that
/// only consumes has none, and no polling thread of its waking ten times
/// a second (the largest part of an idle consumer's CPU).
pub(super) struct LazyProducer {
    config: ClientConfig,
    made: OnceLock<Result<Arc<SharedProducer>, String>>,
}

impl LazyProducer {
    pub(super) fn new(config: ClientConfig) -> LazyProducer {
        LazyProducer {
            config,
            made: OnceLock::new(),
        }
    }

    fn get(&self) -> Result<Arc<SharedProducer>, String> {
        self.made
            .get_or_init(|| {
                new_producer(&self.config)
                    .map(Arc::new)
                    .map_err(|e| format!("could not make a Kafka producer: {e}"))
            })
            .clone()
    }
}

/// One session's records not yet acknowledged, and the failures among
/// those that were. Each record carries the address of its session's
/// `Acks` (not a counted reference: two atomic updates a row, on a line
/// the worker and the delivery thread would pass back and forth), so the
/// session keeps its `Acks` alive while any record is out ([`Session`]'s
/// `drop`).
#[derive(Default)]
pub(super) struct Acks {
    pending: AtomicU64,
    failures: Mutex<Vec<String>>,
    settled: Notify,
}

impl Acks {
    /// Counts `rows` as settled, waking `produce` at the last.
    fn settle(&self, rows: u64) {
        if self.pending.fetch_sub(rows, Ordering::AcqRel) == rows {
            self.settled.notify_one();
        }
    }
}

/// Counts each delivery report down on the [`Acks`] its record carried.
pub(super) struct AckCounter;

impl ClientContext for AckCounter {}

impl ProducerContext for AckCounter {
    /// The address of the record's session's [`Acks`].
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, acks: usize) {
        // SAFETY: the address of a live `Acks`: its session outlives the
        // records it queued, or leaks its `Acks` (`Session::drop`).
        let acks = unsafe { &*(acks as *const Acks) };
        if let Err((e, _)) = result {
            let reason = match e.rdkafka_error_code() {
                Some(code) => code.to_string(),
                None => e.to_string(),
            };
            acks.failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(reason);
        }
        acks.settle(1);
    }
}

/// librdkafka's handle of the topic a session produces to, kept so that
/// a record costs no lookup of the topic by name.
struct TopicHandle {
    name: String,
    handle: *mut rd::rd_kafka_topic_t,
}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: made by rd_kafka_topic_new, destroyed once, before the
        // producer it belongs to (the session holds the producer).
        unsafe { rd::rd_kafka_topic_destroy(self.handle) }
    }
}

/// How many bytes of rows a session stages before it hands them over
/// without waiting for `produce`: enough to read librdkafka's clocks and
/// take its topic lock once per few hundred rows, few enough that the
/// rows are still in the cache when librdkafka copies them.
const HAND_OVER_BYTES: usize = 64 * 1024;

/// A row staged for the next batch: its partition and where its bytes
/// lie in [`Session::staged`].
struct StagedRow {
    partition: u32,
    start: u32,
    len: u32,
}

/// A session's side of the shared producer. `topic` is declared before
/// `producer` so that it is dropped first.
///
/// Rows are staged (encoded back to back into one reused buffer) and
/// handed to librdkafka every [`HAND_OVER_BYTES`] and at `produce`, one
/// `rd_kafka_produce_batch` call per partition: librdkafka then reads its
/// clocks, read-locks the topic and looks the partition up once a call
/// instead of once a row.
pub(super) struct Session {
    topic: Option<TopicHandle>,
    /// The driver's producer, once this session produced.
    producer: Option<Arc<SharedProducer>>,
    lazy: Arc<LazyProducer>,
    /// Why the producer could not be made, until `produce` reports it.
    unmade: Option<String>,
    acks: Arc<Acks>,
    /// The topic of the staged rows.
    staged_topic: String,
    staged: Vec<u8>,
    staged_rows: Vec<StagedRow>,
    /// The records handed over, ordered by partition, and where each
    /// partition's records go in it (their starts; once placed, their
    /// ends), reused.
    batch: Vec<rd::rd_kafka_message_t>,
    partition_bounds: Vec<usize>,
    /// Records handed to librdkafka since the last `produce`.
    queued: u64,
    /// Rows librdkafka refused at once (its queue full), with why.
    refused: u64,
    refusal: Option<RDKafkaErrorCode>,
}

impl Drop for Session {
    /// Records still out (a `produce` that was abandoned) will be reported
    /// to this session's `Acks`: it must outlive them, so it is leaked.
    fn drop(&mut self) {
        if self.acks.pending.load(Ordering::Acquire) > 0 {
            std::mem::forget(Arc::clone(&self.acks));
        }
    }
}

impl Session {
    pub(super) fn new(lazy: Arc<LazyProducer>) -> Session {
        Session {
            topic: None,
            producer: None,
            lazy,
            unmade: None,
            acks: Arc::default(),
            staged_topic: String::new(),
            staged: Vec::new(),
            staged_rows: Vec::new(),
            batch: Vec::new(),
            partition_bounds: Vec::new(),
            queued: 0,
            refused: 0,
            refusal: None,
        }
    }

    pub(super) fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>) {
        let start = self.stage_start(stream);
        RowCodec::encode(row, &mut self.staged);
        self.stage_end(row.channel, start);
    }

    /// Stages `value` for `topic`'s `partition`.
    pub(super) fn queue_raw(&mut self, topic: &str, partition: u32, value: &[u8]) {
        let start = self.stage_start(topic);
        self.staged.extend_from_slice(value);
        self.stage_end(partition, start);
    }

    /// Where the next row's bytes start, once rows staged for another
    /// topic are handed over.
    fn stage_start(&mut self, topic: &str) -> usize {
        if self.staged_topic != topic {
            self.hand_over();
            topic.clone_into(&mut self.staged_topic);
        }
        self.staged.len()
    }

    fn stage_end(&mut self, partition: u32, start: usize) {
        let offset = |at: usize| u32::try_from(at).expect("a batch's rows are under 4 GiB");
        self.staged_rows.push(StagedRow {
            partition,
            start: offset(start),
            len: offset(self.staged.len() - start),
        });
        if self.staged.len() >= HAND_OVER_BYTES {
            self.hand_over();
        }
    }

    /// Hands the staged rows to librdkafka (which copies them), the
    /// session's [`Acks`] riding along for the delivery reports.
    fn hand_over(&mut self) {
        if self.staged_rows.is_empty() {
            return;
        }
        if self.producer.is_none() {
            match self.lazy.get() {
                Ok(producer) => self.producer = Some(producer),
                Err(e) => {
                    self.unmade = Some(e);
                    self.staged_rows.clear();
                    self.staged.clear();
                    return;
                }
            }
        }
        let topic = std::mem::take(&mut self.staged_topic);
        let handle = self.topic_handle(&topic);
        self.staged_topic = topic;
        // By partition, in staging order within each (a channel's rows
        // stay in order): a counting sort into `batch`.
        let partitions = self.staged_rows.iter().map(|row| row.partition).max();
        let at = &mut self.partition_bounds;
        at.clear();
        at.resize(partitions.map_or(0, |last| last as usize + 1), 0);
        for row in &self.staged_rows {
            at[row.partition as usize] += 1;
        }
        let mut start = 0;
        for slot in at.iter_mut() {
            (*slot, start) = (start, start + *slot);
        }
        let acks = Arc::as_ptr(&self.acks) as *mut std::ffi::c_void;
        let unset = rd::rd_kafka_message_t {
            err: rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
            rkt: std::ptr::null_mut(),
            partition: 0,
            payload: std::ptr::null_mut(),
            len: 0,
            key: std::ptr::null_mut(),
            key_len: 0,
            offset: 0,
            _private: acks,
        };
        self.batch.clear();
        self.batch.resize(self.staged_rows.len(), unset);
        for row in &self.staged_rows {
            let slot = &mut at[row.partition as usize];
            let record = &mut self.batch[*slot];
            *slot += 1;
            let bytes = &self.staged[row.start as usize..][..row.len as usize];
            record.payload = bytes.as_ptr() as *mut _;
            record.len = bytes.len();
        }
        let rows = self.batch.len() as u64;
        // Counted before: a report can come before the call returns.
        self.acks.pending.fetch_add(rows, Ordering::AcqRel);
        // One call a partition, not one with each record naming its own
        // (F_PARTITION): librdkafka 2.12 then leaks a record whose
        // partition or topic it does not know, and its place in the
        // producer's queue. `partition_bounds` now holds where each
        // partition's records end.
        let mut taken = 0;
        let mut start = 0;
        for (partition, &end) in self.partition_bounds.iter().enumerate() {
            let records = &mut self.batch[start..end];
            start = end;
            if records.is_empty() {
                continue;
            }
            // SAFETY: `handle` belongs to this producer; librdkafka copies
            // each value (F_COPY) before returning; a record it took
            // reports to the session's `Acks` once, one it refused never.
            let took = unsafe {
                rd::rd_kafka_produce_batch(
                    handle,
                    partition as i32,
                    rd::RD_KAFKA_MSG_F_COPY,
                    records.as_mut_ptr(),
                    records.len() as i32,
                )
            };
            taken += took.max(0) as u64;
        }
        if taken < rows {
            self.acks.settle(rows - taken);
            self.refused += rows - taken;
            let refusal = self
                .batch
                .iter()
                .map(|record| record.err)
                .find(|err| *err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
            self.refusal = refusal.map(RDKafkaErrorCode::from);
        }
        self.queued += taken;
        self.staged_rows.clear();
        self.staged.clear();
    }

    /// Hands the staged rows over and waits until every record queued
    /// since the last call is acknowledged or failed. Fails only when the
    /// producer could not be made.
    pub(super) async fn produce(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<ProduceOutcome, String> {
        self.hand_over();
        if let Some(e) = self.unmade.take() {
            return Err(e);
        }
        loop {
            let settled = self.acks.settled.notified();
            if self.acks.pending.load(Ordering::Acquire) == 0 {
                break;
            }
            settled.await;
        }
        let failures =
            std::mem::take(&mut *self.acks.failures.lock().unwrap_or_else(|e| e.into_inner()));
        for reason in &failures {
            on_failure(reason);
        }
        if let Some(code) = self.refusal.take() {
            let reason = format!("librdkafka refused the row: {code}");
            for _ in 0..self.refused {
                on_failure(&reason);
            }
        }
        let outcome = ProduceOutcome {
            rows: self.queued + self.refused,
            failed: failures.len() as u64 + self.refused,
        };
        (self.queued, self.refused) = (0, 0);
        Ok(outcome)
    }

    /// The handle of `topic`, made when the session first produces to it.
    fn topic_handle(&mut self, topic: &str) -> *mut rd::rd_kafka_topic_t {
        match &self.topic {
            Some(kept) if kept.name == topic => kept.handle,
            _ => {
                let name = CString::new(topic).expect("a topic name has no NUL");
                // SAFETY: a valid client and name; a NULL configuration
                // takes the producer's defaults.
                let producer = self.producer.as_ref().expect("made before a row is queued");
                let handle = unsafe {
                    rd::rd_kafka_topic_new(
                        producer.client().native_ptr(),
                        name.as_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                assert!(
                    !handle.is_null(),
                    "librdkafka made no handle for topic {topic}"
                );
                self.topic = Some(TopicHandle {
                    name: topic.to_string(),
                    handle,
                });
                handle
            }
        }
    }
}
