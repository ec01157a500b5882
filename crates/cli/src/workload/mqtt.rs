//! The MQTT workloads' options (`mqtt-pubsub`, `mqtt-conns`), with
//! emqtt-bench's names where they fit, and what they make of the run:
//! publishers at `--rate` and closed-loop subscribers as two session
//! groups; or held connections on a ramp. The drain after the run and
//! the poll sizes are the stream workload's options (`--drain-timeout`,
//! `--poll-max`, `--poll-wait`), the held connections the HTTP connection
//! workloads' (`--connections`, `--ramp-rate`, `--keepalive-interval`).

use std::time::Duration;

use clap::Args;
use loadcell_core::mqtt::{QoS, FAMILY};
use loadcell_core::Target;
use loadcell_drivers::OpenError;
use loadcell_engine::{ConnectionPolicy, Hold, SessionGroup, SessionGroups};
use loadcell_workloads::mqtt::{
    MqttConns, MqttOptions, MqttPubSub, PUBLISHER_GROUP, SUBSCRIBER_GROUP,
};
use loadcell_workloads::workload::Workload;

use super::http_conns::{check_fd_limit, raise_fd_limit, HttpConnsArgs};
use super::stream::StreamArgs;
use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};
use crate::launch::{Job, Launch};

/// The engine's own wait for sessions after the run, beyond the
/// subscribers' drain: their DISCONNECT and last acknowledgements.
const DRAIN_SLACK: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "MQTT workload options (mqtt-pubsub, mqtt-conns)")]
pub struct MqttArgs {
    /// mqtt-pubsub: the topic each publisher publishes to; %i is its number (default loadcell/%i).
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// mqtt-pubsub: bytes of each message, at least 30 (its stamp) (default 256).
    #[arg(long, value_name = "BYTES")]
    pub payload_size: Option<usize>,
    /// mqtt-pubsub: quality of service of publishes and subscriptions: 0, 1 or 2 (default 1).
    #[arg(long, value_name = "0|1|2")]
    pub qos: Option<u8>,
    /// mqtt-pubsub: publish with the retain flag.
    #[arg(long)]
    pub retain: bool,
    /// mqtt-pubsub: publisher sessions (connections), --rate messages per second among them (default 1).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize)]
    pub publishers: Option<usize>,
    /// mqtt-pubsub: subscriber sessions (connections); 0 publishes only (default 1).
    #[arg(long, value_name = "N")]
    pub subscribers: Option<usize>,
    /// mqtt-pubsub: the subscribers' topic filter (default: --topic with %i as +).
    #[arg(long, value_name = "FILTER")]
    pub sub_topic: Option<String>,
    /// mqtt-pubsub: the subscribers form this shared subscription group ($share/GROUP/FILTER): each message reaches one of them.
    #[arg(long, value_name = "GROUP")]
    pub shared: Option<String>,
    /// mqtt-pubsub: command fan-out: %i in --topic is a subscriber's number, each subscriber subscribes to its own topic, and each message goes to one of them in turn.
    #[arg(long)]
    pub fanout: bool,
    /// mqtt-pubsub: clean, or persistent: subscribers keep their sessions (and their queues) while away (default clean).
    #[arg(long, value_name = "clean|persistent")]
    pub session: Option<String>,
    /// mqtt-pubsub: AT:FOR, e.g. 2s:1s: each subscriber goes offline AT into the run and comes back FOR later.
    #[arg(long, value_name = "AT:FOR", value_parser = outage)]
    pub subscriber_outage: Option<(Duration, Duration)>,
    /// mqtt-conns: this long into the run every held connection drops and connects again under its client id (at its next ping): how long the fleet takes to be back.
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration)]
    pub reconnect_storm: Option<Duration>,
}

/// `mqtt-pubsub` or `mqtt-conns`.
#[derive(Debug, Clone)]
pub enum MqttSpec {
    PubSub(MqttPubSub),
    Conns(MqttConns),
}

/// The one MQTT option of `mqtt-conns`.
const STORM: &str = "--reconnect-storm";

/// The stream workload's options `mqtt-pubsub` takes.
const FROM_STREAM: &[&str] = &["--drain-timeout", "--poll-max", "--poll-wait"];
/// The HTTP connection workloads' options `mqtt-conns` takes.
const FROM_HTTP_CONNS: &[&str] = &["--connections", "--ramp-rate", "--keepalive-interval"];

