//! `stream`: rows produced into a stream of ordered channels and consumed
//! back through a group (Tablestore Tunnel's model; OMB's and
//! kafka-perf-test's option names), on Kafka, Redis Streams and
//! PostgreSQL logical replication ([`StreamConn`]).
//!
//! Producer sessions own disjoint channels: channel `c` is producer
//! `c % producers`'s, so each channel has exactly one producer session in
//! a run and its rows are numbered `0, 1, 2…` with no gap. A row's
//! channel is one of its producer's, by the hash of its keys. Consumer
//! sessions read through the group: with [`Channels::Group`] where the
//! server assigns channels ([`StreamConn::COORDINATED`]), else each its
//! share of the channels ([`Channels::Assigned`]). They check order per
//! channel and origin ([`order`]); only rows of this run's origin are
//! timed end to end (the consumer's clock minus the producer's, one
//! machine's clock: OMB's "swarm" rule).
//!
//! `prepare` creates the stream with a marker and the group (from the
//! beginning), and loads `--backlog` rows for a consume-only run to catch
//! up on; `cleanup` drops only a stream carrying loadcell's marker, and
//! only when every row in it is loadcell's (else `--force`). After
//! the run, [`Lifecycle::verify`] drains what the group has not yet
//! acknowledged (up to `--drain-timeout`) and compares.

pub mod order;
pub mod rows;
mod script;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::family::StreamFamily;
use loadcell_core::stream::{Channels, StartFrom, StreamConn, StreamRow};
use loadcell_core::{Driver, DriverError, DriverInfo, Family};
use loadcell_record::result::Verification;
use serde_json::{json, Value};

use crate::prepare::marker::Tag;
use crate::prepare::{CheckError, NotPrepared, PrepareObserver};
use crate::workload::{Cleanup, CleanupError, Lifecycle, Loading, Workload};
pub use script::StreamScript;

/// What the run's sessions do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Consume,
    Both,
}

impl Mode {
    pub const NAMES: &'static str = "produce, consume or both";

    pub fn parse(name: &str) -> Option<Mode> {
        match name {
            "produce" => Some(Mode::Produce),
            "consume" => Some(Mode::Consume),
            "both" => Some(Mode::Both),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::Both => "both",
        }
    }

    pub fn produces(self) -> bool {
        self != Mode::Consume
    }

    pub fn consumes(self) -> bool {
        self != Mode::Produce
    }
}

/// The stream's name when none is given: a legal name on every system
/// (PostgreSQL's table names take no hyphen).
pub const DEFAULT_STREAM: &str = "loadcell_stream";
/// The default before, which Kafka and Redis users may still have.
const FORMER_DEFAULT_STREAM: &str = "loadcell-stream";

/// The name of the producers' session group, and of the consumers'.
pub const PRODUCER_GROUP: &str = "producer";
pub const CONSUMER_GROUP: &str = "consumer";

#[derive(Debug, Clone)]
pub struct StreamOptions {
    pub stream: String,
    pub partitions: u32,
    /// Bytes of a row in [`loadcell_core::stream::RowCodec`]'s layout.
    pub row_size: usize,
    /// Rows per second over all producers; `None`: closed loop.
    pub produce_rate: Option<f64>,
    pub producers: usize,
    pub consumers: usize,
    pub group: String,
    /// `--group` was given: other processes may share the group.
    pub group_given: bool,
    pub mode: Mode,
    /// Rows per produce request.
    pub batch: usize,
    /// Rows per poll, at most.
    pub poll_max: usize,
    pub poll_wait: Duration,
    /// Rows `prepare` loads for a consume-only run.
    pub backlog: u64,
    /// How long the check after the run consumes what is left.
    pub drain_timeout: Duration,
    /// How often a consumer samples the group's lag: the report interval.
    pub lag_every: Duration,
}

impl StreamOptions {
    fn to_map(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("stream".to_string(), json!(self.stream)),
            ("partitions".to_string(), json!(self.partitions)),
            ("row_size".to_string(), json!(self.row_size)),
            ("produce_rate".to_string(), json!(self.produce_rate)),
            ("producers".to_string(), json!(self.producers)),
            ("consumers".to_string(), json!(self.consumers)),
            ("group".to_string(), json!(self.group)),
            ("mode".to_string(), json!(self.mode.as_str())),
            ("batch".to_string(), json!(self.batch)),
            ("poll_max".to_string(), json!(self.poll_max)),
            (
                "poll_wait_ms".to_string(),
                json!(self.poll_wait.as_millis() as u64),
            ),
            ("backlog".to_string(), json!(self.backlog)),
        ])
    }

    /// The channels consumer session `index` of `count` reads where the
    /// workload shares them out: every `count`th from `index`.
    pub fn share(&self, index: usize, count: usize) -> Vec<u32> {
        (0..self.partitions)
            .filter(|c| *c as usize % count == index)
            .collect()
    }
}

