//! The canonical store: SQLite (compiled in), in a temporary file unless told otherwise.
//!
//! Every call here blocks its thread; the service runs them on tokio's blocking pool
//! (`spawn_blocking`), never on the async workers. SQLite has one writer: writes go through one
//! connection, and reads through a small pool of their own (WAL mode lets them run while a
//! write commits).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// A failure of the store.
#[derive(Debug, thiserror::Error)]
#[error("sqlite: {0}")]
pub struct DbError(#[from] rusqlite::Error);

/// A stored document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Document {
    /// Its id.
    pub id: i64,
    /// Who wrote it.
    pub author: u64,
    /// Its title.
    pub title: String,
    /// Its text.
    pub body: String,
}

/// The store.
pub struct Database {
    path: PathBuf,
    // Kept so the temporary directory lives as long as the store, and is removed after it.
    _dir: Option<tempfile::TempDir>,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

// A poisoned lock means a panic elsewhere while it was held; the connection is still valid.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn connect(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(2))?;
    // WAL: readers do not wait for the writer. NORMAL: a commit survives the process dying
    // (not the machine losing power), which is what a demo on a temporary file needs.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

impl Database {
    /// A store in a new temporary directory, removed when the store is dropped.
    pub fn temporary() -> Result<Self, std::io::Error> {
        let dir = tempfile::Builder::new().prefix("policy-demo-").tempdir()?;
        let path = dir.path().join("documents.sqlite3");
        Self::build(path, Some(dir)).map_err(std::io::Error::other)
    }

    /// A store in the file at `path` (created when missing).
    pub fn open(path: &Path) -> Result<Self, DbError> {
        Self::build(path.to_owned(), None)
    }

    fn build(path: PathBuf, dir: Option<tempfile::TempDir>) -> Result<Self, DbError> {
        let writer = connect(&path)?;
        Ok(Self {
            path,
            _dir: dir,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the tables when missing.
    pub fn create_schema(&self) -> Result<(), DbError> {
        lock(&self.writer).execute_batch(
            "CREATE TABLE IF NOT EXISTS documents (
                 id INTEGER PRIMARY KEY,
                 author INTEGER NOT NULL,
                 title TEXT NOT NULL,
                 body TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS activity (
                 document INTEGER NOT NULL,
                 request TEXT NOT NULL,
                 PRIMARY KEY (document, request)
             );",
        )?;
        Ok(())
    }

    /// Writes a document; returns its id.
    pub fn insert_document(&self, author: u64, title: &str, body: &str) -> Result<i64, DbError> {
        let writer = lock(&self.writer);
        writer.execute(
            "INSERT INTO documents (author, title, body) VALUES (?1, ?2, ?3)",
            params![author as i64, title, body],
        )?;
        Ok(writer.last_insert_rowid())
    }

    /// Records that `request` saved `document`; running it twice changes nothing.
    pub fn record_activity(&self, document: i64, request: &str) -> Result<(), DbError> {
        lock(&self.writer).execute(
            "INSERT OR IGNORE INTO activity (document, request) VALUES (?1, ?2)",
            params![document, request],
        )?;
        Ok(())
    }

    /// Reads a document.
    pub fn document(&self, id: i64) -> Result<Option<Document>, DbError> {
        let reader = match lock(&self.readers).pop() {
            Some(reader) => reader,
            None => connect(&self.path)?,
        };
        let found = reader
            .query_row(
                "SELECT id, author, title, body FROM documents WHERE id = ?1",
                params![id],
                |row| {
                    Ok(Document {
                        id: row.get(0)?,
                        author: row.get::<_, i64>(1)? as u64,
                        title: row.get(2)?,
                        body: row.get(3)?,
                    })
                },
            )
            .optional();
        lock(&self.readers).push(reader);
        Ok(found?)
    }

    /// How many documents are stored.
    pub fn count_documents(&self) -> Result<u64, DbError> {
        let n: i64 =
            lock(&self.writer).query_row("SELECT COUNT(*) FROM documents", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// How many activity rows are stored.
    pub fn count_activity(&self) -> Result<u64, DbError> {
        let n: i64 =
            lock(&self.writer).query_row("SELECT COUNT(*) FROM activity", [], |r| r.get(0))?;
        Ok(n as u64)
    }
}
