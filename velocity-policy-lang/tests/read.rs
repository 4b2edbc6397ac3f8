//! Reading policy files from disk (`PolicySet::load_file` and `load_dir`, the path the `policy`
//! command and the attribute macros share): only regular files, never more than the parser's
//! limit and a byte, and nothing that can block.
#![cfg(unix)]
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure should stop the test"
)]

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use velocity_policy_lang::MAX_SOURCE_LEN;
use velocity_policy_lang::PolicySet;
use velocity_policy_lang::source::read_file;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-lang-read-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `f` on a thread and waits at most a minute for it: a read that blocks or never ends
/// fails the test instead of hanging it.
fn promptly<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || send.send(f()));
    receive
        .recv_timeout(Duration::from_secs(60))
        .expect("the read did not return within a minute")
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn a_named_pipe_is_refused_without_being_opened() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("service.policy");
    mkfifo(&fifo);
    // Opening it for reading would block until a writer came; nothing writes to it.
    let error = promptly(move || PolicySet::new().load_file(&fifo).unwrap_err());
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        error.to_string(),
        "not a regular file but a named pipe (FIFO)"
    );
}

#[test]
fn a_device_is_refused_rather_than_read_forever() {
    for device in ["/dev/zero", "/dev/urandom", "/dev/null"] {
        let error = promptly(move || PolicySet::new().load_file(Path::new(device)).unwrap_err());
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{device}");
        assert_eq!(
            error.to_string(),
            "not a regular file but a character device"
        );
    }
    let error = read_file(Path::new("/tmp"), 10).unwrap_err();
    assert_eq!(error.to_string(), "not a regular file but a directory");
}

#[test]
fn a_huge_file_is_read_no_further_than_the_limit() {
    let dir = temp_dir("huge");
    let path = dir.join("huge.policy");
    // 64 GiB, sparse: reading it all would take minutes and the memory to hold it.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(64 << 30).unwrap();
    drop(file);

    let read = promptly({
        let path = path.clone();
        move || read_file(&path, MAX_SOURCE_LEN).unwrap()
    });
    assert_eq!(read.bytes.len(), MAX_SOURCE_LEN + 1);
    assert_eq!(read.len, 64 << 30);
    assert!(read.exceeds(MAX_SOURCE_LEN));

    let mut set = PolicySet::new();
    set.load_file(&path).unwrap();
    let report = set.check();
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].code(), "policy::too-large");
    assert_eq!(
        report.errors[0].message(),
        format!(
            "file is {} bytes, more than the {MAX_SOURCE_LEN} a policy file may have",
            64u64 << 30
        )
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_file_at_the_limit_is_read_whole() {
    let dir = temp_dir("limit");
    let path = dir.join("limit.policy");
    std::fs::write(&path, "request { deadline = 1s }\n").unwrap();
    let read = read_file(&path, 26).unwrap();
    assert_eq!(read.bytes, b"request { deadline = 1s }\n");
    assert!(!read.exceeds(26));
    assert!(read_file(&path, 25).unwrap().exceeds(25));
}

#[test]
fn a_directory_leaves_out_what_is_not_a_regular_file() {
    // What the attribute macros read: a FIFO or a dangling link named `*.policy` (an editor's
    // lock file) beside the real files must neither block the build nor fail it.
    let dir = temp_dir("dir");
    std::fs::write(
        dir.join("a.policy"),
        "operation op: critical { deadline = 1s }\n",
    )
    .unwrap();
    mkfifo(&dir.join("b.policy"));
    std::os::unix::fs::symlink(dir.join("missing"), dir.join(".#c.policy")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("d.policy")).unwrap();

    let (set, files) = promptly({
        let dir = dir.clone();
        move || {
            let mut set = PolicySet::new();
            let files = set.load_dir(&dir).unwrap();
            (set, files)
        }
    });
    assert_eq!(files, [dir.join("a.policy")]);
    assert!(!set.check().has_errors());
    assert_eq!(set.spec().operations.len(), 1);
}
