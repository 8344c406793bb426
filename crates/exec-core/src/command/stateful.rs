//! Stateful mode: the calls of a runner share one shell state, so `cd`,
//! `export`, variables, functions, aliases and shell options carry over
//! from one command to the next, as in one terminal.
//!
//! Each command still runs in its own `bash -c`, with everything the
//! stateless mode has (the timeout moves it to the background, `&` jobs are
//! taken over with their output, cancel kills the tree, the sandbox, the
//! parent-death signal). The state travels through a file: the command's
//! script first sources the runner's state file, and its EXIT trap writes
//! the shell's state (cwd, variables, functions, aliases, options) to a file
//! of its own. The runner makes that the state only when the command ended
//! in the foreground: a command that moved to the background, was cancelled
//! or killed changes nothing, and no two commands ever race for the state.
//!
//! Why not one long-lived bash ([`crate::session::ShellSession`]): a command
//! that outlives its timeout would block that shell for every later call; a
//! timeout there stops the command by killing every process of the shell's
//! group, `&` jobs of earlier calls (a dev server) included; and `&` jobs
//! write into the shell's own pipes, so their output could not be told from
//! a later command's.

use std::fs::OpenOptions;
#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{ErrorCode, ExecError};
use crate::language::ansi_c_quote;

/// Writes the shell's state to `$__exec_out` (an EXIT trap: also after
/// `exit N`, whose status it keeps). Variables that belong to bash, to one
/// process (`EXEC_NATIVE_*`: the run's mark) or are read-only are left out.
const SAVE: &str = r#"__exec_save() {
  \builtin local __exec_o __exec_s __exec_v __exec_k=' ' __exec_t=
  [[ $- == *x* ]] && __exec_t=1
  __exec_o=$(\builtin set +o); __exec_s=$(\builtin shopt -p)
  \builtin set +o xtrace +o errexit +o nounset +o pipefail
  {
    \builtin printf '\\builtin cd -- %q 2>/dev/null\n' "$PWD"
    for __exec_v in $(\builtin compgen -v); do
      # every variable that exists is kept from the unset at restore (PWD too)
      __exec_k+="$__exec_v "
      case $__exec_v in
        __exec_*|EXEC_NATIVE_*|BASH|BASH_*|BASHOPTS|BASHPID|EUID|PPID|UID|SHELLOPTS|SHLVL|RANDOM|SRANDOM|SECONDS|LINENO|HISTCMD|FUNCNAME|PIPESTATUS|GROUPS|DIRSTACK|EPOCHREALTIME|EPOCHSECONDS|COMP_WORDBREAKS|PWD|OLDPWD|_) continue ;;
      esac
      [[ ${!__exec_v@a} == *r* ]] && continue
      \builtin declare -p "$__exec_v" 2>/dev/null
    done
    \builtin printf '__exec_keep=%q\n' "$__exec_k"
    for __exec_v in $(\builtin compgen -A function); do
      [[ $__exec_v == __exec_* ]] || \builtin declare -f "$__exec_v"
    done
    \builtin alias -p
    \builtin printf '%s\n' "$__exec_s" "$__exec_o" '\builtin set +o xtrace' "__exec_trace=$__exec_t"
  } > "$__exec_out.tmp" 2>/dev/null && \command mv -f "$__exec_out.tmp" "$__exec_out"
}
"#;

/// Unsets the exported variables a command had unset (the environment of
/// each run brings them back otherwise).
const RESTORE_UNSET: &str = r#"if [[ -n ${__exec_keep-} ]]; then
  for __exec_v in $(\builtin compgen -e); do
    case $__exec_keep in *" $__exec_v "*) ;; *) [[ $__exec_v == EXEC_NATIVE_* ]] || \builtin unset "$__exec_v" ;; esac
  done
fi
"#;

/// The shared state of a stateful runner: a file in its output directory.
#[derive(Debug)]
pub struct ShellState {
  path: PathBuf,
  next: AtomicU64,
}

/// One command's script, and where it leaves its state.
#[derive(Debug)]
pub struct StatefulRun {
  pub script: String,
  pub out: PathBuf,
}

