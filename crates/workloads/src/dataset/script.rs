//! The access phase: sessions reading and writing a data set's keys by
//! type, share and hot set, and the check before a run that its prepare
//! completed here.

use std::sync::{Arc, OnceLock};

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::Rng;

use crate::kv::KvOptions;
use crate::prepare::NotPrepared;
use crate::prepare::{read_marker, CheckError};

use super::*;

/// The access phase on a data set. Op kinds are `<type>_read` and
/// `<type>_write` for each type, in the file's order.
pub struct DataSetKv {
    set: Arc<DataSet>,
    opts: KvOptions,
    ops: Vec<OpSpec>,
    total_share: u32,
    /// The id in the marker, read when the first session opens: the
    /// run's writes carry it too, so cleanup knows them for loadcell's.
    id: OnceLock<Vec<u8>>,
}

pub struct DataSetSession {
    rng: SmallRng,
    cycle: u64,
    key: Vec<u8>,
    data: Vec<u8>,
    /// Per request in the batch: its op kind.
    kinds: Vec<usize>,
}

impl DataSetKv {
    /// `opts` gives the SET:GET ratio, pipeline depth and seeding.
    pub fn new(set: Arc<DataSet>, opts: KvOptions) -> DataSetKv {
        let mut ops = Vec::new();
        for t in &set.types {
            for (suffix, category) in [("read", Category::Read), ("write", Category::Write)] {
                // Operation names live as long as the run.
                let name: &'static str = Box::leak(format!("{}_{suffix}", t.name).into_boxed_str());
                ops.push(OpSpec { name, category });
            }
        }
        let total_share = set.types.iter().map(|t| t.share).sum();
        DataSetKv {
            set,
            opts,
            ops,
            total_share,
            id: OnceLock::new(),
        }
    }

    /// The id the data set's values carry (empty if its marker has none).
    async fn id<C: KvConn>(&self, conn: &mut C) -> Result<&[u8], DriverError> {
        if let Some(id) = self.id.get() {
            return Ok(id);
        }
        let id = match read_marker::<Recorded, _>(conn, &self.set.marker_key()).await? {
            Some(Ok(Recorded { id: Some(id), .. })) => id.into_bytes(),
            _ => Vec::new(),
        };
        Ok(self.id.get_or_init(|| id))
    }

    /// A type by share, and a record of it: from the hot set with
    /// probability `hot_access`, otherwise from the rest.
    pub(super) fn pick(&self, rng: &mut SmallRng) -> (usize, u64) {
        let mut r = rng.random_range(0..self.total_share);
        let i = self
            .set
            .types
            .iter()
            .position(|t| {
                let hit = r < t.share;
                r = r.saturating_sub(t.share);
                hit
            })
            .expect("r is below the total share");
        let t = &self.set.types[i];
        let n = if t.hot == t.count || rng.random::<f64>() < self.set.hot_access {
            rng.random_range(0..t.hot)
        } else {
            rng.random_range(t.hot..t.count)
        };
        (i, n)
    }
}

impl<C: KvConn> Script<C> for DataSetKv {
    type Session = DataSetSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<DataSetSession, DriverError> {
        let id = self.id(conn).await?;
        let mut rng = self.opts.session_rng(&info);
        let data = value_block(&self.set, &mut rng, id);
        Ok(DataSetSession {
            rng,
            cycle: 0,
            key: Vec::with_capacity(MAX_KEY_LEN),
            data,
            kinds: Vec::with_capacity(self.opts.pipeline),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut DataSetSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let ratio_total = (self.opts.ratio_set + self.opts.ratio_get) as u64;
        s.kinds.clear();
        for _ in 0..self.opts.pipeline {
            // memtier's interleaving: the first `ratio_set` of each cycle write.
            let write = s.cycle % ratio_total < self.opts.ratio_set as u64;
            s.cycle += 1;
            let (i, n) = self.pick(&mut s.rng);
            let t = &self.set.types[i];
            t.key(&mut s.key, n);
            match (t.kind, write) {
                (KeyKind::String, false) => conn.queue_get(&s.key),
                (KeyKind::Hash, false) => {
                    let f = s.rng.random_range(0..t.fields.len());
                    conn.queue_command(&[b"HGET", &s.key, t.fields[f].as_bytes()])?;
                }
                (_, true) => {
                    let f = s.rng.random_range(0..t.fields.len().max(1));
                    queue_write(conn, t, &s.key, &s.data, &mut s.rng, f..f + 1)?;
                }
            }
            s.kinds.push(2 * i + write as usize);
        }
        let clock = ctx.batch_clock();
        let mut failure = None;
        let kinds = &s.kinds;
        conn.flush(&mut |at, reply| {
            let kind = kinds[at.index];
            // Even kinds are reads (`<type>_read`), odd ones writes.
            let read = kind.is_multiple_of(2);
            ctx.record_reply(&clock, at.read, kind, reply.is_ok());
            match reply {
                Ok(KvReply::Hit(_)) if read => ctx.count_read(true),
                Ok(KvReply::Miss) if read => ctx.count_read(false),
                Ok(_) => {}
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        })
        .await?;
        failure.map_or(Ok(()), Err)
    }
}

impl DataSetKv {
    /// Before a run: the marker must say that a prepare of this very data
    /// set completed here (a run over keys that are not there would count
    /// nothing but misses).
    pub async fn check<C: KvConn>(&self, conn: &mut C) -> Result<(), CheckError> {
        let set = &self.set;
        let marker = set.marker_key();
        let fatal = |message: String| Err(CheckError::Driver(DriverError::fatal(message)));
        match read_marker::<Recorded, _>(conn, &marker).await? {
            Some(Ok(r)) if r.types == set.recorded(COMPLETE, None).types => match r.state.as_str() {
                COMPLETE => Ok(()),
                _ => Err(CheckError::NotPrepared(NotPrepared(format!(
                    "data set '{}' was only partly loaded (its prepare was interrupted)",
                    set.name
                )))),
            },
            Some(Ok(_)) => fatal(format!(
                "data set '{}' was loaded here from a different definition than {}: run \
                 `loadcell cleanup kv --dataset {} --target …`, then prepare it again",
                set.name, set.path, set.path
            )),
            Some(Err(e)) => fatal(format!(
                "key '{marker}' exists but was not written by loadcell ({e}): rename the data set in {}",
                set.path
            )),
            None => Err(CheckError::NotPrepared(NotPrepared(format!(
                "data set '{}' is not loaded (no key '{marker}')",
                set.name
            )))),
        }
    }
}
