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
use rdkafka::{ClientContext, IntoOpaque};
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
/// those that were.
#[derive(Default)]
pub(super) struct Acks {
    pending: AtomicU64,
    failures: Mutex<Vec<String>>,
    settled: Notify,
}

impl Acks {
    fn settle(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.settled.notify_one();
        }
    }
}

/// Counts each delivery report down on the [`Acks`] its record carried.
pub(super) struct AckCounter;

impl ClientContext for AckCounter {}

impl ProducerContext for AckCounter {
    type DeliveryOpaque = Arc<Acks>;

    fn delivery(&self, result: &DeliveryResult<'_>, acks: Arc<Acks>) {
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
        acks.settle();
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

/// A session's side of the shared producer. `topic` is declared before
/// `producer` so that it is dropped first.
pub(super) struct Session {
    topic: Option<TopicHandle>,
    /// The driver's producer, once this session produced.
    producer: Option<Arc<SharedProducer>>,
    lazy: Arc<LazyProducer>,
    /// Why the producer could not be made, until `produce` reports it.
    unmade: Option<String>,
    acks: Arc<Acks>,
    /// Records handed to librdkafka since the last `produce`.
    queued: u64,
    /// Rows librdkafka refused at once (its queue full), with why.
    refused: u64,
    refusal: Option<RDKafkaErrorCode>,
    encoded: Vec<u8>,
}

impl Session {
    pub(super) fn new(lazy: Arc<LazyProducer>) -> Session {
        Session {
            topic: None,
            producer: None,
            lazy,
            unmade: None,
            acks: Arc::default(),
            queued: 0,
            refused: 0,
            refusal: None,
            encoded: Vec::new(),
        }
    }

    pub(super) fn queue_row(&mut self, stream: &str, row: &StreamRow<'_>) {
        let mut encoded = std::mem::take(&mut self.encoded);
        encoded.clear();
        RowCodec::encode(row, &mut encoded);
        self.queue_raw(stream, row.channel as i32, &encoded);
        self.encoded = encoded;
    }

    /// Hands `value` to librdkafka for `topic`'s `partition` (it copies
    /// it), the session's [`Acks`] riding along for the delivery report.
    pub(super) fn queue_raw(&mut self, topic: &str, partition: i32, value: &[u8]) {
        if self.producer.is_none() {
            match self.lazy.get() {
                Ok(producer) => self.producer = Some(producer),
                Err(e) => {
                    self.unmade = Some(e);
                    return;
                }
            }
        }
        let handle = self.topic_handle(topic);
        self.acks.pending.fetch_add(1, Ordering::AcqRel);
        let opaque = self.acks.clone().into_ptr();
        // SAFETY: `handle` belongs to this producer; librdkafka copies the
        // value (F_COPY) before returning; the opaque comes back once,
        // in the delivery report, or not at all when this call fails.
        let status = unsafe {
            rd::rd_kafka_produce(
                handle,
                partition,
                rd::RD_KAFKA_MSG_F_COPY,
                value.as_ptr() as *mut _,
                value.len(),
                std::ptr::null(),
                0,
                opaque,
            )
        };
        if status == 0 {
            self.queued += 1;
            return;
        }
        // SAFETY: librdkafka refused the record and kept no pointer to it.
        drop(unsafe { Arc::<Acks>::from_ptr(opaque) });
        self.acks.pending.fetch_sub(1, Ordering::AcqRel);
        self.refused += 1;
        // SAFETY: reads the calling thread's last librdkafka error.
        self.refusal = Some(unsafe { rd::rd_kafka_last_error() }.into());
    }

    /// Why the producer could not be made, once.
    pub(super) fn unmade(&mut self) -> Option<String> {
        self.unmade.take()
    }

    /// Waits until every record queued since the last call is
    /// acknowledged or failed.
    pub(super) async fn produce(&mut self, on_failure: &mut dyn FnMut(&str)) -> ProduceOutcome {
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
        outcome
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