impl ShellState {
  /// Create an empty state file (mode 0600) in `dir`.
  pub fn create(dir: &Path) -> Result<Self, ExecError> {
    loop {
      let path = dir.join(format!("exec-native-state-{:016x}.sh", fastrand::u64(..)));
      let mut o = OpenOptions::new();
      o.write(true).create_new(true);
      // the user's only: mode 0600 (on Windows, the temp folder's access list)
      #[cfg(unix)]
      o.mode(0o600);
      match o.open(&path) {
        Ok(_) => {
          return Ok(ShellState {
            path,
            next: AtomicU64::new(1),
          })
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
        Err(e) => {
          return Err(ExecError::new(
            ErrorCode::EIO,
            format!(
              "cannot create the shell's state file in {}: {e}",
              dir.display()
            ),
          ))
        }
      }
    }
  }

  pub fn path(&self) -> &Path {
    &self.path
  }

  /// `command` in the shared state: the state restored first (the cwd
  /// unless `cd` names the call's own directory, which then is a `cd` that
  /// carries over), its state saved when it exits.
  pub fn wrap(&self, command: &str, cd: Option<&Path>) -> StatefulRun {
    let n = self.next.fetch_add(1, Ordering::Relaxed);
    let out = PathBuf::from(format!("{}.{n}", self.path.display()));
    let q = |p: &Path| ansi_c_quote(&p.display().to_string());
    let mut script = String::with_capacity(command.len() + SAVE.len() + 512);
    script.push_str("\\builtin shopt -s expand_aliases\n");
    script.push_str(&format!(
      "__exec_out={}\n[[ -s {} ]] && . {} >/dev/null 2>&1\n",
      q(&out),
      q(&self.path),
      q(&self.path)
    ));
    script.push_str(RESTORE_UNSET);
    if let Some(dir) = cd {
      script.push_str(&format!("\\builtin cd -- {}\n", q(dir)));
    }
    script.push_str(SAVE);
    // `set -x` of an earlier call traces the command, not this preamble
    script.push_str("trap __exec_save EXIT\n[[ -n ${__exec_trace-} ]] && \\builtin set -x\n");
    script.push_str(command);
    script.push('\n');
    StatefulRun { script, out }
  }

  /// `command` started from the shared state (an interactive one), which it
  /// does not change; `cd`: the call's own directory.
  pub fn wrap_read_only(&self, command: &str, cd: Option<&Path>) -> String {
    let q = |p: &Path| ansi_c_quote(&p.display().to_string());
    let mut script = format!(
      "\\builtin shopt -s expand_aliases\n[[ -s {0} ]] && . {0} >/dev/null 2>&1\n",
      q(&self.path)
    );
    script.push_str(RESTORE_UNSET);
    if let Some(dir) = cd {
      script.push_str(&format!("\\builtin cd -- {}\n", q(dir)));
    }
    script.push_str("[[ -n ${__exec_trace-} ]] && \\builtin set -x\n");
    script.push_str(command);
    script.push('\n');
    script
  }

  /// The command ended in the foreground: its state is the state now.
  pub fn commit(&self, run: &StatefulRun) {
    if std::fs::rename(&run.out, &self.path).is_err() {
      let _ = std::fs::remove_file(&run.out);
    }
  }

  /// The command's state is not taken (it moved to the background, was
  /// cancelled): its file goes, now or when it is written.
  pub fn discard(&self, run: &StatefulRun) {
    let _ = std::fs::remove_file(&run.out);
  }

  /// Remove the state file and what runs left.
  pub fn remove(&self) {
    let _ = std::fs::remove_file(&self.path);
    if let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) {
      let prefix = format!("{}.", name.to_string_lossy());
      if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
          if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
          }
        }
      }
    }
  }
}

/// Stateful mode writes the state from inside the command's sandbox: its
/// directory must be writable there.
pub fn check_writable(
  dir: &Path,
  sandbox: Option<&crate::process::sandbox::SandboxPolicy>,
  cwd: &Path,
) -> Result<(), ExecError> {
  let Some(sb) = sandbox else { return Ok(()) };
  let real = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
  let ok = sb
    .writable_paths(cwd)?
    .iter()
    .any(|r| r.is_dir() && real.starts_with(r));
  if ok {
    Ok(())
  } else {
    Err(ExecError::invalid(format!(
      "stateful mode keeps the shell's state in {}, which the sandbox does not let commands write (a read-only sandbox, or /tmp excluded: give an output directory under a writable root)",
      dir.display()
    )))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  async fn run(state: &ShellState, cmd: &str, cd: Option<&Path>) -> (String, i32) {
    let r = state.wrap(cmd, cd);
    let out = tokio::process::Command::new("bash")
      .arg("-c")
      .arg(&r.script)
      .output()
      .await
      .unwrap();
    state.commit(&r);
    (
      String::from_utf8_lossy(&out.stdout).into_owned(),
      out.status.code().unwrap_or(-1),
    )
  }

  #[tokio::test]
  async fn cd_export_functions_aliases_and_options_carry_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = ShellState::create(dir.path()).unwrap();
    let sub = dir.path().join("sub dir");
    std::fs::create_dir(&sub).unwrap();
    let (_, code) = run(
      &state,
      &format!(
        "cd {}; export A='x y'; B=(1 2); greet() {{ echo hi $1; }}; alias ll='echo aliased'; set -o pipefail; unset HOME; exit 3",
        ansi_c_quote(&sub.display().to_string())
      ),
      None,
    )
    .await;
    assert_eq!(code, 3, "exit keeps its status");
    let (out, code) = run(
      &state,
      "pwd; echo \"$A\" ${B[1]}; bash -c 'echo $A'; greet you; ll; shopt -qo pipefail && echo pf; echo ${HOME-unset}",
      None,
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(
      out,
      format!(
        "{}\nx y 2\nx y\nhi you\naliased\npf\nunset\n",
        sub.display()
      )
    );
    // a call's own directory is a cd that carries over
    let (out, _) = run(&state, "pwd", Some(dir.path())).await;
    assert_eq!(out, format!("{}\n", dir.path().display()));
    let (out, _) = run(&state, "pwd", None).await;
    assert_eq!(out, format!("{}\n", dir.path().display()));
    // a run whose state is discarded changes nothing
    let r = state.wrap("cd /", None);
    let _ = tokio::process::Command::new("bash")
      .arg("-c")
      .arg(&r.script)
      .output()
      .await;
    state.discard(&r);
    let (out, _) = run(&state, "pwd", None).await;
    assert_eq!(out, format!("{}\n", dir.path().display()));
    state.remove();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
  }
}
