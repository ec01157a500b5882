//! Loading a data set and removing it: the marker key that records what
//! `prepare` loaded (and the id its values carry), and `cleanup`, which
//! deletes only keys whose values still carry it.

use std::rc::Rc;
use std::sync::Arc;

use loadcell_core::kv::{KvConn, KvReply};
use loadcell_core::{Driver, DriverError};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::kv::{flush_all, DataSize, LOAD_BATCH};
use crate::prepare::load::load_in_parallel;
use crate::prepare::marker::random_id;
use crate::prepare::{read_marker, PrepareObserver};
use crate::workload::Loading;

use super::*;

pub(super) async fn write_marker<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
    state: &str,
    id: &str,
) -> Result<(), DriverError> {
    let value = serde_json::to_vec(&set.recorded(state, Some(id))).expect("serializable");
    conn.queue_set(set.marker_key().as_bytes(), &value);
    flush_all(conn).await
}

/// The first key of a type that already exists, if any (GET for strings,
/// HGET of the first field for hashes).
pub(super) async fn first_existing<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
) -> Result<Option<String>, DriverError> {
    let mut key = Vec::new();
    for t in &set.types {
        t.key(&mut key, 0);
        match t.kind {
            KeyKind::String => conn.queue_get(&key),
            KeyKind::Hash => conn.queue_command(&[b"HGET", &key, t.fields[0].as_bytes()])?,
        }
    }
    let mut exists = None;
    let mut failure = None;
    conn.flush(&mut |at, reply| match reply {
        Ok(KvReply::Hit(_)) => {
            exists.get_or_insert(at.index);
        }
        Ok(_) => {}
        // A key of another type (WRONGTYPE) is there too.
        Err(e) if e.message.contains("WRONGTYPE") => {
            exists.get_or_insert(at.index);
        }
        Err(e) => {
            failure.get_or_insert(e);
        }
    })
    .await?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(exists.map(|i| {
        set.types[i].key(&mut key, 0);
        String::from_utf8_lossy(&key).into_owned()
    }))
}

