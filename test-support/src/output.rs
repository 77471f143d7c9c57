//! A child process's output, read line by line as it comes: for tests that run a built
//! binary (the CLI, the examples) and wait for what it prints.

use std::io::{BufRead as _, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The lines a child process prints, read on a thread of their own, so a test waits for
/// them with a bound.
///
/// ```
/// use std::process::{Command, Stdio};
/// use std::time::Duration;
/// use sentinel_test_support::OutputLines;
///
/// let mut child = Command::new("echo")
///     .arg("listening on 127.0.0.1:3000")
///     .stdout(Stdio::piped())
///     .spawn()?;
/// let mut output = OutputLines::read(child.stdout.take().expect("piped"));
/// output.wait_for("listening on", Duration::from_secs(10));
/// assert_eq!(output.next_within(Duration::from_secs(10)), None, "echo printed one line");
/// child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct OutputLines {
    lines: Receiver<String>,
    seen: Vec<String>,
    /// Lines before this index were passed by an earlier [`wait_for`](Self::wait_for).
    cursor: usize,
}

impl OutputLines {
    /// Reads `output` (a child's piped stdout or stderr) until it closes.
    pub fn read(output: impl Read + Send + 'static) -> Self {
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end, so the child never writes into a closed pipe; a line that is
            // not UTF-8 is kept, lossily.
            for line in BufReader::new(output).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line);
                let line = line.strip_suffix('\r').unwrap_or(&line).to_owned();
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            lines,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    /// The next line, if one comes within `timeout`; `None` once the output closed.
    pub fn next_within(&mut self, timeout: Duration) -> Option<String> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        self.seen.push(line.clone());
        self.cursor = self.seen.len();
        Some(line)
    }

    /// Waits for a line containing `needle`, after the line the last wait found (in order:
    /// a line read meanwhile by [`next_within`](Self::next_within) is passed too).
    ///
    /// # Panics
    ///
    /// When no such line comes within `timeout`: the message shows every line read.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.seen[self.cursor..]
                .iter()
                .position(|line| line.contains(needle))
            {
                self.cursor += at + 1;
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no line with {needle:?} within {timeout:?}; the output so far:\n{}",
                    self.seen.join("\n")
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "the output closed (the process ended?) before a line with {needle:?}; \
                     the whole output:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Every line read until the output closes or `timeout` passes.
    pub fn rest(&mut self, timeout: Duration) -> &[String] {
        let deadline = Instant::now() + timeout;
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        self.cursor = self.seen.len();
        &self.seen
    }

    /// Every line read so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }
}