/// `stream`.
#[derive(Debug, Clone)]
pub struct StreamWorkload {
    pub opts: StreamOptions,
}

impl Workload for StreamWorkload {
    fn name(&self) -> &'static str {
        "stream"
    }

    fn families(&self) -> &'static [Family] {
        &[Family::STREAM]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        self.opts.to_map()
    }
}

/// Whose stream one by the name is.
async fn owner<C: StreamConn>(conn: &mut C, stream: &str) -> Result<Owner, DriverError> {
    Ok(match conn.stream_meta(stream).await? {
        None => Owner::Nobody,
        Some(meta) if Tag::parse(&meta.marker).is_some() => Owner::Loadcell(meta.channels),
        Some(_) => Owner::Other,
    })
}

/// Why loadcell's stream must not be dropped without `--force`: it holds
/// rows another producer wrote.
async fn others_rows<C: StreamConn>(
    conn: &mut C,
    stream: &str,
) -> Result<Option<String>, DriverError> {
    Ok(match conn.foreign_rows(stream).await? {
        0 => None,
        1 => Some(format!(
            "loadcell's stream '{stream}' holds 1 row not written by loadcell (another \
             producer's)"
        )),
        rows => Some(format!(
            "loadcell's stream '{stream}' holds {rows} rows not written by loadcell (another \
             producer's)"
        )),
    })
}

