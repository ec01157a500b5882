//! A member of a consumer group, in Kafka's classic group protocol, as
//! the native consumer ([`super::fetch`]) needs it: the coordinator found,
//! JoinGroup and SyncGroup with the `range` assignor (the leader assigns),
//! heartbeats, offsets fetched and committed, and LeaveGroup.
//!
//! The membership runs in a task of its own ([`Membership`]), as
//! librdkafka's runs on its own thread: a join waits until every member
//! has rejoined, and a session that waited for it inside a poll would keep
//! the others (often sessions polled by the same thread) from rejoining.
//! Rebalances are eager, as the librdkafka consumer's: when a heartbeat
//! finds the generation over, the task takes the partitions from the
//! session ([`Ownership`], under the lock the session hands rows over
//! with), commits their positions, and only then rejoins.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::{ParseResponseErrorCode, ResponseError};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::{
    BrokerId, ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, JoinGroupResponse,
    MetadataRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, Request, StrBytes};
use loadcell_core::DriverError;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::wire::{call_blocking, Cluster};
use super::ADMIN_TIMEOUT;

/// The API versions spoken, all within what Kafka 2.7 through 4.x serve.
pub(super) mod version {
    pub const METADATA: i16 = 9;
    pub const FIND_COORDINATOR: i16 = 3;
    pub const JOIN_GROUP: i16 = 5;
    pub const SYNC_GROUP: i16 = 3;
    pub const HEARTBEAT: i16 = 3;
    pub const LEAVE_GROUP: i16 = 3;
    pub const OFFSET_COMMIT: i16 = 7;
    pub const OFFSET_FETCH: i16 = 6;
    pub const LIST_OFFSETS: i16 = 5;
    pub const FETCH: i16 = 12;
    /// (API key, version) of each, to check against the broker's range.
    pub const ALL: [(i16, i16); 10] = [
        (3, METADATA),
        (10, FIND_COORDINATOR),
        (11, JOIN_GROUP),
        (14, SYNC_GROUP),
        (12, HEARTBEAT),
        (13, LEAVE_GROUP),
        (8, OFFSET_COMMIT),
        (9, OFFSET_FETCH),
        (2, LIST_OFFSETS),
        (1, FETCH),
    ];
}

/// ListOffsets' timestamp for a partition's first offset.
pub(super) const EARLIEST: i64 = -2;
const ASSIGNOR: &str = "range";
const PROTOCOL_TYPE: &str = "consumer";

/// The group's clocks: `session.timeout.ms`, `heartbeat.interval.ms` and
/// `max.poll.interval.ms` (how long the coordinator waits for members to
/// rejoin), as the target sets them or librdkafka's defaults.
#[derive(Clone, Copy, Debug)]
pub(super) struct GroupTiming {
    pub session: Duration,
    pub heartbeat: Duration,
    pub rebalance: Duration,
}

/// Who the member is now, shared with its heartbeat task.
#[derive(Clone)]
struct Identity {
    member_id: StrBytes,
    /// -1 outside a generation (before a join, or for assigned partitions).
    generation: i32,
    coordinator: Option<String>,
}

/// A partition the session reads.
pub(super) struct Owned {
    pub partition: i32,
    /// The offset of the next row to hand over.
    pub position: i64,
    /// What the group holds for it, as far as this member knows.
    pub committed: Option<i64>,
}

/// The partitions the session reads now, shared with the membership task.
#[derive(Default)]
pub(super) struct Ownership {
    /// Counts assignments (and revocations): the session sets fetching up
    /// again when it changes.
    pub epoch: u64,
    pub partitions: Vec<Owned>,
    /// The membership task is taking the partitions back: the session
    /// reads none of them, and their positions are being committed.
    pub revoked: bool,
    /// Why the membership task stopped, for the session to report.
    pub failure: Option<String>,
}

impl Ownership {
    /// The partitions the session reads: none while they are taken back.
    pub(super) fn read(&self) -> &[Owned] {
        if self.revoked {
            &[]
        } else {
            &self.partitions
        }
    }

    /// (partition, position) of each partition read past its commit.
    pub(super) fn uncommitted(&self) -> Vec<(i32, i64)> {
        self.partitions
            .iter()
            .filter(|o| o.committed != Some(o.position))
            .map(|o| (o.partition, o.position))
            .collect()
    }

