//! The restriction of a sandboxed command, shared by its two users:
//! - the helper program `exec-native-sandbox` (`main.rs`), which restricts
//!   itself inside its namespaces and then execs the command;
//! - exec-core, which prepares the same restriction in the host
//!   ([`restrict::Prepared::new`]: the Landlock ruleset, the seccomp
//!   programs) and has the spawned child apply it between `clone` and
//!   `execve` ([`restrict::Prepared::apply`]: system calls only), where no
//!   namespace is wanted. No task of the host ever applies it to itself.
//!
//! And the protocol by which the host hands runs to the helper it keeps
//! running ([`zygote`]).

#[cfg(target_os = "linux")]
pub mod filter;
#[cfg(target_os = "linux")]
pub mod restrict;
#[cfg(target_os = "linux")]
pub mod zygote;
