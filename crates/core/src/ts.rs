//! The time-series family (InfluxDB, Prometheus, VictoriaMetrics, QuestDB):
//! writing points in batches and querying them back, over whichever
//! protocol the target names (Influx line protocol, OpenTSDB `/api/put`,
//! Prometheus remote write).
//!
//! One data model for every protocol: a point is a measurement, tags
//! (keys with string values) and float fields at a timestamp. The workload
//! hands a point to the connection piece by piece ([`TsConn::point`],
//! [`TsConn::tag`], [`TsConn::field`], [`TsConn::end_point`]) and the
//! driver encodes it at once into the request it is building, in its wire
//! format, so that neither side holds a point as owned data. How the
//! model maps onto a protocol's series is the driver's: line protocol keeps
//! a point's fields in one series (`measurement,tags`), OpenTSDB and
//! Prometheus make one series per field (`measurement.field`,
//! `measurement_field`) with the same tags. The questions below are asked
//! in the model's terms and answered in the database's own language
//! (InfluxQL, PromQL, SQL).

use crate::DriverError;

/// What a write request's answer said about its points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Points the request carried.
    pub points: u64,
    /// Points among them the server said it did not store (a partial
    /// write, OpenTSDB's `failed`), each failure's reason given to the
    /// `on_failure` callback.
    pub failed: u64,
}

/// A series of the model: a measurement and its tags, as written.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    pub measurement: &'a str,
    /// Tag keys and values, in the order they were written.
    pub tags: &'a [(&'a str, &'a str)],
}

/// A time range, nanoseconds since the Unix epoch, start included, end
/// excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    pub start_ns: i64,
    pub end_ns: i64,
}

/// The questions `ts-query` asks, translated by the driver into the
/// database's language.
#[derive(Debug, Clone, Copy)]
pub enum TsQuery<'a> {
    /// The last point of one series' field.
    LastPoint { series: Series<'a>, field: &'a str },
    /// The mean of one series' field over `range`, by `step_ns` (an hour
    /// by minute in TSBS's terms).
    RangeMean {
        series: Series<'a>,
        field: &'a str,
        range: TimeRange,
        step_ns: i64,
    },
    /// The mean of a field over `range` for each value of `tag`, across
    /// every series of the measurement.
    GroupBy {
        measurement: &'a str,
        field: &'a str,
        tag: &'a str,
        range: TimeRange,
    },
}

/// What the database holds of one series' field: what `verify` compares
/// with what was sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredPoints {
    pub count: u64,
    /// The values' sum: points another run left at the same timestamps
    /// (its values drawn from another seed) change it.
    pub sum: f64,
    pub last_timestamp_ns: i64,
    pub last_value: f64,
}

/// The names loadcell gives a measurement's tags and fields: what tells
/// its points from another writer's in the same store.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    pub measurement: &'a str,
    pub tags: Names<'a>,
    pub fields: Names<'a>,
}

/// Names loadcell writes.
#[derive(Debug, Clone, Copy)]
pub enum Names<'a> {
    /// These.
    Listed(&'a [&'a str]),
    /// The prefix and a decimal number (`tag0`, `field12`).
    Numbered(&'a str),
}

impl Names<'_> {
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Names::Listed(names) => names.contains(&name),
            Names::Numbered(prefix) => name
                .strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        }
    }
}

impl Shape<'_> {
    /// Whether a tag key, field or column is one loadcell writes.
    pub fn owns(&self, name: &str) -> bool {
        self.tags.contains(name) || self.fields.contains(name)
    }
}

/// What `cleanup` found of a measurement's points.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// The database's names for them: InfluxDB measurements (`m`, or
    /// `m.f` for OpenTSDB's), a QuestDB table, Prometheus metrics (`m_f`
    /// of loadcell's fields only).
    pub names: Vec<String>,
    /// Tag keys, fields or columns held there that loadcell never writes:
    /// another writer's points.
    pub foreign: Vec<String>,
}

/// What became of the target's database once loadcell's stores in it
/// were dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseLeft {
    /// The target has no database of its own to drop (QuestDB,
    /// Prometheus, VictoriaMetrics).
    NotOwn,
    /// Dropped: nothing else was in it.
    Dropped(String),
    /// Left as it is, holding these (another writer's measurements, or
    /// loadcell's other stores).
    Holding(String, Vec<String>),
}

pub trait TsConn {
    /// Whether the server answers each write with an account of its
    /// points (HTTP); `false` over a bare TCP stream (line protocol,
    /// OpenTSDB's `put`), whose writes count points as sent, not stored:
    /// only the check after the run shows they arrived.
    const ACKNOWLEDGED: bool;

    /// Starts a point of `measurement` in the request being built.
    fn point(&mut self, measurement: &str);
    /// Adds a tag to the point started last.
    fn tag(&mut self, key: &str, value: &str);
    /// Adds a field to the point started last.
    fn field(&mut self, key: &str, value: f64);
    /// Ends the point started last, at `timestamp_ns`.
    fn end_point(&mut self, timestamp_ns: i64);

    /// Sends the points ended since the last `write` as one request and
    /// empties the request, whatever the answer. A failed point's reason
    /// goes to `on_failure`, called only for failures; a refused request
    /// (non-2xx with no per-point account) is an error.
    async fn write(
        &mut self,
        on_failure: &mut dyn FnMut(&str),
    ) -> Result<WriteOutcome, DriverError>;

    /// Runs `query`; returns the rows (InfluxQL, SQL) or samples (PromQL)
    /// the answer held.
    async fn query(&mut self, query: &TsQuery<'_>) -> Result<u64, DriverError>;

    /// What the database holds of `series`' `field` within `range`;
    /// `None` when it holds no point of it.
    async fn stored_points(
        &mut self,
        series: Series<'_>,
        field: &str,
        range: TimeRange,
    ) -> Result<Option<StoredPoints>, DriverError>;

    /// How many series (distinct tag sets) of `measurement` the database
    /// holds, counted by its own API; `field` names the series where the
    /// protocol keeps one per field. With `range`, only those with a point
    /// in it.
    async fn series_count(
        &mut self,
        measurement: &str,
        field: &str,
        range: Option<TimeRange>,
    ) -> Result<u64, DriverError>;

    /// Creates the place points go where the database needs one made (an
    /// InfluxDB database, a QuestDB table) and records `marker` with it,
    /// so that `cleanup` can tell it is loadcell's; `Ok(false)` where
    /// nothing needs creating (Prometheus, VictoriaMetrics).
    async fn create_store(&mut self, measurement: &str, marker: &str) -> Result<bool, DriverError>;

    /// The marker recorded by `create_store`: `Some("")` when the store
    /// exists without one, `None` when it does not exist (or the database
    /// has no stores).
    async fn store_marker(&mut self, measurement: &str) -> Result<Option<String>, DriverError>;

    /// Where `shape`'s points are, and what of another writer's is held
    /// with them; nothing when there are none.
    async fn holdings(&mut self, shape: Shape<'_>) -> Result<Holdings, DriverError>;

    /// Drops `names` (found by [`TsConn::holdings`]) whole, and the
    /// store's marker: InfluxDB's measurements, QuestDB's table, or every
    /// Prometheus series of those metric names.
    async fn drop_store(&mut self, shape: Shape<'_>, names: &[String]) -> Result<(), DriverError>;

    /// After `drop_store`: drops the target's database if `create_store`
    /// made it and nothing else is in it.
    async fn drop_database_if_empty(&mut self) -> Result<DatabaseLeft, DriverError>;
}
