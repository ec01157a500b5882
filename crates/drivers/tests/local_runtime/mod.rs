//! Runs a driver's futures as the engine does: the futures are not `Send`,
//! so on a current-thread runtime, inside a `LocalSet`.

use std::future::Future;

pub fn block_on<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}