/// Loads every key of the data set (pipelined, [`LOAD_BATCH`] keys a
/// batch) over the loading connections. Idempotent: a data set this
/// prepare completed is left alone, a partly loaded one is loaded again,
/// and keys loadcell did not write are never overwritten.
pub(super) async fn prepare<D>(
    driver: Arc<D>,
    set: Arc<DataSet>,
    loading: Loading,
    observer: Rc<dyn PrepareObserver>,
) -> Result<(), DriverError>
where
    D: Driver,
    D::Conn: KvConn,
{
    let Loading {
        connections,
        connect_timeout,
    } = loading;
    let (mut first, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
    let marker = set.marker_key();
    let cleanup_hint = format!(
        "run `loadcell cleanup kv --dataset {} --target …` first",
        set.path
    );
    let id = match read_marker::<Recorded, _>(&mut first, &marker).await? {
        Some(Ok(r)) if r.types == set.recorded(COMPLETE, None).types => {
            if r.state == COMPLETE {
                observer.message(&format!(
                    "Data set '{}' is already loaded ({}): nothing to do",
                    set.name,
                    set.describe_counts()
                ));
                return Ok(());
            }
            let Some(id) = r.id else {
                return Err(DriverError::fatal(format!(
                    "data set '{}' was partly loaded by an earlier loadcell, which did not tag \
                     its values: loadcell cannot tell its keys from ones another writer put \
                     there since, so it does not load over them. {}",
                    set.name,
                    delete_by_hand(&r, &marker)
                )));
            };
            observer.message(&format!(
                "Data set '{}' was partly loaded (interrupted): loading it again",
                set.name
            ));
            id
        }
        Some(Ok(_)) => {
            return Err(DriverError::fatal(format!(
                "data set '{}' was loaded here from a different definition than {}: {cleanup_hint} \
                 (cleanup deletes what was recorded in '{marker}')",
                set.name, set.path
            )))
        }
        Some(Err(e)) => {
            return Err(DriverError::fatal(format!(
                "key '{marker}' exists but was not written by loadcell ({e}): left as it is; \
                 rename the data set in {}",
                set.path
            )))
        }
        None => {
            if let Some(key) = first_existing(&mut first, &set).await? {
                return Err(DriverError::fatal(format!(
                    "key '{key}' already exists and was not loaded by loadcell: nothing was written; \
                     choose another key_prefix in {}",
                    set.path
                )));
            }
            // Record first, so an interrupted prepare can still be cleaned up.
            let id = random_id(ID_LEN);
            write_marker(&mut first, &set, LOADING, &id).await?;
            id
        }
    };
    observer.message(&format!(
        "Loading data set '{}' ({}; shares {}) with {}",
        set.name,
        set.describe_counts(),
        set.shares(),
        loadcell_core::words::counted(connections as u64, "connection")
    ));
    observer.add_total(set.keys);
    let loader = Arc::clone(&set);
    let block_id: Arc<[u8]> = Arc::from(id.as_bytes());
    load_in_parallel(
        driver,
        set.keys,
        connections,
        connect_timeout,
        observer,
        move |mut conn, c, _, range, observer| {
            let set = Arc::clone(&loader);
            let block_id = Arc::clone(&block_id);
            async move {
                let mut rng = SmallRng::seed_from_u64(c as u64);
                let data = value_block(&set, &mut rng, &block_id);
                let mut key = Vec::with_capacity(MAX_KEY_LEN);
                // Items are the types' records laid end to end.
                let (mut t, mut base) = (0, 0);
                let mut p = range.start;
                while p < range.end {
                    let end = (p + LOAD_BATCH).min(range.end);
                    for q in p..end {
                        while q >= base + set.types[t].count {
                            base += set.types[t].count;
                            t += 1;
                        }
                        let kt = &set.types[t];
                        kt.key(&mut key, q - base);
                        queue_write(&mut conn, kt, &key, &data, &mut rng, 0..kt.fields.len())?;
                    }
                    flush_all(&mut conn).await?;
                    observer.loaded(end - p);
                    p = end;
                }
                Ok(())
            }
        },
    )
    .await?;
    write_marker(&mut first, &set, COMPLETE, &id).await
}

/// What to tell a user whose data set an earlier loadcell loaded: which
/// keys to delete by hand, if they are loadcell's.
pub(super) fn delete_by_hand(r: &Recorded, marker: &str) -> String {
    let prefixes: Vec<String> = r
        .types
        .iter()
        .map(|t| format!("{} keys named '{}' and a number", t.count, t.prefix))
        .collect();
    format!(
        "If they are loadcell's, delete by hand the {} and the key '{marker}'",
        prefixes.join(", the ")
    )
}

/// What cleanup found at a key it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Gone already (deleted, evicted, expired).
    Absent,
    /// A value carrying the data set's id: loadcell wrote it.
    Ours,
    /// Someone else's: a value without the id, or a key of another type.
    Theirs,
}