    /// Notes `offsets` as committed.
    pub(super) fn committed(&mut self, offsets: &[(i32, i64)]) {
        for owned in &mut self.partitions {
            if let Some(&(_, at)) = offsets.iter().find(|(p, _)| *p == owned.partition) {
                owned.committed = Some(at);
            }
        }
    }
}

struct Shared {
    identity: Mutex<Identity>,
    ownership: Mutex<Ownership>,
    /// Told when the ownership changes, to wake a poll that waits for rows.
    changed: Notify,
}

impl Shared {
    fn identity(&self) -> Identity {
        self.identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, update: impl FnOnce(&mut Identity)) {
        update(&mut self.identity.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn ownership(&self) -> std::sync::MutexGuard<'_, Ownership> {
        self.ownership.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the ownership and wakes the session.
    fn change(&self, update: impl FnOnce(&mut Ownership)) {
        let mut ownership = self.ownership();
        update(&mut ownership);
        ownership.epoch += 1;
        drop(ownership);
        self.changed.notify_one();
    }
}

/// A group member, or (for [`loadcell_core::stream::Channels::Assigned`])
/// a consumer that only commits under the group's name. Shared by the
/// session and the membership task.
pub(super) struct Member {
    group: GroupId,
    topic: TopicName,
    timing: GroupTiming,
    /// Whether the member joins the group (else it reads the partitions
    /// it was given and commits outside any generation).
    joins: bool,
    shared: Shared,
}

/// The membership task of a session's member; ended when dropped.
pub(super) struct Membership {
    member: Arc<Member>,
    task: Option<JoinHandle<()>>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Membership {
    /// A member that joins the group, in a task that joins, heartbeats and
    /// rejoins over `cluster` until stopped.
    pub(super) fn join(member: Member, cluster: Cluster) -> Membership {
        let member = Arc::new(member);
        let task = tokio::spawn(take_part(member.clone(), cluster));
        Membership {
            member,
            task: Some(task),
        }
    }

    /// A member that reads `partitions` outside the group's generations.
    pub(super) async fn assign(
        member: Member,
        cluster: &mut Cluster,
        partitions: &[i32],
    ) -> Result<Membership, DriverError> {
        let owned = member.resolve(cluster, partitions).await?;
        member.shared.change(|o| o.partitions = owned);
        Ok(Membership {
            member: Arc::new(member),
            task: None,
        })
    }

    pub(super) fn member(&self) -> &Member {
        &self.member
    }

    /// Ends the task: no more heartbeats or joins.
    pub(super) fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The membership task: joins, takes what the group assigns, heartbeats,
/// and at the generation's end takes the partitions back from the
/// session, commits them and joins again.
async fn take_part(member: Arc<Member>, mut cluster: Cluster) {
    loop {
        let owned = match member.join(&mut cluster).await {
            Ok(partitions) => member.resolve(&mut cluster, &partitions).await,
            Err(e) => Err(e),
        };
        match owned {
            Ok(owned) => member.shared.change(|o| o.partitions = owned),
            Err(e) => return member.fail(e),
        }
        member.heartbeat_until_over(&mut cluster).await;
        // Kept until committed: a session that leaves meanwhile (and
        // stops this task) commits them itself.
        let mut offsets = Vec::new();
        member.shared.change(|o| {
            o.revoked = true;
            offsets = o.uncommitted();
        });
        if let Err(e) = member.commit(&mut cluster, &offsets).await {
            return member.fail(e);
        }
        member.shared.change(|o| {
            o.partitions.clear();
            o.revoked = false;
        });
    }
}

impl Member {
    pub(super) fn new(group: &str, topic: &str, timing: GroupTiming, joins: bool) -> Member {
        Member {
            group: GroupId(StrBytes::from_string(group.to_string())),
            topic: TopicName(StrBytes::from_string(topic.to_string())),
            timing,
            joins,
            shared: Shared {
                identity: Mutex::new(Identity {
                    member_id: StrBytes::default(),
                    generation: -1,
                    coordinator: None,
                }),
                ownership: Mutex::new(Ownership::default()),
                changed: Notify::new(),
            },
        }
    }

    pub(super) fn topic(&self) -> &TopicName {
        &self.topic
    }

    /// The partitions the session reads, under the lock that the
    /// membership task takes them back with.
    pub(super) fn ownership(&self) -> std::sync::MutexGuard<'_, Ownership> {
        self.shared.ownership()
    }

    /// Resolves when the ownership changes.
    pub(super) async fn changed(&self) {
        self.shared.changed.notified().await
    }

    fn fail(&self, e: DriverError) {
        self.shared.change(|o| {
            o.partitions.clear();
            o.failure = Some(e.to_string());
        });
    }

    /// Each of `partitions` with its position: the group's committed
    /// offset or, with none, the partition's first row.
    async fn resolve(
        &self,
        cluster: &mut Cluster,
        partitions: &[i32],
    ) -> Result<Vec<Owned>, DriverError> {
        let committed = self.committed(cluster, partitions).await?;
        let unread: Vec<i32> = partitions
            .iter()
            .zip(&committed)
            .filter(|(_, c)| c.is_none())
            .map(|(&p, _)| p)
            .collect();
        let starts = list_offsets(cluster, &self.topic, &unread, EARLIEST).await?;
        let start_of = |p: i32| unread.iter().position(|&u| u == p).map(|i| starts[i]);
        Ok(partitions
            .iter()
            .zip(committed)
            .map(|(&partition, committed)| Owned {
                partition,
                position: committed.or_else(|| start_of(partition)).unwrap_or(0),
                committed,
            })
            .collect())
    }

    /// Sends heartbeats until one finds the generation over (the group
    /// rebalances, or dropped this member).
    async fn heartbeat_until_over(&self, cluster: &mut Cluster) {
        loop {
            tokio::time::sleep(self.timing.heartbeat).await;
            let identity = self.shared.identity();
            let Some(coordinator) = identity.coordinator else {
                // Lost: look for it again, or rejoin.
                if self.coordinator(cluster).await.is_err() {
                    return;
                }
                continue;
            };
            let request = HeartbeatRequest::default()
                .with_group_id(self.group.clone())
                .with_generation_id(identity.generation)
                .with_member_id(identity.member_id);
            match cluster
                .call(&coordinator, &request, version::HEARTBEAT)
                .await
            {
                Ok(answer) => match answer.error_code.err() {
                    None => {}
                    Some(
                        ResponseError::RebalanceInProgress
                        | ResponseError::IllegalGeneration
                        | ResponseError::UnknownMemberId
                        | ResponseError::FencedInstanceId,
                    ) => return,
                    Some(_) => self.coordinator_moved(),
                },
                Err(_) => self.coordinator_moved(),
            }
        }
    }

    /// The coordinator's address, found once and again when it moves.
    async fn coordinator(&self, cluster: &mut Cluster) -> Result<String, DriverError> {
        if let Some(address) = self.shared.identity().coordinator {
            return Ok(address);
        }
        let request = FindCoordinatorRequest::default()
            .with_key(self.group.0.clone())
            .with_key_type(0);
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        loop {
            let answer = cluster
                .call_any(&request, version::FIND_COORDINATOR)
                .await
                .map_err(|e| lost("find the group's coordinator", &e))?;
            match answer.error_code.err() {
                None => {
                    let address = format!("{}:{}", answer.host.as_str(), answer.port);
                    self.shared.set(|id| id.coordinator = Some(address.clone()));
                    return Ok(address);
                }
                Some(e) if e.is_retriable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Some(e) => return Err(refused("find the group's coordinator", e)),
            }
        }
    }

    /// Forgets the coordinator after it said it is not (or no longer) it.
    fn coordinator_moved(&self) {
        self.shared.set(|id| id.coordinator = None);
    }

    /// Joins the group and returns the partitions of the topic assigned
    /// to this member. The caller committed what it read and stopped
    /// reading first.
    async fn join(&self, cluster: &mut Cluster) -> Result<Vec<i32>, DriverError> {
        let deadline = Instant::now() + self.timing.rebalance + ADMIN_TIMEOUT;
        let subscription = encode_versioned(
            0,
            &ConsumerProtocolSubscription::default().with_topics(vec![self.topic.0.clone()]),
        )?;
        self.shared.set(|id| id.generation = -1);
        let what = "join the group";
        loop {
            if Instant::now() >= deadline {
                return Err(DriverError::fatal(format!(
                    "could not join group {}: it did not settle within {}",
                    self.group.0.as_str(),
                    humantime::format_duration(self.timing.rebalance + ADMIN_TIMEOUT)
                )));
            }
            let request = JoinGroupRequest::default()
                .with_group_id(self.group.clone())
                .with_session_timeout_ms(millis(self.timing.session))
                .with_rebalance_timeout_ms(millis(self.timing.rebalance))
                .with_member_id(self.shared.identity().member_id)
                .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(ASSIGNOR))
                    .with_metadata(subscription.clone())]);
            // A JoinGroup is answered once every member has joined, a
            // SyncGroup once the leader has assigned.
            let wait = self.timing.rebalance + Duration::from_secs(5);
            let joined = self
                .call_coordinator_within(
                    cluster,
                    &request,
                    version::JOIN_GROUP,
                    wait,
                    deadline,
                    what,
                )
                .await?;
            match joined.error_code.err() {
                None => {}
                Some(ResponseError::MemberIdRequired) => {
                    self.shared
                        .set(|id| id.member_id = joined.member_id.clone());
                    continue;
                }
                Some(e) => {
                    self.after_refusal(e, what).await?;
                    continue;
                }
            }
            let assignments = if joined.leader == joined.member_id {
                self.assign(cluster, &joined).await?
            } else {
                Vec::new()
            };
            let request = SyncGroupRequest::default()
                .with_group_id(self.group.clone())
                .with_generation_id(joined.generation_id)
                .with_member_id(joined.member_id.clone())
                .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
                .with_protocol_name(Some(StrBytes::from_static_str(ASSIGNOR)))
                .with_assignments(assignments);
            let synced = self
                .call_coordinator_within(
                    cluster,
                    &request,
                    version::SYNC_GROUP,
                    wait,
                    deadline,
                    what,
                )
                .await?;
            if let Some(e) = synced.error_code.err() {
                self.after_refusal(e, what).await?;
                continue;
            }
            let partitions = self.assigned(synced.assignment)?;
            self.shared.set(|id| {
                id.member_id = joined.member_id.clone();
                id.generation = joined.generation_id;
            });
            return Ok(partitions);
        }
    }

