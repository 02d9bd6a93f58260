//! A headless Chromium driven over the DevTools protocol through `--remote-debugging-pipe`
//! (JSON messages, NUL-terminated, on fds 3 and 4): no WebSocket, no port.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct Browser {
    child: Child,
    to_browser: std::fs::File,
    from_browser: Receiver<Value>,
    next_id: u64,
    /// Events seen so far, in order.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium as the tests run it: root, so without its sandbox, and with nothing
    /// that reaches the network. Fails (never skips) when Chromium is missing.
    pub fn start() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (to_r, to_w) = nix::unistd::pipe().unwrap();
        let (from_r, from_w) = nix::unistd::pipe().unwrap();
        let (child_in, child_out) = (to_r.as_raw_fd(), from_w.as_raw_fd());
        let mut command = Command::new("chromium");
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--remote-debugging-pipe",
                "--window-size=1280,2000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(child_in, 3) < 0 || libc::dup2(child_out, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("`chromium` must be installed (apt-get install chromium) for this test");
        drop((to_r, from_w));
        let (tx, rx) = mpsc::channel();
        let reader: OwnedFd = from_r;
        std::thread::spawn(move || {
            let mut reader = BufReader::new(std::fs::File::from(reader));
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop();
                if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                    if tx.send(value).is_err() {
                        break;
                    }
                }
                message.clear();
            }
        });
        Browser {
            child,
            to_browser: std::fs::File::from(to_w),
            from_browser: rx,
            next_id: 0,
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command (to a page when `session` is given) and returns its result.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let value = self.receive(deadline).unwrap_or_else(|| panic!("no reply to {method}"));
            if value["id"] == json!(id) {
                assert!(value.get("error").is_none(), "{method}: {value}");
                return value["result"].clone();
            }
            self.events.push(value);
        }
    }

    /// Waits for an event named `method`; false when `timeout` passes first.
    pub fn wait_event(&mut self, method: &str, timeout: Duration) -> bool {
        if self.events.iter().any(|e| e["method"] == json!(method)) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        while let Some(value) = self.receive(deadline) {
            let found = value["method"] == json!(method);
            self.events.push(value);
            if found {
                return true;
            }
        }
        false
    }

    /// Collects events for `time`.
    pub fn settle(&mut self, time: Duration) {
        let deadline = Instant::now() + time;
        while let Some(value) = self.receive(deadline) {
            self.events.push(value);
        }
    }

    fn receive(&self, deadline: Instant) -> Option<Value> {
        let left = deadline.checked_duration_since(Instant::now())?;
        self.from_browser.recv_timeout(left).ok()
    }

    /// Errors the page reported: uncaught exceptions, `console.error`, and the browser's own
    /// error log entries (failed loads...).
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| {
                let m = e["method"].as_str().unwrap_or("");
                m == "Runtime.exceptionThrown"
                    || (m == "Runtime.consoleAPICalled"
                        && matches!(e["params"]["type"].as_str(), Some("error" | "assert")))
                    || (m == "Log.entryAdded" && e["params"]["entry"]["level"] == json!("error"))
            })
            .map(|e| e.to_string())
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
