//! What kind of service a connection string points at: the word the connection strings,
//! the providers and the services share (a leaf: it names none of them).

use std::fmt;

use serde::{Serialize, Serializer};

/// What kind of service a connection string points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServiceKind {
    /// Postgres, MySQL, MariaDB.
    RelationalDatabase,
    /// Redis, Valkey, Memcached, and Upstash's REST API.
    Cache,
    /// Cloudflare R2, Amazon S3.
    ObjectStorage,
    /// Neo4j (`neo4j://`, `bolt://`).
    GraphDatabase,
    /// MongoDB.
    DocumentDatabase,
    /// Any other `http(s)://` endpoint.
    HttpApi,
}

impl ServiceKind {
    /// The identifier used in JSON: `relational_database`, `cache`, ...
    #[must_use]
    pub const fn id(self) -> &'static str {
        match self {
            Self::RelationalDatabase => "relational_database",
            Self::Cache => "cache",
            Self::ObjectStorage => "object_storage",
            Self::GraphDatabase => "graph_database",
            Self::DocumentDatabase => "document_database",
            Self::HttpApi => "http_api",
        }
    }

    /// The words printed in the locality table: `relational database`, `cache`, ...
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::RelationalDatabase => "relational database",
            Self::Cache => "cache",
            Self::ObjectStorage => "object storage",
            Self::GraphDatabase => "graph database",
            Self::DocumentDatabase => "document database",
            Self::HttpApi => "http api",
        }
    }
}

impl fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ServiceKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}
