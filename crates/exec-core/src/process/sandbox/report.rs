//! What a sandboxed run reports: whether the sandbox was applied, what this
//! kernel cannot enforce, and, after the run, whether a denial explains its
//! failure.
//!
//! There is no deterministic signal for a denial (Landlock's audit records
//! need `CAP_AUDIT_READ`; seccomp user notification would sit on the syscall
//! path), so `denied` is judged from the output, as codex does, with one more
//! test that cuts false positives: a path named in the error must lie outside
//! the writable roots, and the host's own permission check (same user) must
//! allow the access. A `Permission denied` inside a root, or on a file the
//! user could not write anyway, is a real permission error, not a denial.

use std::path::{Component, Path, PathBuf};

/// What was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationKind {
  /// A write outside the writable roots.
  Write,
  /// A network socket or connection (network off).
  Network,
  /// A failure without a path: a signal to a process outside the sandbox,
  /// ptrace, a denied syscall.
  Other,
}

impl ViolationKind {
  pub fn as_str(self) -> &'static str {
    match self {
      ViolationKind::Write => "write",
      ViolationKind::Network => "network",
      ViolationKind::Other => "other",
    }
  }
}

/// One likely denial, read from the run's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
  pub kind: ViolationKind,
  /// The path named, absolute (writes).
  pub path: Option<String>,
  /// The error line (at most 300 characters).
  pub message: String,
}

/// The sandbox of one run, as reported in its result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxReport {
  /// The sandbox was in force for the run (false only when `onUnavailable`
  /// let it run without).
  pub applied: bool,
  /// How: `"namespaces+landlock+seccomp"`, `"landlock+seccomp"` (no user
  /// namespaces here), `"seatbelt"` (macOS); empty when not applied.
  pub mechanism: &'static str,
  /// Why the namespaces are missing, where they are.
  pub namespaces_missing: Option<String>,
  /// The paths kept read-only inside the writable roots (`.git`, `protect`).
  pub protected: Vec<PathBuf>,
  /// The kernel's Landlock ABI (0: none).
  pub abi: u32,
  /// Guarantees this kernel cannot give (see [`missing_for`]).
  pub missing: Vec<&'static str>,
  /// Why it was not applied (`onUnavailable: 'warn' | 'run-unsandboxed'`).
  pub warning: Option<String>,
  /// `onUnavailable: 'warn'`: the text of `runCommand` says so.
  pub warn: bool,
  /// The writable paths (the cwd, roots, tmp, devices), resolved.
  pub writable: Vec<PathBuf>,
  pub network: bool,
  pub cwd: PathBuf,
  /// A denial likely explains the failure.
  pub denied: bool,
  pub violations: Vec<Violation>,
}

/// The guarantees a Landlock ABI lacks, by name: `refer` (renames and links
/// across directories, ABI 2), `truncate` (3), `signalScope` and
/// `abstractUnixSockets` (6). With `network` on, `unixSockets` too: the
/// seccomp filter refuses every `socket()` only with network off, and
/// Landlock controls pathname Unix sockets from ABI 9. TCP (4) is not
/// listed: the filter refuses non-Unix sockets on any ABI.
pub fn missing_for(abi: u32, network: bool) -> Vec<&'static str> {
  let mut m = Vec::new();
  if abi < 2 {
    m.push("refer");
  }
  if abi < 3 {
    m.push("truncate");
  }
  if abi < 6 {
    m.push("signalScope");
    m.push("abstractUnixSockets");
  }
  if network && abi < 9 {
    m.push("unixSockets");
  }
  m
}

const FS_PHRASES: &[&str] = &[
  "permission denied",
  "operation not permitted",
  "read-only file system",
  "invalid cross-device link",
  "eacces",
  "eperm",
  "erofs",
  "exdev",
];

/// Errors a program prints when it cannot reach the network.
const NET_PHRASES: &[&str] = &[
  "network is unreachable",
  "enetunreach",
  "eai_again",
  "temporary failure in name resolution",
  "could not resolve host",
  "failed to establish a new connection",
  "fetch failed",
  "getaddrinfo",
  "connect eacces",
  "connect eperm",
  "couldn't connect to server",
  "failed to connect",
  "urlopen error",
];

