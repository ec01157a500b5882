//! A workload file's HTTP ops, sent as the `http` workload sends a
//! request file's requests, each op its own operation kind.

use loadcell_core::family::HttpFamily;
use loadcell_core::http::HttpConn;
use loadcell_core::{DriverError, DriverInfo};
use loadcell_engine::{Ctx, OpSpec, Script, SessionInfo};

use super::file::OpBody;
use super::{think, Ops, ScriptWorkload, Values};
use crate::http::{ExpectStatus, ScriptRequest};
use crate::workload::Lifecycle;

pub struct HttpScript {
    ops: Ops,
    /// Each op's request, encoded once.
    requests: Vec<ScriptRequest>,
    expect: ExpectStatus,
}

pub struct HttpSession {
    values: Values,
    path: Vec<u8>,
    body: Vec<u8>,
}

impl<C: HttpConn> Script<C> for HttpScript {
    type Session = HttpSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops.specs
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<HttpSession, DriverError> {
        Ok(HttpSession {
            values: Values::new(&self.ops.file, &session),
            path: Vec::with_capacity(256),
            body: Vec::with_capacity(256),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        s: &mut HttpSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let i = self.ops.pick(&mut s.values.rng);
        let request = &self.requests[i];
        s.values.draw(&request.params);
        let bufs = (&mut s.path, &mut s.body);
        request
            .send(conn, &s.values.texts, bufs, &self.expect, i, ctx)
            .await?;
        think(self.ops.file.ops[i].think).await;
        Ok(())
    }
}

impl<C: HttpConn> Lifecycle<C, HttpFamily> for ScriptWorkload {
    type Script = HttpScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> HttpScript {
        let requests = self
            .file
            .ops
            .iter()
            .map(|o| match &o.body {
                OpBody::Http(spec) => ScriptRequest::new(spec),
                _ => unreachable!("an HTTP file's ops are requests"),
            })
            .collect();
        HttpScript {
            ops: Ops::new(&self.file),
            requests,
            expect: ExpectStatus::default(),
        }
    }
}