impl CliFamily for MqttArgs {
    const WHAT: &'static str = "an MQTT workload option";
    type Spec = MqttSpec;

    fn catalog() -> Vec<Entry> {
        vec![
            (
                "mqtt-pubsub",
                &[FAMILY],
                "telemetry fan-in: --publishers publish to --topic (%i: the publisher) at --rate in all, --subscribers receive through --sub-topic (alone or --shared); command fan-out with --fanout (%i: the subscriber, each message to one); publish latency to PUBACK/PUBCOMP, end to end, and every message each subscriber was owed against what it received",
            ),
            (
                "mqtt-conns",
                &[FAMILY],
                "the fleet at rest and the connection storm: --connections opened at --ramp-rate and held with a PINGREQ every --keepalive-interval; connects/s, connections held, and when and at what count the broker refused",
            ),
        ]
    }

    fn takes_also() -> &'static [&'static str] {
        &[
            <StreamArgs as CliFamily>::WHAT,
            <HttpConnsArgs as CliFamily>::WHAT,
        ]
    }

    fn resolve(name: &str, all: &WorkloadArgs, given: &[String]) -> Result<MqttSpec, String> {
        let (takes, other) = if name == "mqtt-pubsub" {
            (FROM_STREAM, FROM_HTTP_CONNS)
        } else {
            (FROM_HTTP_CONNS, FROM_STREAM)
        };
        if let Some(flag) = all
            .given_by_family()
            .into_iter()
            .filter(|(what, _)| Self::takes_also().contains(what))
            .flat_map(|(_, flags)| flags)
            .find(|flag| !takes.contains(&flag.as_str()))
        {
            let hint = if other.contains(&flag.as_str()) {
                format!(" (it is {}'s)", other_workload(name))
            } else {
                String::new()
            };
            return Err(format!(
                "{flag} is not an option of workload {name}{hint} (see `loadcell run --help`)"
            ));
        }
        if name == "mqtt-conns" {
            if let Some(flag) = given.iter().find(|f| *f != STORM) {
                return Err(format!(
                    "{flag} is mqtt-pubsub's; mqtt-conns holds connections (--connections, \
                     --ramp-rate, --keepalive-interval)"
                ));
            }
            let a = &all.http_conns;
            return Ok(MqttSpec::Conns(MqttConns {
                connections: a.connections.unwrap_or(1000),
                ramp_rate: a.ramp_rate.unwrap_or(1000.0),
                keepalive: a.keepalive_interval.unwrap_or(Duration::from_secs(1)),
                storm_at: all.mqtt.reconnect_storm,
            }));
        }
        if given.iter().any(|f| f == STORM) {
            return Err(format!(
                "{STORM} is mqtt-conns's: it drops and reconnects held connections"
            ));
        }
        let a = &all.mqtt;
        let s = &all.stream;
        let qos = match a.qos {
            None => QoS::AtLeastOnce,
            Some(level) => QoS::from_level(level)
                .ok_or_else(|| format!("--qos {level}: MQTT has QoS 0, 1 and 2"))?,
        };
        let opts = MqttOptions {
            topic: a.topic.clone().unwrap_or_else(|| "loadcell/%i".to_string()),
            payload_size: a.payload_size.unwrap_or(256),
            qos,
            retain: a.retain,
            publishers: a.publishers.unwrap_or(1),
            subscribers: a.subscribers.unwrap_or(1),
            sub_topic: a.sub_topic.clone(),
            shared: a.shared.clone(),
            poll_max: s.poll_max,
            poll_wait: s.poll_wait,
            drain_timeout: s.drain_timeout,
            persistent: match a.session.as_deref() {
                None | Some("clean") => false,
                Some("persistent") => true,
                Some(other) => {
                    return Err(format!(
                        "--session {other}: use clean (the default) or persistent"
                    ))
                }
            },
            outage: a.subscriber_outage,
            fanout: a.fanout,
        };
        opts.check()?;
        if opts.outage.is_some() && opts.subscribers == 0 {
            return Err("--subscriber-outage takes subscribers offline: give --subscribers".to_string());
        }
        if opts.shared.is_some() && opts.subscribers == 0 {
            return Err("--shared makes the subscribers one group: give --subscribers".to_string());
        }
        Ok(MqttSpec::PubSub(MqttPubSub { opts }))
    }
}