    /// Calls the coordinator, finding it again after a lost connection
    /// until `deadline`.
    async fn call_coordinator<R: Request>(
        &self,
        cluster: &mut Cluster,
        request: &R,
        version: i16,
        deadline: Instant,
        what: &str,
    ) -> Result<R::Response, DriverError> {
        let wait = cluster.timeout();
        self.call_coordinator_within(cluster, request, version, wait, deadline, what)
            .await
    }

    /// [`Member::call_coordinator`], waiting up to `wait` for each answer.
    async fn call_coordinator_within<R: Request>(
        &self,
        cluster: &mut Cluster,
        request: &R,
        version: i16,
        wait: Duration,
        deadline: Instant,
        what: &str,
    ) -> Result<R::Response, DriverError> {
        loop {
            let coordinator = self.coordinator(cluster).await?;
            match cluster
                .call_within(&coordinator, request, version, wait)
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(e) => self.retry_after_loss(&e, deadline, what).await?,
            }
        }
    }

    /// After a lost connection to the coordinator: look for it again, for
    /// as long as the deadline allows.
    async fn retry_after_loss(
        &self,
        e: &io::Error,
        deadline: Instant,
        what: &str,
    ) -> Result<(), DriverError> {
        if Instant::now() >= deadline {
            return Err(lost(what, e));
        }
        self.coordinator_moved();
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(())
    }

    /// After the coordinator refused a join: what the error asks for, or
    /// the error.
    async fn after_refusal(&self, e: ResponseError, what: &str) -> Result<(), DriverError> {
        match e {
            ResponseError::UnknownMemberId
            | ResponseError::IllegalGeneration
            | ResponseError::FencedInstanceId => {
                self.shared.set(|id| id.member_id = StrBytes::default());
            }
            ResponseError::RebalanceInProgress => {}
            ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress => {
                self.coordinator_moved();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            e => return Err(refused(what, e)),
        }
        Ok(())
    }

    /// The leader's `range` assignment: for each topic, its members (by
    /// member id) take consecutive runs of its partitions, the first ones
    /// one more when they do not divide evenly. Kafka's and librdkafka's
    /// `range`, so members of either kind agree.
    async fn assign(
        &self,
        cluster: &mut Cluster,
        joined: &JoinGroupResponse,
    ) -> Result<Vec<SyncGroupRequestAssignment>, DriverError> {
        let mut subscribers: std::collections::BTreeMap<StrBytes, Vec<StrBytes>> =
            Default::default();
        for member in &joined.members {
            let subscription: ConsumerProtocolSubscription =
                decode_versioned(member.metadata.clone())?;
            for topic in subscription.topics {
                subscribers
                    .entry(topic)
                    .or_default()
                    .push(member.member_id.clone());
            }
        }
        let request = MetadataRequest::default().with_topics(Some(
            subscribers
                .keys()
                .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(t.clone()))))
                .collect(),
        ));
        let metadata = cluster
            .call_any(&request, version::METADATA)
            .await
            .map_err(|e| lost("read the topics' partitions", &e))?;
        let mut given: std::collections::BTreeMap<StrBytes, Vec<TopicPartition>> = joined
            .members
            .iter()
            .map(|m| (m.member_id.clone(), Vec::new()))
            .collect();
        for topic in &metadata.topics {
            let Some(name) = &topic.name else { continue };
            let Some(members) = subscribers.get_mut(&name.0) else {
                continue;
            };
            members.sort();
            let mut partitions: Vec<i32> =
                topic.partitions.iter().map(|p| p.partition_index).collect();
            partitions.sort_unstable();
            let (each, extra) = (
                partitions.len() / members.len(),
                partitions.len() % members.len(),
            );
            let mut next = 0;
            for (i, member) in members.iter().enumerate() {
                let take = each + usize::from(i < extra);
                let run = partitions[next..next + take].to_vec();
                next += take;
                given.entry(member.clone()).or_default().push(
                    TopicPartition::default()
                        .with_topic(name.clone())
                        .with_partitions(run),
                );
            }
        }
        given
            .into_iter()
            .map(|(member_id, partitions)| {
                let assignment = encode_versioned(
                    0,
                    &ConsumerProtocolAssignment::default().with_assigned_partitions(partitions),
                )?;
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(member_id)
                    .with_assignment(assignment))
            })
            .collect()
    }

    /// This member's partitions of the topic, from its assignment.
    fn assigned(&self, assignment: Bytes) -> Result<Vec<i32>, DriverError> {
        if assignment.is_empty() {
            return Ok(Vec::new());
        }
        let assignment: ConsumerProtocolAssignment = decode_versioned(assignment)?;
        let mut partitions: Vec<i32> = assignment
            .assigned_partitions
            .into_iter()
            .filter(|t| t.topic == self.topic)
            .flat_map(|t| t.partitions)
            .collect();
        partitions.sort_unstable();
        Ok(partitions)
    }

    /// The offsets the group committed for `partitions` (`None`: none).
    async fn committed(
        &self,
        cluster: &mut Cluster,
        partitions: &[i32],
    ) -> Result<Vec<Option<i64>>, DriverError> {
        let request = OffsetFetchRequest::default()
            .with_group_id(self.group.clone())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(self.topic.clone())
                .with_partition_indexes(partitions.to_vec())]));
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        loop {
            let what = "read the group's offsets";
            let answer = self
                .call_coordinator(cluster, &request, version::OFFSET_FETCH, deadline, what)
                .await?;
            let mut codes = vec![answer.error_code];
            for topic in &answer.topics {
                codes.extend(topic.partitions.iter().map(|p| p.error_code));
            }
            let refusal = codes.into_iter().find_map(|code| code.err());
            match refusal {
                None => {}
                Some(e) if e.is_retriable() && Instant::now() < deadline => {
                    self.coordinator_moved();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Some(e) => return Err(refused("read the group's offsets", e)),
            }
            let found = |partition: i32| {
                answer
                    .topics
                    .iter()
                    .filter(|t| t.name == self.topic)
                    .flat_map(|t| &t.partitions)
                    .find(|p| p.partition_index == partition)
                    .map(|p| p.committed_offset)
                    .filter(|&at| at >= 0)
            };
            return Ok(partitions.iter().map(|&p| found(p)).collect());
        }
    }

    fn commit_request(&self, offsets: &[(i32, i64)]) -> OffsetCommitRequest {
        let identity = self.shared.identity();
        OffsetCommitRequest::default()
            .with_group_id(self.group.clone())
            .with_generation_id_or_member_epoch(identity.generation)
            .with_member_id(identity.member_id)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(self.topic.clone())
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(partition, offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                )])
    }

    /// Commits `offsets` (partition, next offset). A commit the group
    /// refuses because it rebalances, or dropped this member, is not an
    /// error: the partitions' next owner reads those rows again, as Kafka
    /// promises, and the member rejoins.
    pub(super) async fn commit(
        &self,
        cluster: &mut Cluster,
        offsets: &[(i32, i64)],
    ) -> Result<(), DriverError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let request = self.commit_request(offsets);
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        loop {
            let what = "commit offsets";
            let answer = self
                .call_coordinator(cluster, &request, version::OFFSET_COMMIT, deadline, what)
                .await?;
            let refusal = answer
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .find_map(|p| p.error_code.err());
            match refusal {
                None => return Ok(()),
                Some(
                    ResponseError::RebalanceInProgress
                    | ResponseError::IllegalGeneration
                    | ResponseError::UnknownMemberId,
                ) if self.joins => return Ok(()),
                Some(e) if e.is_retriable() && Instant::now() < deadline => {
                    self.coordinator_moved();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Some(e) => return Err(refused("commit offsets", e)),
            }
        }
    }

    /// Commits `offsets` and leaves the group, so that its partitions go
    /// to the others at once rather than after the session timeout.
    pub(super) async fn leave(
        &self,
        cluster: &mut Cluster,
        offsets: &[(i32, i64)],
    ) -> Result<(), DriverError> {
        self.commit(cluster, offsets).await?;
        let Some(request) = self.leave_request() else {
            return Ok(());
        };
        let coordinator = self.coordinator(cluster).await?;
        // Unanswered or refused, the group drops the member after its
        // session timeout all the same.
        let _ = cluster
            .call(&coordinator, &request, version::LEAVE_GROUP)
            .await;
        self.shared.set(|id| {
            id.generation = -1;
            id.member_id = StrBytes::default();
        });
        Ok(())
    }

    fn leave_request(&self) -> Option<LeaveGroupRequest> {
        let identity = self.shared.identity();
        // By member id, in a generation or joining one: a member that
        // joined leaves, or the group stays non-empty (and cannot be
        // deleted) until its session times out.
        (self.joins && !identity.member_id.is_empty()).then(|| {
            LeaveGroupRequest::default()
                .with_group_id(self.group.clone())
                .with_members(vec![
                    MemberIdentity::default().with_member_id(identity.member_id)
                ])
        })
    }

    /// What [`Member::leave`] sends, for a consumer dropped without
    /// leaving, to send over blocking connections (no runtime may be left
    /// to drive one); `None` without a coordinator to send it to.
    pub(super) fn farewell(&self, offsets: &[(i32, i64)]) -> Option<Farewell> {
        Some(Farewell {
            coordinator: self.shared.identity().coordinator?,
            commit: (!offsets.is_empty()).then(|| self.commit_request(offsets)),
            leave: self.leave_request(),
        })
    }
}

