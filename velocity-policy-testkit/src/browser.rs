//! Headless Chromium for tests of pages: the DOM a page has built after its scripts ran, and
//! screenshots.
//!
//! Under `CI=true` a missing `chromium` fails the test (`.ci/run` installs it); elsewhere
//! [`Chromium::find`] returns `None` after saying on stderr that the test is skipped.
//!
//! Chromium runs with a virtual time budget: timers (a page's `setTimeout` refresh) fire as
//! fast as the page can run them, and time stands still while a request is in flight, so a
//! page that refreshes every second runs about `budget / 1 s` refreshes whatever the machine's
//! load. The calls block: from async code, call them in `spawn_blocking`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long one run of the browser may take before the test fails.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The installed `chromium`.
#[derive(Debug, Clone)]
pub struct Chromium {
    program: &'static str,
}

impl Chromium {
    /// The browser, or `None` (said on stderr) when it is not installed and this is not CI.
    ///
    /// # Panics
    ///
    /// When `chromium` is missing and `CI=true`.
    pub fn find() -> Option<Self> {
        let found = Command::new("chromium")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            return Some(Self {
                program: "chromium",
            });
        }
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "chromium is not installed, and CI=true: install it (apt-get install -y chromium); .ci/run does"
        );
        eprintln!("SKIPPED: chromium is not installed (install it to run this browser test)");
        None
    }

    /// The DOM of `url` after `virtual_time` of the page's own time (its timers), serialised.
    ///
    /// # Panics
    ///
    /// When the browser fails or takes longer than 90 s.
    pub fn dump_dom(&self, url: &str, virtual_time: Duration) -> String {
        self.run(url, virtual_time, &["--dump-dom".to_owned()])
    }

    /// A screenshot of `url` at `width` x `height`, after `virtual_time`, written to `path`.
    ///
    /// # Panics
    ///
    /// When the browser fails or takes longer than 90 s.
    pub fn screenshot(&self, url: &str, virtual_time: Duration, path: &Path, size: (u32, u32)) {
        let _ = std::fs::remove_file(path);
        self.run(
            url,
            virtual_time,
            &[
                format!("--screenshot={}", path.display()),
                format!("--window-size={},{}", size.0, size.1),
                "--hide-scrollbars".to_owned(),
            ],
        );
    }

    fn run(&self, url: &str, virtual_time: Duration, extra: &[String]) -> String {
        let profile = tempfile::tempdir().expect("a browser profile directory");
        let mut child = Command::new(self.program)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!(
                "--virtual-time-budget={}",
                virtual_time.as_millis()
            ))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        // Read both pipes while it runs: a DOM larger than a pipe's buffer would block it.
        let read = |mut pipe: Box<dyn Read + Send>| {
            thread::spawn(move || {
                let mut out = Vec::new();
                let _ = pipe.read_to_end(&mut out);
                String::from_utf8_lossy(&out).into_owned()
            })
        };
        let stdout = read(Box::new(child.stdout.take().expect("stdout is piped")));
        let stderr = read(Box::new(child.stderr.take().expect("stderr is piped")));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("chromium can be waited for") {
                break status;
            }
            if started.elapsed() > TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish {url} within {TIMEOUT:?}");
            }
            thread::sleep(Duration::from_millis(20));
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        assert!(
            status.success(),
            "chromium failed on {url}: {status}\n{stderr}"
        );
        stdout
    }
}

/// The opening tag and cells of the first table row the page rendered with `attribute="value"`
/// (`data-name="search"`), up to its `</tr>`.
pub fn row<'a>(dom: &'a str, attribute: &str, value: &str) -> Option<&'a str> {
    let at = dom.find(&format!("{attribute}=\"{value}\""))?;
    let start = dom[..at].rfind("<tr")?;
    let end = at + dom[at..].find("</tr>")?;
    Some(&dom[start..end])
}

/// The body of the table with `id`, from `<tbody>` to `</tbody>`.
pub fn table_body<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("<table id=\"{id}\""))?;
    let start = at + dom[at..].find("<tbody>")?;
    let end = start + dom[start..].find("</tbody>")?;
    Some(&dom[start..end])
}
