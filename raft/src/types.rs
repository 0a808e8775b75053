//! The Raft type configuration and what travels in the log.

use std::fmt;

use kuberaft_proto as pb;
use prost::Message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A cluster member as Raft knows it: where its peers and clients reach it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Address of the peer listener (Raft transport and the Kv admin service).
    pub peer_addr: String,
    /// Address of the Kubernetes API listener.
    pub api_addr: String,
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer={} api={}", self.peer_addr, self.api_addr)
    }
}

/// A state-machine command in a log entry (the protobuf `Command`, serialised as its protobuf
/// bytes inside openraft's entry encoding).
#[derive(Debug, Clone, PartialEq)]
pub struct Command(pub pb::Command);

/// The result of applying a [`Command`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CommandResult(pub pb::CommandResult);

fn ser_proto<M: Message, S: Serializer>(m: &M, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(&m.encode_to_vec())
}

fn de_proto<'de, M: Message + Default, D: Deserializer<'de>>(d: D) -> Result<M, D::Error> {
    let bytes: Vec<u8> = serde_bytes_compat::deserialize(d)?;
    M::decode(bytes.as_slice()).map_err(serde::de::Error::custom)
}

/// Deserialises a byte string written with `serialize_bytes`.
mod serde_bytes_compat {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::new();
            while let Some(b) = seq.next_element()? {
                out.push(b);
            }
            Ok(out)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }
}

impl Serialize for Command {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_proto(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_proto(d).map(Command)
    }
}

impl Serialize for CommandResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_proto(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for CommandResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de_proto(d).map(CommandResult)
    }
}

openraft::declare_raft_types!(
    /// kuberaft's Raft type configuration.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// openraft's log id for our configuration.
pub type LogId = openraft::LogId<u64>;
/// openraft's log entry for our configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// openraft's stored membership for our configuration.
pub type StoredMembership = openraft::StoredMembership<u64, Member>;
/// A running openraft instance for our configuration.
pub type Raft = openraft::Raft<TypeConfig>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_postcard() {
        let cmd = pb::Command {
            command: Some(pb::command::Command::Compact(pb::CompactRequest { revision: 7 })),
        };
        let entry = Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(3, 1), 42),
            payload: openraft::EntryPayload::Normal(Command(cmd.clone())),
        };
        let bytes = crate::codec::encode("entry", &entry).unwrap();
        let back: Entry = crate::codec::decode("entry", &bytes).unwrap();
        assert_eq!(back.log_id, entry.log_id);
        match back.payload {
            openraft::EntryPayload::Normal(c) => assert_eq!(c.0, cmd),
            other => panic!("unexpected payload {other:?}"),
        }
    }
}