/// A dropped member's last commit and its leave.
pub(super) struct Farewell {
    coordinator: String,
    commit: Option<OffsetCommitRequest>,
    leave: Option<LeaveGroupRequest>,
}

impl Farewell {
    /// Sends both, each waiting up to half of the close timeout; what is
    /// not answered the group makes good after the session timeout.
    pub(super) fn send(self, client_id: &StrBytes) {
        let wait = super::consume::CLOSE_TIMEOUT / 2;
        if let Some(request) = self.commit {
            let _ = call_blocking(
                &self.coordinator,
                client_id,
                &request,
                version::OFFSET_COMMIT,
                wait,
            );
        }
        if let Some(request) = self.leave {
            let _ = call_blocking(
                &self.coordinator,
                client_id,
                &request,
                version::LEAVE_GROUP,
                wait,
            );
        }
    }
}

/// The address of each partition's leader.
pub(super) async fn leaders(
    cluster: &mut Cluster,
    topic: &TopicName,
    partitions: &[i32],
) -> Result<Vec<String>, DriverError> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(topic.clone())),
    ]));
    let deadline = Instant::now() + ADMIN_TIMEOUT;
    loop {
        let answer = cluster
            .call_any(&request, version::METADATA)
            .await
            .map_err(|e| lost("read the topic's leaders", &e))?;
        let brokers: HashMap<BrokerId, String> = answer
            .brokers
            .iter()
            .map(|b| (b.node_id, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let described = answer
            .topics
            .iter()
            .find(|t| t.name.as_ref() == Some(topic));
        let leader = |p: i32| {
            let partition = described?
                .partitions
                .iter()
                .find(|x| x.partition_index == p)?;
            brokers.get(&partition.leader_id).cloned()
        };
        let found: Option<Vec<String>> = partitions.iter().map(|&p| leader(p)).collect();
        match found {
            Some(found) => return Ok(found),
            None if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            None => {
                let why = described
                    .and_then(|t| t.error_code.err())
                    .map_or("a partition has no leader".to_string(), |e| e.to_string());
                return Err(DriverError::fatal(format!(
                    "could not find the leaders of topic {}: {why}",
                    topic.0.as_str()
                )));
            }
        }
    }
}

/// Each partition's first offset (`EARLIEST`, or -1 for the next),
/// asked of its leader.
pub(super) async fn list_offsets(
    cluster: &mut Cluster,
    topic: &TopicName,
    partitions: &[i32],
    timestamp: i64,
) -> Result<Vec<i64>, DriverError> {
    let deadline = Instant::now() + ADMIN_TIMEOUT;
    let mut found = vec![None; partitions.len()];
    while found.iter().any(Option::is_none) {
        let leaders = leaders(cluster, topic, partitions).await?;
        let mut by_leader: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, leader) in leaders.into_iter().enumerate() {
            if found[i].is_none() {
                by_leader.entry(leader).or_default().push(i);
            }
        }
        for (leader, asked) in by_leader {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(topic.clone())
                    .with_partitions(
                        asked
                            .iter()
                            .map(|&i| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(partitions[i])
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )]);
            let answer = match cluster.call(&leader, &request, version::LIST_OFFSETS).await {
                Ok(answer) => answer,
                Err(e) if Instant::now() >= deadline => {
                    return Err(lost("read the partitions' offsets", &e))
                }
                Err(_) => continue,
            };
            for p in answer.topics.iter().flat_map(|t| &t.partitions) {
                let Some(i) = partitions.iter().position(|&x| x == p.partition_index) else {
                    continue;
                };
                match p.error_code.err() {
                    None => found[i] = Some(p.offset),
                    Some(e) if e.is_retriable() && Instant::now() < deadline => {}
                    Some(e) => return Err(refused("read the partitions' offsets", e)),
                }
            }
        }
        if found.iter().any(Option::is_none) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(found.into_iter().map(|at| at.unwrap_or(0)).collect())
}