const MAX_VIOLATIONS: usize = 16;
const SIGSYS: i32 = 31;

impl SandboxReport {
  /// Judge a finished run from its exit and its output (`texts`: stderr
  /// first, then stdout; head and tail of a truncated stream are enough).
  pub fn judge(&mut self, exit_code: i32, signal: Option<&str>, texts: &[&str]) {
    self.denied = false;
    self.violations.clear();
    if !self.applied || (exit_code == 0 && signal.is_none()) {
      return;
    }
    if signal == Some("SIGSYS") || exit_code == 128 + SIGSYS {
      self.push(Violation {
        kind: ViolationKind::Other,
        path: None,
        message: "killed by SIGSYS (a denied system call)".into(),
      });
    } else if exit_code == 126 || exit_code == 127 {
      // not found / not executable: never the sandbox (it controls no exec)
      return;
    }
    for text in texts {
      // a line without a path after one that names a socket (a traceback
      // through socket.py) is a network denial
      let mut socket_near = 0u8;
      for line in text.lines() {
        if self.violations.len() >= MAX_VIOLATIONS {
          break;
        }
        if line.contains("socket") {
          socket_near = 4;
        }
        self.judge_line(line, socket_near > 0);
        socket_near = socket_near.saturating_sub(1);
      }
    }
    self.denied = !self.violations.is_empty();
  }

  fn judge_line(&mut self, line: &str, socket_near: bool) {
    let lower = line.to_ascii_lowercase();
    let net = !self.network && NET_PHRASES.iter().any(|p| lower.contains(p));
    let fs = FS_PHRASES.iter().any(|p| lower.contains(p));
    if !net && !fs {
      return;
    }
    let message: String = line.trim().chars().take(300).collect();
    if net {
      return self.push(Violation {
        kind: ViolationKind::Network,
        path: None,
        message,
      });
    }
    let paths = paths_in(line);
    if paths.is_empty() {
      // no path: a signal, a socket, a syscall
      let kind = if !self.network && (socket_near || lower.contains("connect")) {
        ViolationKind::Network
      } else {
        ViolationKind::Other
      };
      return self.push(Violation {
        kind,
        path: None,
        message,
      });
    }
    for p in paths {
      let abs = normalize(&self.cwd.join(&p));
      // bash's /dev/tcp and /dev/udp are connections, not files
      if abs.starts_with("/dev/tcp") || abs.starts_with("/dev/udp") {
        if !self.network {
          self.push(Violation {
            kind: ViolationKind::Network,
            path: None,
            message: message.clone(),
          });
        }
        continue;
      }
      // another process's /proc entries (gdb, nsenter, a read of its
      // environ): refused by the sandbox's scopes, and not a write
      if abs.starts_with("/proc") && !abs.starts_with("/proc/self") {
        self.push(Violation {
          kind: ViolationKind::Other,
          path: Some(abs.display().to_string()),
          message: message.clone(),
        });
        continue;
      }
      // a symbolic link inside a root that points outside: the write
      // went (or would go) where it points
      let abs = resolved(&abs);
      if self.writable.iter().any(|w| abs.starts_with(w)) || !would_be_writable(&abs) {
        // inside a root, or the user could not write it anyway: a real
        // permission error
        continue;
      }
      self.push(Violation {
        kind: ViolationKind::Write,
        path: Some(abs.display().to_string()),
        message: message.clone(),
      });
    }
  }

  fn push(&mut self, v: Violation) {
    let dup = self.violations.iter().any(|x| {
      x.kind == v.kind && x.path == v.path && (x.path.is_some() || x.message == v.message)
    });
    if !dup && self.violations.len() < MAX_VIOLATIONS {
      self.violations.push(v);
    }
  }

