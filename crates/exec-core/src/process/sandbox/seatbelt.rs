//! macOS: the sandbox as a Seatbelt profile run by `/usr/bin/sandbox-exec`,
//! in the shape codex uses (`codex-rs/sandboxing/src/seatbelt.rs`): deny by
//! default; reads allowed; writes only under the writable roots, passed as
//! `-D WRITABLE_ROOT_<i>=<path>` parameters (never spliced into the profile
//! text); network off unless asked for. `sandbox-exec` is taken from
//! `/usr/bin` only, never from the PATH.
//!
//! The profile is generated on every platform (so it is unit-tested here);
//! only macOS runs it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{SandboxMode, SandboxPolicy};

/// The one `sandbox-exec` used.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// What every profile allows: processes of the sandbox, reads, the device
/// files, terminals, and the system services a libc needs.
const BASE: &str = r#"(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow file-read*)
(allow file-write-data file-ioctl
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/full") (literal "/dev/tty")
  (regex #"^/dev/ttys[0-9]+$"))
(allow pseudo-tty)
(allow sysctl-read)
(allow ipc-posix-sem)
(allow ipc-posix-shm-read-data)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.system.notification_center"))
"#;

/// The profile and the `-D` parameters for `policy` with these writable
/// roots (already resolved: Seatbelt matches real paths, `/private/tmp`
/// rather than `/tmp`).
pub fn profile(policy: &SandboxPolicy, roots: &[PathBuf]) -> (String, Vec<(String, PathBuf)>) {
  let mut text = String::from(BASE);
  let mut params = Vec::new();
  if policy.mode == SandboxMode::WorkspaceWrite && !roots.is_empty() {
    text.push_str("(allow file-write*");
    for (i, r) in roots.iter().enumerate() {
      let name = format!("WRITABLE_ROOT_{i}");
      text.push_str(&format!("\n  (subpath (param \"{name}\"))"));
      params.push((name, r.clone()));
    }
    text.push_str(")\n");
    // the last matching rule wins: `.git` anywhere under a root (hooks and
    // config run later, unsandboxed), and the `protect` paths, stay
    // read-only, as the mount namespace keeps them on Linux
    text.push_str("(deny file-write*\n  (regex #\"/\\.git(/|$)\")");
    for (i, p) in policy.protect.iter().enumerate() {
      let name = format!("PROTECT_{i}");
      text.push_str(&format!("\n  (subpath (param \"{name}\"))"));
      params.push((name, p.clone()));
    }
    text.push_str(")\n");
  }
  if policy.network {
    text.push_str("(allow network*)\n(allow system-socket)\n(allow mach-lookup (global-name \"com.apple.dnssd.service\"))\n");
  }
  (text, params)
}

/// The writable roots of `policy` in `cwd` for Seatbelt: the device files
/// are in the base profile; the rest resolved to real paths.
pub fn roots(policy: &SandboxPolicy, cwd: &Path) -> Result<Vec<PathBuf>, crate::error::ExecError> {
  let mut out: Vec<PathBuf> = policy
    .writable_paths(cwd)?
    .into_iter()
    .filter(|p| !p.starts_with("/dev"))
    .map(|p| p.canonicalize().unwrap_or(p))
    .collect();
  out.dedup();
  Ok(out)
}

/// `sandbox-exec -p <profile> -D WRITABLE_ROOT_0=<root> ... -- <program> <args>`.
pub fn wrap(
  policy: &SandboxPolicy,
  roots: &[PathBuf],
  program: &Path,
  args: &[OsString],
) -> (PathBuf, Vec<OsString>) {
  let (text, params) = profile(policy, roots);
  let mut argv: Vec<OsString> = vec!["-p".into(), text.into()];
  for (name, path) in params {
    argv.push("-D".into());
    let mut kv = OsString::from(format!("{name}="));
    kv.push(path.as_os_str());
    argv.push(kv);
  }
  argv.push("--".into());
  argv.push(program.as_os_str().to_owned());
  argv.extend(args.iter().cloned());
  (PathBuf::from(SANDBOX_EXEC), argv)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn workspace_write_names_each_root_by_parameter() {
    let roots = vec![PathBuf::from("/repo"), PathBuf::from("/private/tmp")];
    let (text, params) = profile(&SandboxPolicy::default(), &roots);
    assert!(text.starts_with("(version 1)\n(deny default)\n"));
    assert!(text.contains("(subpath (param \"WRITABLE_ROOT_0\"))"));
    assert!(text.contains("(subpath (param \"WRITABLE_ROOT_1\"))"));
    // the paths are parameters, never profile text
    assert!(!text.contains("/repo"));
    assert_eq!(
      params[0],
      ("WRITABLE_ROOT_0".to_owned(), PathBuf::from("/repo"))
    );
    assert!(!text.contains("(allow network*)"));
    // .git under a root is denied after the roots are allowed
    let allow = text.find("(allow file-write*").unwrap();
    let deny = text.find("(deny file-write*").unwrap();
    assert!(deny > allow);
    assert!(text[deny..].contains(r#"(regex #"/\.git(/|$)")"#));
    // the parentheses balance
    let depth = text.chars().fold(0i32, |d, c| match c {
      '(' => d + 1,
      ')' => d - 1,
      _ => d,
    });
    assert_eq!(depth, 0);
  }

  #[test]
  fn protect_paths_are_denied_by_parameter() {
    let p = SandboxPolicy {
      protect: vec![PathBuf::from("/repo/secrets")],
      ..Default::default()
    };
    let (text, params) = profile(&p, &[PathBuf::from("/repo")]);
    assert!(text.contains("(subpath (param \"PROTECT_0\"))"));
    assert!(!text.contains("/repo/secrets"));
    assert!(params.contains(&("PROTECT_0".to_owned(), PathBuf::from("/repo/secrets"))));
  }

  #[test]
  fn read_only_writes_nothing_but_devices_and_network_is_opt_in() {
    let ro = SandboxPolicy {
      mode: SandboxMode::ReadOnly,
      network: true,
      ..Default::default()
    };
    let (text, params) = profile(&ro, &[PathBuf::from("/repo")]);
    assert!(params.is_empty());
    assert!(!text.contains("(allow file-write*"));
    assert!(text.contains("(literal \"/dev/null\")"));
    assert!(text.contains("(allow network*)"));
  }

  #[test]
  fn the_command_runs_behind_usr_bin_sandbox_exec() {
    let (prog, argv) = wrap(
      &SandboxPolicy::default(),
      &[PathBuf::from("/repo")],
      Path::new("/bin/sh"),
      &["-c".into(), "true".into()],
    );
    assert_eq!(prog, PathBuf::from("/usr/bin/sandbox-exec"));
    assert_eq!(argv[0], "-p");
    assert_eq!(argv[2], "-D");
    assert_eq!(argv[3], "WRITABLE_ROOT_0=/repo");
    assert_eq!(&argv[4..], &["--", "/bin/sh", "-c", "true"]);
  }
}
