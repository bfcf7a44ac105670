//! The one place that needs `unsafe`: a `pre_exec` hook so that a server we
//! start dies with us even when we are killed without running destructors.
#![allow(unsafe_code)]

use std::process::Command;

/// Makes the child get SIGQUIT (PostgreSQL's immediate shutdown) when the
/// thread that spawned it exits; see [`crate::keeper`] for why that thread
/// is long-lived. A no-op outside Linux.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;

    use nix::sys::prctl;
    use nix::sys::signal::Signal;
    use nix::unistd::getppid;

    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child between fork and exec, where
    // only async-signal-safe operations are allowed. It makes two plain
    // syscalls (prctl, getppid), does not allocate (errno-based io::Errors
    // carry no heap data) and touches no locks or shared state. std applies
    // setgid/setuid before running it, and setuid does not clear the death
    // signal, so it stays in force for the unprivileged server.
    unsafe {
        cmd.pre_exec(move || {
            prctl::set_pdeathsig(Signal::SIGQUIT).map_err(std::io::Error::from)?;
            // If we died between fork and prctl the signal was never sent;
            // the child has been reparented, so give up instead of leaking.
            if u32::try_from(getppid().as_raw()).ok() != Some(parent) {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_cmd: &mut Command) {}