  /// The line `runCommand` appends to its text, or `None` when there is
  /// nothing to say (a sandbox in force and no denial).
  pub fn text_line(&self) -> Option<String> {
    if !self.applied {
      return self.warn.then(|| {
        format!(
          "[sandbox: not applied: {}]",
          self.warning.as_deref().unwrap_or("unavailable")
        )
      });
    }
    if !self.denied {
      return None;
    }
    let roots: Vec<String> = self
      .writable
      .iter()
      .filter(|p| !p.starts_with("/dev") && !p.starts_with("/sys"))
      .map(|p| p.display().to_string())
      .collect();
    let writes = if roots.is_empty() {
      "no writes allowed".to_owned()
    } else {
      format!("writes limited to {}", roots.join(", "))
    };
    let net = if self.network {
      "network on"
    } else {
      "network off"
    };
    let what: Vec<String> = self
      .violations
      .iter()
      .take(3)
      .map(|v| match &v.path {
        Some(p) => format!("'{p}' ({})", reason(&v.message)),
        None => format!("{} ({})", v.kind.as_str(), v.message),
      })
      .collect();
    Some(format!(
      "[sandbox: {writes}; {net}; denied: {}]",
      what.join(", ")
    ))
  }
}

/// The errno text of a line, for the short form.
fn reason(line: &str) -> &'static str {
  let l = line.to_ascii_lowercase();
  if l.contains("read-only file system") || l.contains("erofs") {
    "Read-only file system"
  } else if l.contains("cross-device") || l.contains("exdev") {
    "Invalid cross-device link"
  } else if l.contains("operation not permitted") || l.contains("eperm") {
    "Operation not permitted"
  } else {
    "Permission denied"
  }
}

/// The paths an error line names: quoted ones ('x', "x", ‘x’, `x'), the
/// segment before `: <error>` (bash, sh, cat), and bare absolute ones.
pub fn paths_in(line: &str) -> Vec<String> {
  let mut out: Vec<String> = Vec::new();
  let mut add = |s: &str| {
    let s = s.trim().trim_end_matches([',', '.', ';']);
    let looks_like = !s.is_empty()
      && s.len() < 4096
      && !s.contains(' ')
      && !s.starts_with('[')
      && !s.contains("://")
      && !out.iter().any(|o| o == s);
    if looks_like {
      out.push(s.to_owned());
    }
  };
  // quoted
  let opens = ['\'', '"', '‘', '`', '“'];
  let mut rest = line;
  while let Some(i) = rest.find(opens) {
    let open = rest[i..].chars().next().unwrap_or('\'');
    let close = match open {
      '‘' => '’',
      '“' => '”',
      '`' => '\'',
      c => c,
    };
    let after = &rest[i + open.len_utf8()..];
    match after.find(close) {
      Some(j) => {
        add(&after[..j]);
        rest = &after[j + close.len_utf8()..];
      }
      None => break,
    }
  }
  // `<prefix>: <path>: Permission denied`
  let segs: Vec<&str> = line.split(": ").collect();
  for (k, seg) in segs.iter().enumerate().skip(1) {
    let l = seg.to_ascii_lowercase();
    if FS_PHRASES.iter().any(|p| l.starts_with(p)) {
      let prev = segs[k - 1];
      let prev = prev
        .strip_prefix("cannot create ")
        .or_else(|| prev.strip_prefix("can't create "))
        .unwrap_or(prev);
      let lp = prev.to_ascii_lowercase();
      let not_a_path = prev.contains(['\'', '"', '‘'])
        || prev.starts_with("line ")
        || lp.ends_with("error")
        || FS_PHRASES.iter().any(|p| lp == *p)
        || prev.chars().all(|c| c.is_ascii_digit());
      if !not_a_path {
        add(prev);
      }
    }
  }
  // bare absolute paths, but not the program that prints the error
  // (`/usr/bin/bash: line 1: ...`)
  for (k, tok) in line.split([' ', ',', '(', ')']).enumerate() {
    if k == 0 && tok.ends_with(':') {
      continue;
    }
    let tok = tok.trim_end_matches(':');
    if tok.starts_with('/') && tok.len() > 1 {
      add(tok);
    }
  }
  out
}

/// `.` and `..` resolved without touching the filesystem.
fn normalize(p: &Path) -> PathBuf {
  let mut out = PathBuf::new();
  for c in p.components() {
    match c {
      Component::ParentDir => {
        out.pop();
      }
      Component::CurDir => {}
      other => out.push(other),
    }
  }
  out
}