/// Where the default stream is not there but loadcell's stream under the
/// former default is, a hint to name it; else nothing.
async fn former_default_hint<C: StreamConn>(conn: &mut C, stream: &str) -> String {
    if stream != DEFAULT_STREAM {
        return String::new();
    }
    // PostgreSQL refuses the former name: there is none of it there.
    match owner(conn, FORMER_DEFAULT_STREAM).await {
        Ok(Owner::Loadcell(_)) => format!(
            " (loadcell's stream '{FORMER_DEFAULT_STREAM}', the default before \
             '{DEFAULT_STREAM}', is there: give --stream {FORMER_DEFAULT_STREAM})"
        ),
        _ => String::new(),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Owner {
    Nobody,
    /// loadcell's, of this many channels.
    Loadcell(u32),
    Other,
}

fn foreign(stream: &str) -> String {
    format!(
        "the stream '{stream}' exists and is not loadcell's (it carries no loadcell marker): \
         choose another --stream, or drop it by hand"
    )
}

/// The stream has `--partitions` channels (`prepare` makes it so).
fn same_channels(opts: &StreamOptions, channels: u32) -> Result<(), String> {
    if channels == opts.partitions {
        return Ok(());
    }
    Err(format!(
        "the stream '{}' has {channels} channels, not --partitions {}: give --partitions {channels}, \
         another --stream, or --prepare to make it again",
        opts.stream, opts.partitions
    ))
}

impl<C: StreamConn> Lifecycle<C, StreamFamily> for StreamWorkload {
    type Script = StreamScript;

    fn script(&self, seed: u64, _driver: &DriverInfo) -> StreamScript {
        StreamScript::new(&self.opts, seed, C::COORDINATED)
    }

    /// The stream is there with `--partitions` channels; a consuming run's
    /// group is made if it is missing (from the beginning for a
    /// consume-only run, which drains a backlog; else from the end).
    async fn check(&self, script: &StreamScript, conn: &mut C) -> Result<(), CheckError> {
        let o = &self.opts;
        match owner(conn, &o.stream).await? {
            Owner::Nobody => {
                return Err(CheckError::NotPrepared(NotPrepared(format!(
                    "there is no stream '{}'{}",
                    o.stream,
                    former_default_hint(conn, &o.stream).await
                ))))
            }
            Owner::Other => return Err(DriverError::fatal(foreign(&o.stream)).into()),
            Owner::Loadcell(channels) => {
                same_channels(o, channels).map_err(DriverError::fatal)?;
            }
        }
        if o.mode.consumes() {
            let from = match o.mode {
                Mode::Consume => StartFrom::Beginning,
                _ => StartFrom::End,
            };
            conn.create_group(&o.stream, &o.group, from).await?;
        }
        // Only a produce-only run's check counts what the stream held
        // before (positions may scan the stream).
        if o.mode == Mode::Produce {
            let held = conn.positions(&o.stream, &o.group).await?;
            script.set_held_before(held.iter().map(|p| p.end).sum());
        }
        Ok(())
    }

    /// Drains what the group has left, then compares.
    async fn verify<D>(
        &self,
        script: &StreamScript,
        driver: &D,
        connect_timeout: Duration,
    ) -> Result<Option<Verification>, DriverError>
    where
        D: Driver<Conn = C>,
    {
        let (mut conn, _) = loadcell_engine::connect_once(driver, connect_timeout).await?;
        script.verify(&mut conn).await.map(Some)
    }

    /// Creates the stream (marked) and the group, and loads `--backlog`.
    async fn prepare<D>(
        &self,
        driver: Arc<D>,
        _info: &DriverInfo,
        loading: Loading,
        observer: Rc<dyn PrepareObserver>,
    ) -> Result<(), DriverError>
    where
        D: Driver<Conn = C>,
    {
        let o = &self.opts;
        let (mut conn, _) =
            loadcell_engine::connect_once(&*driver, loading.connect_timeout).await?;
        match owner(&mut conn, &o.stream).await? {
            Owner::Nobody => {
                conn.create_stream(&o.stream, o.partitions, Tag::new().as_str())
                    .await?;
                observer.message(&format!(
                    "Created the stream '{}' of {} channels",
                    o.stream, o.partitions
                ));
            }
            Owner::Loadcell(channels) if channels == o.partitions => {
                observer.message(&format!(
                    "The stream '{}' was created by loadcell already: left as it is",
                    o.stream
                ));
            }
            // Loadcell's own, of another shape (a sweep over --partitions
            // preparing each step): made again.
            Owner::Loadcell(channels) => {
                if let Some(why) = others_rows(&mut conn, &o.stream).await? {
                    return Err(DriverError::fatal(format!(
                        "{why}: not made again; give another --stream, or drop it with \
                         cleanup --force first"
                    )));
                }
                conn.drop_group(&o.stream, &o.group).await?;
                conn.drop_stream(&o.stream).await?;
                conn.create_stream(&o.stream, o.partitions, Tag::new().as_str())
                    .await?;
                observer.message(&format!(
                    "Made loadcell's stream '{}' again with {} channels (it had {channels})",
                    o.stream, o.partitions
                ));
            }
            Owner::Other => return Err(DriverError::fatal(foreign(&o.stream))),
        }
        if o.mode.consumes()
            && conn
                .create_group(&o.stream, &o.group, StartFrom::Beginning)
                .await?
        {
            observer.message(&format!("Created the group '{}'", o.group));
        }
        if o.backlog > 0 {
            load_backlog(&mut conn, o).await?;
            observer.message(&format!(
                "Loaded a backlog of {} rows into '{}'",
                o.backlog, o.stream
            ));
        }
        Ok(())
    }

    async fn cleanup<D>(
        &self,
        driver: &D,
        how: &Cleanup,
        observer: &dyn PrepareObserver,
    ) -> Result<(), CleanupError>
    where
        D: Driver<Conn = C>,
    {
        let o = &self.opts;
        let (mut conn, _) = loadcell_engine::connect_once(driver, how.connect_timeout).await?;
        match owner(&mut conn, &o.stream).await? {
            Owner::Nobody => observer.message(&format!(
                "Nothing to clean up: there is no stream '{}'{}",
                o.stream,
                former_default_hint(&mut conn, &o.stream).await
            )),
            Owner::Loadcell(_) => {
                if !how.force {
                    if let Some(why) = others_rows(&mut conn, &o.stream).await? {
                        return Err(CleanupError::Refused(format!(
                            "{why}: left as it is; give --force to drop it with them"
                        )));
                    }
                }
                observer.message(&format!(
                    "Dropping the stream '{}' and its groups...",
                    o.stream
                ));
                conn.drop_group(&o.stream, &o.group).await?;
                conn.drop_stream(&o.stream).await?;
            }
            Owner::Other => {
                return Err(CleanupError::Refused(format!(
                    "the stream '{}' was not created by loadcell (it carries no loadcell \
                     marker): left as it is",
                    o.stream
                )))
            }
        }
        Ok(())
    }
}

/// `--backlog` rows, round the channels, `--batch` a request, numbered
/// per channel from 0 under an origin of their own.
async fn load_backlog<C: StreamConn>(conn: &mut C, o: &StreamOptions) -> Result<(), DriverError> {
    let origin = crate::origin::origin(rows::mix(o.backlog));
    let mut maker = rows::RowMaker::new(origin, o.row_size);
    let produced_ns = loadcell_core::clock::wall_ns();
    let mut failure = None;
    for first in (0..o.backlog).step_by(o.batch) {
        for n in first..(first + o.batch as u64).min(o.backlog) {
            let made = maker.next_row();
            let row = StreamRow {
                channel: (n % u64::from(o.partitions)) as u32,
                seq: n / u64::from(o.partitions),
                produced_ns,
                origin,
                keys: made.keys,
                payload: made.payload,
            };
            conn.queue_row(&o.stream, &row);
        }
        conn.produce(&mut |reason| {
            failure.get_or_insert_with(|| reason.to_string());
        })
        .await?;
        if let Some(reason) = failure.take() {
            return Err(DriverError::fatal(format!(
                "loading the backlog failed: {reason}"
            )));
        }
    }
    Ok(())
}

/// How a consumer session subscribes.
fn channels_of<'a>(coordinated: bool, share: &'a [u32]) -> Channels<'a> {
    if coordinated {
        Channels::Group
    } else {
        Channels::Assigned(share)
    }
}
