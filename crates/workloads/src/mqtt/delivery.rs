//! What a subscriber received of the run's messages: one bit per message
//! per publisher, so that after the run each subscriber (or shared group)
//! is held to exactly what was published to the topics its filter
//! matches. A subscriber keeps its bits to itself while it runs (no lock
//! on the hot path) and hands them over when its session ends.

/// Messages of this run one subscriber session received.
#[derive(Debug, Default, Clone)]
pub(super) struct Seen {
    /// Per publisher: bit `seq` is set once message `seq` came.
    bits: Vec<Vec<u64>>,
    /// Per publisher: one past the highest message number seen.
    next: Vec<u64>,
    pub distinct: u64,
    pub duplicates: u64,
    pub reorders: u64,
}

/// What one message was to the subscriber that received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arrival {
    InOrder,
    /// After a later message of the same publisher.
    Reordered,
    Duplicate,
}

impl Seen {
    pub fn new(publishers: usize) -> Seen {
        Seen {
            bits: vec![Vec::new(); publishers],
            next: vec![0; publishers],
            ..Seen::default()
        }
    }

    /// Notes message `seq` of `publisher` (which must be one of the run's).
    pub fn mark(&mut self, publisher: usize, seq: u64) -> Arrival {
        let words = &mut self.bits[publisher];
        let (word, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if word >= words.len() {
            words.resize((word + 1).next_power_of_two(), 0);
        }
        if words[word] & bit != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        words[word] |= bit;
        self.distinct += 1;
        let next = &mut self.next[publisher];
        if seq < *next {
            self.reorders += 1;
            return Arrival::Reordered;
        }
        *next = seq + 1;
        Arrival::InOrder
    }

    /// Adds what `other` saw (another session of the same subscriber, or
    /// another member of its group); a message both saw counts once, and
    /// as a duplicate.
    pub fn merge(&mut self, other: &Seen) {
        for (p, theirs) in other.bits.iter().enumerate() {
            let mine = &mut self.bits[p];
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                let both = (*m & t).count_ones() as u64;
                self.duplicates += both;
                self.distinct += (t.count_ones() as u64) - both;
                *m |= t;
            }
        }
        self.duplicates += other.duplicates;
        self.reorders += other.reorders;
    }

    /// Distinct messages of `publisher` seen.
    pub fn of(&self, publisher: usize) -> u64 {
        self.bits[publisher]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum()
    }
}

/// Whether `topic` matches the MQTT topic `filter` (`+` one level, `#`
/// the rest; a `$share/GROUP/` prefix is not part of the filter).
pub(super) fn matches(filter: &str, topic: &str) -> bool {
    let mut levels = topic.split('/');
    for f in filter.split('/') {
        match (f, levels.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (f, Some(t)) if f == t => {}
            _ => return false,
        }
    }
    levels.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_is_counted_once_and_lateness_is_a_reorder() {
        let mut seen = Seen::new(2);
        assert_eq!(seen.mark(0, 0), Arrival::InOrder);
        assert_eq!(seen.mark(0, 2), Arrival::InOrder);
        assert_eq!(seen.mark(0, 1), Arrival::Reordered);
        assert_eq!(seen.mark(0, 2), Arrival::Duplicate);
        assert_eq!(seen.mark(1, 1000), Arrival::InOrder);
        assert_eq!((seen.distinct, seen.duplicates, seen.reorders), (4, 1, 1));
        assert_eq!((seen.of(0), seen.of(1)), (3, 1));
    }

    #[test]
    fn members_of_a_group_add_up_and_overlaps_are_duplicates() {
        let mut a = Seen::new(1);
        let mut b = Seen::new(1);
        for seq in [0, 2, 4] {
            a.mark(0, seq);
        }
        for seq in [1, 3, 4, 200] {
            b.mark(0, seq);
        }
        a.merge(&b);
        assert_eq!(a.of(0), 6);
        assert_eq!((a.distinct, a.duplicates), (6, 1));
    }

    #[test]
    fn filters_match_as_mqtt_says() {
        assert!(matches("vehicles/+/telemetry", "vehicles/7/telemetry"));
        assert!(!matches("vehicles/+/telemetry", "vehicles/7/commands"));
        assert!(matches("vehicles/#", "vehicles/7/telemetry"));
        assert!(matches("#", "a"));
        assert!(!matches("vehicles/+", "vehicles/7/telemetry"));
        assert!(!matches("vehicles/7/telemetry/x", "vehicles/7/telemetry"));
        assert!(matches("loadcell/3", "loadcell/3"));
    }
}