/// Whether the host's own user could write `p` (or create it in its nearest
/// existing directory): if not, the error was a real permission error.
fn resolved(p: &Path) -> PathBuf {
  resolved_at(p, 16)
}

/// [`resolved`], following at most `hops` dangling links (a loop ends).
fn resolved_at(p: &Path, hops: u32) -> PathBuf {
  if let Ok(r) = p.canonicalize() {
    return r;
  }
  // a dangling link: where it points
  if let Ok(to) = std::fs::read_link(p) {
    let to = p.parent().unwrap_or(Path::new("/")).join(to);
    if to != p && hops > 0 {
      return resolved_at(&normalize(&to), hops - 1);
    }
  }
  // not there (yet): the parent's real path and the name
  match (
    p.parent().and_then(|d| d.canonicalize().ok()),
    p.file_name(),
  ) {
    (Some(d), Some(n)) => d.join(n),
    _ => p.to_path_buf(),
  }
}

fn would_be_writable(p: &Path) -> bool {
  let mut at = Some(p);
  while let Some(q) = at {
    if q.symlink_metadata().is_ok() {
      return crate::platform::is_writable(q);
    }
    at = q.parent();
  }
  false
}

#[cfg(test)]
mod tests {
  use super::*;

  fn report(writable: &[&str], network: bool) -> SandboxReport {
    SandboxReport {
      applied: true,
      abi: 7,
      writable: writable.iter().map(PathBuf::from).collect(),
      network,
      cwd: PathBuf::from(writable.first().copied().unwrap_or("/")),
      ..Default::default()
    }
  }

  #[test]
  fn paths_are_read_from_the_usual_error_shapes() {
    let cases: &[(&str, &[&str])] = &[
      ("bash: line 2: /etc/x: Permission denied", &["/etc/x"]),
      (
        "/usr/bin/bash: line 1: /var/x: Permission denied",
        &["/var/x"],
      ),
      ("bash: line 1: ro.txt: Permission denied", &["ro.txt"]),
      (
        "sh: 1: cannot create /etc/x: Permission denied",
        &["/etc/x"],
      ),
      (
        "touch: cannot touch '/etc/x': Permission denied",
        &["/etc/x"],
      ),
      (
        "mkdir: cannot create directory ‘/etc/d’: Permission denied",
        &["/etc/d"],
      ),
      (
        "PermissionError: [Errno 13] Permission denied: '/etc/x'",
        &["/etc/x"],
      ),
      (
        "Error: EACCES: permission denied, open '/etc/x'",
        &["/etc/x"],
      ),
      (
        "mv: cannot move 'a' to '/etc/b': Permission denied",
        &["a", "/etc/b"],
      ),
      (
        "OSError: [Errno 18] Invalid cross-device link: 'a' -> '/o/b'",
        &["a", "/o/b"],
      ),
    ];
    for (line, want) in cases {
      assert_eq!(
        paths_in(line),
        want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "{line}"
      );
    }
  }

  #[test]
  fn a_write_outside_the_roots_is_a_denial() {
    // the crate's directory: outside the roots (wherever the checkout is,
    // /tmp included), writable by whoever runs the tests
    let here = std::env::current_dir().unwrap();
    let target = here.join("exn-nope/x");
    let mut r = report(&["/exn-roots/work", "/exn-roots/tmp"], false);
    let err = format!(
      "touch: cannot touch '{}': Permission denied\n",
      target.display()
    );
    r.judge(1, None, &[&err]);
    // exn-nope does not exist: its nearest existing directory decides
    assert!(r.denied, "{r:?}");
    assert_eq!(r.violations[0].kind, ViolationKind::Write);
    assert_eq!(
      r.violations[0].path.as_deref(),
      Some(target.to_str().unwrap())
    );
    let line = r.text_line().unwrap();
    let want = format!(
      "[sandbox: writes limited to /exn-roots/work, /exn-roots/tmp; network off; denied: '{}' (Permission denied)]",
      target.display()
    );
    assert_eq!(line, want);
  }

