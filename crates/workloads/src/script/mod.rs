//! The `script` workload: the user's own operations, read from a TOML
//! file (see `file`), run by the same engine and recorded as the built-in
//! workloads are, each op its own operation kind. SQL and CQL ops run as
//! statements prepared once per connection; key-value ops as commands;
//! HTTP ops as the `http` workload sends its requests; search ops as the
//! `search-query` workload sends its queries. Parameters are drawn into
//! buffers a session reuses: an op allocates nothing.

mod cql;
mod file;
mod http;
mod kv;
mod search;
mod sql;

use std::collections::BTreeMap;
use std::time::Duration;

use loadcell_core::wide::NO_CQL;
use loadcell_core::{DriverError, DriverInfo, Family};
use loadcell_engine::{Category, OpSpec, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

pub use file::{
    Command, CommandKind, Index, Load, LoadBody, Op, OpBody, Prepare, ScriptFile, Statement,
};

use crate::http::Drawer;
use crate::prepare::PrepareObserver;
use crate::workload::Workload;

#[derive(Debug, Clone)]
pub struct ScriptWorkload {
    pub file: ScriptFile,
}

impl Workload for ScriptWorkload {
    fn name(&self) -> &'static str {
        "script"
    }

    fn families(&self) -> &'static [Family] {
        match self.file.family {
            Family::SQL => &[Family::SQL],
            Family::KV => &[Family::KV],
            Family::WIDE_COLUMN => &[Family::WIDE_COLUMN],
            Family::SEARCH => &[Family::SEARCH],
            _ => &[Family::HTTP],
        }
    }

    fn refuses(&self, driver: &DriverInfo) -> Option<String> {
        if self.file.family == Family::WIDE_COLUMN && !driver.schemes.contains(&"cql") {
            return Some(format!("{} runs no CQL: {NO_CQL}", driver.name));
        }
        let other = self.file.ops.iter().find_map(|o| match &o.body {
            OpBody::Kv(c) if c.kind == CommandKind::Other => Some(o.name),
            _ => None,
        })?;
        (!driver.kv.commands).then(|| {
            format!(
                "{} has GET, SET and DELETE only, and op '{other}' sends another command",
                driver.name
            )
        })
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let ops: Vec<Value> = self
            .file
            .ops
            .iter()
            .map(|o| {
                let what = match &o.body {
                    OpBody::Sql { statements, .. } => {
                        json!(statements.iter().map(|s| &s.source).collect::<Vec<_>>())
                    }
                    OpBody::Kv(c) => json!(c.source),
                    // Headers are left out: they may hold a secret.
                    OpBody::Http(r) => json!(format!("{} {}", r.method, r.path.source())),
                    OpBody::Cql(s) => json!(s.source),
                    OpBody::Search { index, body } => {
                        json!(format!("{index}/_search {}", body.source()))
                    }
                };
                json!({
                    "name": o.name,
                    "weight": o.weight,
                    "think_ms": o.think.as_secs_f64() * 1e3,
                    "run": what,
                })
            })
            .collect();
        BTreeMap::from([
            (
                "file".to_string(),
                json!(self.file.path.display().to_string()),
            ),
            ("ops".to_string(), json!(ops)),
            (
                "params".to_string(),
                json!(self.file.params.iter().map(|p| &p.name).collect::<Vec<_>>()),
            ),
        ])
    }
}

/// What every family's script shares: the ops as operation kinds, and
/// the weighted pick.
#[derive(Debug)]
struct Ops {
    specs: Vec<OpSpec>,
    /// Running sums of the ops' weights.
    cumulative: Vec<u32>,
    file: ScriptFile,
}

impl Ops {
    fn new(file: &ScriptFile) -> Ops {
        let specs = file
            .ops
            .iter()
            .map(|o| OpSpec {
                name: o.name,
                category: if o.reads() {
                    Category::Read
                } else {
                    Category::Write
                },
            })
            .collect();
        let cumulative = file
            .ops
            .iter()
            .scan(0, |sum, o| {
                *sum += o.weight;
                Some(*sum)
            })
            .collect();
        Ops {
            specs,
            cumulative,
            file: file.clone(),
        }
    }

    /// The index of this event's op, by weight.
    #[inline]
    fn pick(&self, rng: &mut SmallRng) -> usize {
        let sums = &self.cumulative;
        if sums.len() == 1 {
            return 0;
        }
        let x = rng.random_range(0..sums[sums.len() - 1]);
        sums.partition_point(|&s| s <= x)
    }
}

/// A session's generator and parameter values, reused op after op.
#[derive(Debug)]
struct Values {
    rng: SmallRng,
    drawers: Vec<Drawer>,
    /// Each parameter's current value as text.
    texts: Vec<Vec<u8>>,
    /// And as a number, when it is one.
    numbers: Vec<Option<i64>>,
}

impl Values {
    fn new(file: &ScriptFile, session: &SessionInfo) -> Values {
        Values::for_session(file, session.seed, session.index, session.count)
    }

    /// Session `index` of `count`'s values, its generator seeded by `seed`.
    fn for_session(file: &ScriptFile, seed: u64, index: usize, count: usize) -> Values {
        let params = &file.params;
        Values {
            rng: SmallRng::seed_from_u64(seed),
            drawers: params
                .iter()
                .map(|p| Drawer::new(p, index, count))
                .collect(),
            texts: params.iter().map(|_| Vec::with_capacity(64)).collect(),
            numbers: vec![None; params.len()],
        }
    }

    /// Draws the parameters `params` (indexes) anew.
    #[inline]
    fn draw(&mut self, params: &[usize]) {
        for &p in params {
            self.numbers[p] = self.drawers[p].draw_value(&mut self.rng, &mut self.texts[p]);
        }
    }

    /// Draws them as SQL binds them: a number's text is left unwritten.
    #[inline]
    fn draw_numbers(&mut self, params: &[usize]) {
        for &p in params {
            self.numbers[p] = self.drawers[p].draw_number(&mut self.rng, &mut self.texts[p]);
        }
    }
}

/// The pause after an op, when it has one.
#[inline]
async fn think(pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
}

/// Whether `prepare` creates a file's `total` tables, of which loadcell
/// created `ours` before (none being another tool's): all of them when
/// none exists; none, said, when all do; refused when only some do.
fn creates_tables(
    ours: usize,
    total: usize,
    observer: &dyn PrepareObserver,
) -> Result<bool, DriverError> {
    if ours == total {
        observer.message(
            "The file's tables exist, created by loadcell: nothing to do (cleanup, then prepare, to load them again)",
        );
        return Ok(false);
    }
    if ours > 0 {
        return Err(DriverError::fatal(
            "some of the file's tables exist and some do not (an interrupted prepare?): run cleanup, then prepare",
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
