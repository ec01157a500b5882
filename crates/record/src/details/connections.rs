//! The held-connections section (`http-conns`): how many connections the
//! target held, and where it stopped.

use serde::{Deserialize, Serialize};

use super::Detail;

/// The concurrent connections a target held, and where it stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldConnections {
    /// Connections the run asked to hold.
    pub requested: u64,
    /// The most held at once (answering their keep-alive requests).
    pub held_max: u64,
    pub held_at_end: u64,
    /// The first refusal, reset or timeout; absent when none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<FirstFailure>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FirstFailure {
    /// When the failed attempt began, in seconds from the start of
    /// measurement.
    pub t_s: f64,
    /// Connections held at that moment.
    pub held: u64,
    pub error: String,
    /// The client's own limit (ports, descriptors, memory), not the
    /// target's, stopped it: the run measured loadcell's host.
    pub client_limit: bool,
}

impl Detail for HeldConnections {
    const KEY: &'static str = "connections";
}