/// `AT:FOR`: when an outage begins, and how long it lasts.
fn outage(text: &str) -> Result<(Duration, Duration), String> {
    let bad = || format!("'{text}' is not AT:FOR, e.g. 2s:1s (offline 2s into the run, for 1s)");
    let (at, length) = text.split_once(':').ok_or_else(bad)?;
    let at = humantime::parse_duration(at.trim()).map_err(|_| bad())?;
    let length = humantime::parse_duration(length.trim()).map_err(|_| bad())?;
    if length.is_zero() {
        return Err(bad());
    }
    Ok((at, length))
}

fn other_workload(name: &str) -> &'static str {
    if name == "mqtt-pubsub" {
        "mqtt-conns"
    } else {
        "mqtt-pubsub"
    }
}

impl FamilySpec for MqttSpec {
    fn workload(&self) -> &dyn Workload {
        match self {
            MqttSpec::PubSub(w) => w,
            MqttSpec::Conns(w) => w,
        }
    }

    /// Publishers are the `threads × clients` sessions at `--rate`;
    /// subscribers wait up to `--drain-timeout` after the run for what
    /// they are owed. Held connections are one session each.
    fn fit_run(&mut self, run: &mut RunShape) -> Result<(), String> {
        let name = self.workload().name();
        if run.threads * run.clients != 1 {
            let sessions = match self {
                MqttSpec::PubSub(_) => "--publishers and --subscribers",
                MqttSpec::Conns(_) => "--connections",
            };
            return Err(format!(
                "{name} runs {sessions} sessions: leave out --threads and --clients"
            ));
        }
        if run.connection_policy != ConnectionPolicy::Persistent {
            return Err(format!(
                "{name} keeps one connection per session; leave out --connection-policy"
            ));
        }
        match self {
            MqttSpec::PubSub(w) => {
                let o = &w.opts;
                check_fd_limit(
                    o.publishers + o.subscribers,
                    &format!("--publishers {} and --subscribers {}", o.publishers, o.subscribers),
                    raise_fd_limit(),
                )?;
                run.threads = w.opts.publishers;
                run.drain_timeout = w.opts.drain_timeout + DRAIN_SLACK;
            }
            MqttSpec::Conns(w) => {
                if run.rate.is_some() {
                    return Err(
                        "--rate does not apply to mqtt-conns: each held connection pings every \
                         --keepalive-interval; leave --rate out"
                            .to_string(),
                    );
                }
                check_fd_limit(
                    w.connections,
                    &format!("--connections {}", w.connections),
                    raise_fd_limit(),
                )?;
                run.clients = w.connections;
            }
        }
        Ok(())
    }

    /// Publishers, then subscribers.
    fn groups(&self, _run: &RunShape) -> Option<SessionGroups> {
        match self {
            MqttSpec::PubSub(w) if w.opts.subscribers > 0 => Some(SessionGroups {
                first: PUBLISHER_GROUP,
                others: vec![SessionGroup {
                    name: SUBSCRIBER_GROUP,
                    sessions: w.opts.subscribers,
                    rate: None,
                }],
            }),
            _ => None,
        }
    }

    /// The held connections of `mqtt-conns`; a ping (or connect) not
    /// answered within the connect timeout fails as timed out.
    fn hold(&self, run: &RunShape) -> Option<Hold> {
        match self {
            MqttSpec::Conns(w) => Some(Hold {
                ramp_rate: w.ramp_rate,
                every: w.keepalive,
                timeout: run.connect_timeout,
            }),
            MqttSpec::PubSub(_) => None,
        }
    }
}

impl Launch for MqttSpec {
    fn launch<J: Job>(&self, target: &Target, job: J) -> Result<J::Output, OpenError> {
        match self {
            MqttSpec::PubSub(w) => w.launch(target, job),
            MqttSpec::Conns(w) => w.launch(target, job),
        }
    }

    #[cfg(test)]
    fn dispatched(&self) -> Vec<&'static str> {
        match self {
            MqttSpec::PubSub(w) => w.dispatched(),
            MqttSpec::Conns(w) => w.dispatched(),
        }
    }
}

crate::launch::runs_on!(MqttPubSub: mqtt);
crate::launch::runs_on!(MqttConns: mqtt);
