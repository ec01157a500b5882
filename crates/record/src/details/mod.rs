//! What a family adds to a result beyond the shared figures: each family's
//! own typed section, stored under the family's key at the level it
//! belongs to (`disk` and `connections` beside `summary`, `stream` inside
//! `verification`). A new family writes its own [`Detail`] type in a file
//! here and puts it into [`Details`]; no shared struct gains a field, and
//! no other family writes a `None` for it.
//!
//! On disk a section is plain JSON under its key, so files written before
//! the sections moved here load unchanged, and the key names are the same
//! public interface as every other result field.

pub mod connections;
pub mod disk;
pub mod mqtt;
pub mod stream;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use connections::{FirstFailure, HeldConnections};
pub use disk::{DeviceUtil, DiskRun, Filesystem, IopsExpectation};
pub use mqtt::{MqttDelivery, MqttStorm, SubscriberDelivery};
pub use stream::{Flow, StreamCompleteness};

/// One family's section of a result.
pub trait Detail: Serialize + DeserializeOwned {
    /// Its key in the result (a stable name: scripts read it).
    const KEY: &'static str;
}

/// The family sections at one level of a result, by key. Held as JSON so
/// that a file with a section this build does not know keeps it when it is
/// read and written again (a merge, an import).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Details(BTreeMap<String, Value>);

impl Details {
    /// Puts `detail` under its key, replacing what was there.
    pub fn insert<T: Detail>(&mut self, detail: &T) {
        let value = serde_json::to_value(detail).expect("a result section serializes to JSON");
        self.0.insert(T::KEY.to_string(), value);
    }

    /// These details with `detail` put in.
    pub fn with<T: Detail>(mut self, detail: &T) -> Self {
        self.insert(detail);
        self
    }

    /// The section of type `T`, if there is one and it reads as one.
    pub fn get<T: Detail>(&self) -> Option<T> {
        self.0
            .get(T::KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Probe {
        n: u64,
    }

    impl Detail for Probe {
        const KEY: &'static str = "probe";
    }

    #[test]
    fn a_section_is_stored_under_its_key_and_read_back_typed() {
        let details = Details::default().with(&Probe { n: 7 });
        assert_eq!(
            serde_json::to_value(&details).unwrap(),
            serde_json::json!({"probe": {"n": 7}})
        );
        assert_eq!(details.get::<Probe>(), Some(Probe { n: 7 }));
        assert_eq!(Details::default().get::<Probe>(), None);
    }

    #[test]
    fn a_section_this_build_does_not_know_survives_a_round_trip() {
        let text = r#"{"future":{"x":[1,2]},"probe":{"n":1}}"#;
        let details: Details = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&details).unwrap(), text);
    }
}