/// The consumer protocol's metadata: a version, then the message.
fn encode_versioned<M: Encodable>(version: i16, message: &M) -> Result<Bytes, DriverError> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    message
        .encode(&mut buf, version)
        .map_err(|e| DriverError::fatal(format!("could not encode group metadata: {e}")))?;
    Ok(buf.freeze())
}

/// Decodes what [`encode_versioned`] (or another client) wrote, reading a
/// newer version than the crate knows as its newest: versions only add
/// fields at the end.
fn decode_versioned<M: Decodable + Message>(mut bytes: Bytes) -> Result<M, DriverError> {
    let bad =
        |e: String| DriverError::fatal(format!("a group member's metadata is malformed: {e}"));
    if bytes.remaining() < 2 {
        return Err(bad("too short".into()));
    }
    let version = bytes.get_i16().clamp(0, M::VERSIONS.max);
    M::decode(&mut bytes, version).map_err(|e| bad(e.to_string()))
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// A request the cluster did not answer.
pub(super) fn lost(what: &str, e: &io::Error) -> DriverError {
    DriverError::connection(format!("could not {what}: {e}"))
}

/// A request the cluster answered with an error.
pub(super) fn refused(what: &str, e: ResponseError) -> DriverError {
    DriverError::fatal(format!("could not {what}: {e}"))
}