/// Deletes the keys `prepare` recorded in the data set's marker whose
/// values still carry the marker's id, then the marker; nothing else.
/// Each key's value is read right before its deletion (a batch's reads,
/// then its deletes); a key another writer has written since under the
/// same name is left, and so named. Returns the number of keys deleted.
pub(super) async fn cleanup<C: KvConn>(
    conn: &mut C,
    set: &DataSet,
    observer: &dyn PrepareObserver,
) -> Result<u64, DriverError> {
    let marker = set.marker_key();
    let recorded = match read_marker::<Recorded, _>(conn, &marker).await? {
        None => {
            observer.message(&format!(
                "Nothing to clean up: data set '{}' was not loaded by loadcell here",
                set.name
            ));
            return Ok(0);
        }
        Some(Err(e)) => {
            return Err(DriverError::fatal(format!(
                "key '{marker}' was not written by loadcell ({e}): nothing deleted"
            )))
        }
        Some(Ok(r)) => r,
    };
    let Some(id) = recorded.id.clone() else {
        return Err(DriverError::fatal(format!(
            "data set '{}' was loaded by an earlier loadcell, which did not tag the values it \
             wrote: loadcell cannot tell its keys from ones another writer has put under the \
             same names since, so nothing was deleted. {}",
            set.name,
            delete_by_hand(&recorded, &marker)
        )));
    };
    let total: u64 = recorded.types.iter().map(|t| t.count).sum();
    observer.message(&format!(
        "Deleting the {} of data set '{}' that loadcell loaded...",
        loadcell_core::words::counted(total, "key"),
        set.name
    ));
    observer.add_total(total);
    let (mut deleted, mut theirs, mut absent) = (0u64, 0u64, 0u64);
    let mut key = Vec::with_capacity(MAX_KEY_LEN);
    let mut found = Vec::new();
    for r in &recorded.types {
        // Rebuild the keys from what was recorded, not from the file.
        let t = KeyType {
            name: r.name.clone(),
            kind: r.kind,
            share: 0,
            prefix: r.prefix.clone(),
            key_length: r.key_length,
            count: r.count,
            hot: r.count,
            value: DataSize::Fixed(1),
            fields: Vec::new(),
        };
        // A hash is read field by field: a run's write may have created
        // it again with one field, and another writer's field in it makes
        // it theirs.
        let reads = match r.kind {
            KeyKind::String => 1,
            KeyKind::Hash => r.fields.len().max(1),
        };
        let batch = (10 * LOAD_BATCH / reads as u64).max(1);
        let mut n = 0;
        while n < t.count {
            let end = (n + batch).min(t.count);
            for k in n..end {
                t.key(&mut key, k);
                match t.kind {
                    KeyKind::String => conn.queue_get(&key),
                    KeyKind::Hash => {
                        for f in &r.fields {
                            conn.queue_command(&[b"HGET", &key, f.as_bytes()])?;
                        }
                    }
                }
            }
            found.clear();
            found.resize((end - n) as usize, Found::Absent);
            let mut failure = None;
            conn.flush(&mut |at, reply| {
                let f = &mut found[at.index / reads];
                match reply {
                    Ok(KvReply::Hit(value)) if carries_id(value, id.as_bytes()) => {
                        if *f == Found::Absent {
                            *f = Found::Ours;
                        }
                    }
                    Ok(KvReply::Hit(_)) => *f = Found::Theirs,
                    Ok(_) => {}
                    // Another writer made it a key of another type.
                    Err(e)
                        if e.code.as_deref() == Some("WRONGTYPE")
                            || e.message.contains("WRONGTYPE") =>
                    {
                        *f = Found::Theirs
                    }
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            })
            .await?;
            if let Some(e) = failure {
                return Err(e);
            }
            for (k, f) in (n..end).zip(&found) {
                match f {
                    Found::Ours => {
                        t.key(&mut key, k);
                        conn.queue_delete(&key);
                        deleted += 1;
                    }
                    Found::Theirs => theirs += 1,
                    Found::Absent => absent += 1,
                }
            }
            flush_all(conn).await?;
            observer.loaded(end - n);
            n = end;
        }
    }
    // The marker last, and only if it is still the one read above.
    match read_marker::<Recorded, _>(conn, &marker).await? {
        Some(Ok(now)) if now.id.as_deref() == Some(id.as_str()) => {
            conn.queue_delete(marker.as_bytes());
            flush_all(conn).await?;
        }
        _ => observer.message(&format!(
            "Leaving key '{marker}': it was written again while cleanup ran"
        )),
    }
    let gone = if absent > 0 {
        format!(" ({absent} of the {total} loadcell loaded were gone already)")
    } else {
        String::new()
    };
    observer.message(&format!(
        "Deleted the {} of data set '{}'{gone}",
        loadcell_core::words::counted(deleted, "key"),
        set.name
    ));
    if theirs > 0 {
        observer.message(&format!(
            "Left {} of data set '{}' in place: not loadcell's. Their values do not \
             carry the id loadcell's prepare wrote them with: another writer wrote them since",
            loadcell_core::words::counted(theirs, "key"),
            set.name
        ));
    }
    Ok(deleted)
}
