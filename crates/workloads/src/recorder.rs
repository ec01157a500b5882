//! A key-value connection for unit tests: it records what a workload
//! queues and answers nothing.

use loadcell_core::kv::{KvConn, OnReply};
use loadcell_core::DriverError;

#[derive(Default)]
pub(crate) struct Recorder {
    /// Every request queued, as its arguments (GET key, SET key value, ...).
    pub queued: Vec<Vec<Vec<u8>>>,
}

impl Recorder {
    /// The requests as text, a SET's value shown by its length ("100 bytes").
    pub fn sent(&self) -> Vec<Vec<String>> {
        self.queued
            .iter()
            .map(|args| {
                args.iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == 2 && args[0] == b"SET" {
                            format!("{} bytes", a.len())
                        } else {
                            String::from_utf8_lossy(a).into_owned()
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

impl KvConn for Recorder {
    fn queue_get(&mut self, key: &[u8]) {
        self.queued.push(vec![b"GET".to_vec(), key.to_vec()]);
    }

    fn queue_set(&mut self, key: &[u8], value: &[u8]) {
        self.queued
            .push(vec![b"SET".to_vec(), key.to_vec(), value.to_vec()]);
    }

    fn queue_delete(&mut self, key: &[u8]) {
        self.queued.push(vec![b"DEL".to_vec(), key.to_vec()]);
    }

    fn queue_command(&mut self, args: &[&[u8]]) -> Result<(), DriverError> {
        self.queued.push(args.iter().map(|a| a.to_vec()).collect());
        Ok(())
    }

    async fn flush(&mut self, _: &mut OnReply<'_>) -> Result<(), DriverError> {
        Ok(())
    }
}
