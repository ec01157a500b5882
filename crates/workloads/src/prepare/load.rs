//! Loading a data set over several connections at once: the part every
//! workload's `prepare` shares.

use std::future::Future;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use loadcell_core::{Driver, DriverError};

use crate::prepare::PrepareObserver;

/// Splits items `0..total` into one contiguous range per connection and
/// runs `load(conn, index, connections, range, observer)` for each on its
/// own new connection, concurrently on this thread. Returns the first
/// error in connection order; the loads still running are then dropped.
pub(crate) async fn load_in_parallel<D, F, Fut>(
    driver: Arc<D>,
    total: u64,
    connections: usize,
    connect_timeout: Duration,
    observer: Rc<dyn PrepareObserver>,
    load: F,
) -> Result<(), DriverError>
where
    D: Driver,
    F: Fn(D::Conn, usize, usize, Range<u64>, Rc<dyn PrepareObserver>) -> Fut + Clone + 'static,
    Fut: Future<Output = Result<(), DriverError>> + 'static,
{
    let local = tokio::task::LocalSet::new();
    let mut tasks = Vec::new();
    let n = connections as u64;
    for c in 0..n {
        let range = total * c / n..total * (c + 1) / n;
        if range.is_empty() {
            continue;
        }
        let (driver, observer, load) = (Arc::clone(&driver), Rc::clone(&observer), load.clone());
        tasks.push(local.spawn_local(async move {
            let (conn, _) = loadcell_engine::connect_once(&*driver, connect_timeout).await?;
            load(conn, c as usize, connections, range, observer).await
        }));
    }
    local
        .run_until(async {
            for task in tasks {
                task.await.unwrap_or_else(|e| {
                    Err(DriverError::fatal(format!("load task failed: {e}")))
                })?;
            }
            Ok(())
        })
        .await
}