  #[test]
  fn false_positives_are_cut() {
    // inside a root: a real permission error
    let mut r = report(&["/tmp/work"], false);
    r.judge(
      1,
      None,
      &["bash: line 1: /tmp/work/locked: Permission denied"],
    );
    assert!(!r.denied);
    // relative to the cwd, which is a root
    r.judge(1, None, &["touch: cannot touch 'x': Permission denied"]);
    assert!(!r.denied);
    // not a permission error at all
    r.judge(1, None, &["cat: /nonexistent: No such file or directory"]);
    assert!(!r.denied);
    // success, whatever it printed
    r.judge(0, None, &["/etc/x: Permission denied"]);
    assert!(!r.denied);
    // not found / not executable
    r.judge(127, None, &["bash: /etc/x: Permission denied"]);
    assert!(!r.denied);
    // not applied: nothing is judged
    let mut off = report(&["/tmp/work"], false);
    off.applied = false;
    off.judge(
      1,
      None,
      &["touch: cannot touch '/etc/x': Permission denied"],
    );
    assert!(!off.denied && off.text_line().is_none());
  }

  #[test]
  fn network_errors_count_only_with_the_network_off() {
    let mut r = report(&["/w"], false);
    r.judge(6, None, &["curl: (6) Could not resolve host: example.com"]);
    assert!(r.denied);
    assert_eq!(r.violations[0].kind, ViolationKind::Network);
    let mut on = report(&["/w"], true);
    on.judge(6, None, &["curl: (6) Could not resolve host: example.com"]);
    assert!(!on.denied);
    // a socket refused by seccomp names no path
    let mut s = report(&["/w"], false);
    s.judge(
      1,
      None,
      &["PermissionError: [Errno 1] Operation not permitted (socket)"],
    );
    assert_eq!(s.violations[0].kind, ViolationKind::Network);
  }

  #[test]
  fn sigsys_is_a_denial() {
    let mut r = report(&["/w"], false);
    r.judge(159, Some("SIGSYS"), &[""]);
    assert!(r.denied);
    assert_eq!(r.violations[0].kind, ViolationKind::Other);
  }

  #[test]
  fn warn_says_it_was_not_applied() {
    let r = SandboxReport {
      applied: false,
      warn: true,
      warning: Some("Landlock is not enabled in this kernel".into()),
      ..Default::default()
    };
    assert_eq!(
      r.text_line().unwrap(),
      "[sandbox: not applied: Landlock is not enabled in this kernel]"
    );
  }

  #[test]
  fn missing_by_abi() {
    assert_eq!(missing_for(7, true), vec!["unixSockets"]);
    assert_eq!(missing_for(7, false), Vec::<&str>::new());
    assert_eq!(missing_for(9, true), Vec::<&str>::new());
    assert!(
      missing_for(1, false).contains(&"refer") && missing_for(5, false).contains(&"signalScope")
    );
  }

  #[test]
  fn dev_tcp_is_network_proc_is_other_and_a_symlink_counts_where_it_points() {
    let dir = std::env::temp_dir().join(format!("exn-report-{}", std::process::id()));
    let out = std::env::temp_dir().join(format!("exn-report-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let _ = std::fs::remove_file(dir.join("link"));
    std::os::unix::fs::symlink(out.join("target"), dir.join("link")).unwrap();
    let mut r = SandboxReport {
      applied: true,
      cwd: dir.clone(),
      writable: vec![dir.clone()],
      ..Default::default()
    };
    r.judge(
      1,
      None,
      &["bash: /dev/tcp/127.0.0.1/9: Operation not permitted\nnsenter: cannot open /proc/1/ns/ipc: Permission denied\nbash: link: Read-only file system\n"],
    );
    let kinds: Vec<_> = r
      .violations
      .iter()
      .map(|v| (v.kind, v.path.clone()))
      .collect();
    assert_eq!(
      kinds,
      vec![
        (ViolationKind::Network, None),
        (ViolationKind::Other, Some("/proc/1/ns/ipc".into())),
        (
          ViolationKind::Write,
          Some(out.join("target").display().to_string())
        ),
      ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
  }
}
