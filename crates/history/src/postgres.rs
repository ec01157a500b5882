//! The PostgreSQL store (`--history postgres://…`): one store a team
//! shares, with the tables and versions of the SQLite one. Give it a
//! database of its own (its tables are `schema_version`, `series`,
//! `series_labels`, `entries` and `server_counters`). Concurrent writers
//! are PostgreSQL's business; migrations take a transaction-scoped
//! advisory lock, so two loadcells opening a new store at once apply each
//! migration once.
//!
//! Connections are plain TCP (`sslmode` is not honoured): use it on a
//! trusted network, or through a TLS tunnel.

use std::collections::{BTreeMap, HashMap};

use postgres::{Client, NoTls};

use crate::entry::{Entry, Flags, Histogram, Metrics, ThroughputUnit};
use crate::schema;
use crate::sqlite::parse_key;
use crate::store::{epoch_us, Recorded, SeriesFilter, SeriesInfo, Store};
use crate::Error;

/// The advisory lock migrations hold: "loadcell" in ASCII.
const MIGRATION_LOCK: i64 = 0x6c6f_6164_6365_6c6c;

pub struct PostgresStore {
    client: Client,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`)
    /// and brings the schema to the latest version. Errors never show the
    /// password.
    pub fn connect(url: &str) -> Result<PostgresStore, Error> {
        let shown = loadcell_core::target::redact_raw(url);
        let client = Client::connect(url, NoTls)
            .map_err(|e| Error::Connect(format!("{shown}: {}", crate::pg_message(&e))))?;
        let mut store = PostgresStore { client };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&mut self) -> Result<(), Error> {
        let mut tx = self.client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        tx.batch_execute(schema::VERSION_TABLE_POSTGRES)?;
        let current: i32 = tx
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?
            .get(0);
        let current = current as u32;
        for m in schema::pending(current)? {
            tx.batch_execute(m.postgres)?;
            tx.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
                &[&(m.version as i32), &schema::now()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

impl Store for PostgresStore {
    fn insert(&mut self, entries: &[Entry]) -> Result<Recorded, Error> {
        let mut tx = self.client.transaction()?;
        let add_series = tx.prepare(
            "INSERT INTO series (id, key_text, key_json, workload, target)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
        )?;
        let stored_key = tx.prepare("SELECT key_text FROM series WHERE id = $1")?;
        let add_label =
            tx.prepare("INSERT INTO series_labels (series_id, name, value) VALUES ($1, $2, $3)")?;
        let add_entry = tx.prepare(
            "INSERT INTO entries (series_id, started_at, started_at_us, host, commit_id,
                 file, partial, verification_failed, rate_not_reached, client_saturated,
                 throughput, throughput_unit, p50_ms, p90_ms, p99_ms, p999_ms, error_rate,
                 client_cpu_us_per_op, histogram_encoding, histogram_unit, histogram)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 $16, $17, $18, $19, $20, $21)
             ON CONFLICT (series_id, started_at) DO NOTHING
             RETURNING id",
        )?;
        let add_counter =
            tx.prepare("INSERT INTO server_counters (entry_id, name, value) VALUES ($1, $2, $3)")?;
        let mut recorded = Recorded::default();
        for e in entries {
            let id = e.series.id();
            let text = e.series.text();
            let key_json = serde_json::to_string(&e.series).expect("a key serializes");
            let new_series = tx.execute(
                &add_series,
                &[&id, &text, &key_json, &e.series.workload, &e.series.target],
            )? == 1;
            if new_series {
                for (name, value) in &e.series.labels {
                    tx.execute(&add_label, &[&id, name, value])?;
                }
            } else {
                let stored: String = tx.query_one(&stored_key, &[&id])?.get(0);
                if stored != text {
                    return Err(Error::Collision { id, stored, text });
                }
            }
            let m = &e.metrics;
            let at = epoch_us(&e.started_at)?;
            let row = tx.query_opt(
                &add_entry,
                &[
                    &id,
                    &e.started_at,
                    &at,
                    &e.host,
                    &e.commit,
                    &e.file,
                    &e.flags.partial,
                    &e.flags.verification_failed,
                    &e.flags.rate_not_reached,
                    &e.flags.client_saturated,
                    &m.throughput,
                    &m.throughput_unit.as_str(),
                    &m.p50_ms,
                    &m.p90_ms,
                    &m.p99_ms,
                    &m.p999_ms,
                    &m.error_rate,
                    &m.client_cpu_us_per_op,
                    &e.histogram.encoding,
                    &e.histogram.unit,
                    &e.histogram.response,
                ],
            )?;
            match row {
                Some(row) => {
                    let entry_id: i64 = row.get(0);
                    for (name, value) in &m.server {
                        tx.execute(&add_counter, &[&entry_id, name, value])?;
                    }
                    recorded.added += 1;
                }
                None => recorded.already += 1,
            }
        }
        tx.commit()?;
        Ok(recorded)
    }

    fn series(&mut self, filter: &SeriesFilter) -> Result<Vec<SeriesInfo>, Error> {
        let mut sql = String::from(
            "SELECT s.id, s.key_json, s.key_text,
                (SELECT COUNT(*) FROM entries e WHERE e.series_id = s.id),
                (SELECT started_at FROM entries e WHERE e.series_id = s.id
                    ORDER BY started_at_us, id LIMIT 1),
                (SELECT started_at FROM entries e WHERE e.series_id = s.id
                    ORDER BY started_at_us DESC, id DESC LIMIT 1)
             FROM series s
             WHERE ($1::text IS NULL OR s.workload = $1)
               AND ($2::text IS NULL OR strpos(s.target, $2) > 0)",
        );
        let mut args: Vec<Option<String>> =
            vec![filter.workload.clone(), filter.target_contains.clone()];
        for (name, value) in &filter.labels {
            let n = args.len();
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM series_labels l WHERE l.series_id = s.id
                     AND l.name = ${} AND l.value = ${})",
                n + 1,
                n + 2
            ));
            args.push(Some(name.clone()));
            args.push(Some(value.clone()));
        }
        sql.push_str(" ORDER BY s.workload, s.key_text");
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
            .iter()
            .map(|a| a as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let mut out = Vec::new();
        for row in self.client.query(sql.as_str(), &params)? {
            let id: String = row.get(0);
            let key_json: String = row.get(1);
            let runs: i64 = row.get(3);
            out.push(SeriesInfo {
                key: parse_key(&id, &key_json)?,
                id,
                text: row.get(2),
                runs: runs.max(0) as u64,
                first_started_at: row.get::<_, Option<String>>(4).unwrap_or_default(),
                last_started_at: row.get::<_, Option<String>>(5).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    fn entries(&mut self, series_id: &str) -> Result<Vec<Entry>, Error> {
        let mut tx = self.client.build_transaction().read_only(true).start()?;
        let Some(row) = tx.query_opt("SELECT key_json FROM series WHERE id = $1", &[&series_id])?
        else {
            return Ok(Vec::new());
        };
        let key = parse_key(series_id, row.get(0))?;
        let mut counters: HashMap<i64, BTreeMap<String, f64>> = HashMap::new();
        for row in tx.query(
            "SELECT c.entry_id, c.name, c.value FROM server_counters c
             JOIN entries e ON e.id = c.entry_id WHERE e.series_id = $1",
            &[&series_id],
        )? {
            counters
                .entry(row.get(0))
                .or_default()
                .insert(row.get(1), row.get(2));
        }
        let rows = tx.query(
            "SELECT id, started_at, host, commit_id, file, partial, verification_failed,
                 rate_not_reached, client_saturated, throughput, throughput_unit, p50_ms,
                 p90_ms, p99_ms, p999_ms, error_rate, client_cpu_us_per_op,
                 histogram_encoding, histogram_unit, histogram
             FROM entries WHERE series_id = $1 ORDER BY started_at_us, id",
            &[&series_id],
        )?;
        tx.commit()?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let id: i64 = r.get(0);
            let unit: String = r.get(10);
            let throughput_unit = ThroughputUnit::parse(&unit)
                .ok_or_else(|| Error::Corrupt(format!("entry {id}: throughput unit '{unit}'")))?;
            out.push(Entry {
                series: key.clone(),
                started_at: r.get(1),
                host: r.get(2),
                commit: r.get(3),
                file: r.get(4),
                flags: Flags {
                    partial: r.get(5),
                    verification_failed: r.get(6),
                    rate_not_reached: r.get(7),
                    client_saturated: r.get(8),
                },
                metrics: Metrics {
                    throughput: r.get(9),
                    throughput_unit,
                    p50_ms: r.get(11),
                    p90_ms: r.get(12),
                    p99_ms: r.get(13),
                    p999_ms: r.get(14),
                    error_rate: r.get(15),
                    client_cpu_us_per_op: r.get(16),
                    server: counters.remove(&id).unwrap_or_default(),
                },
                histogram: Histogram {
                    encoding: r.get(17),
                    unit: r.get(18),
                    response: r.get(19),
                },
            });
        }
        Ok(out)
    }

    fn schema_version(&mut self) -> Result<u32, Error> {
        let v: i32 = self
            .client
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?
            .get(0);
        Ok(v as u32)
    }
}
