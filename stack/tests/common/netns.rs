//! Network namespaces for the root-only tests: made with `ip`, entered by a thread (threads
//! it starts inherit it), deleted on drop.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

/// Runs `ip ARGS`, failing the test if it fails.
pub fn ip(args: &[&str]) {
    run("ip", args);
}

/// Runs a command, failing the test if it fails.
pub fn run(cmd: &str, args: &[&str]) {
    let s = Command::new(cmd).args(args).status().expect(cmd);
    assert!(s.success(), "{cmd} {args:?} failed");
}

/// A network namespace (with its loopback up), deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// `srnic-TAG<pid>`.
    pub fn new(tag: &str) -> Netns {
        let ns = format!("srnic-{tag}{}", std::process::id() % 100_000);
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        Netns(ns)
    }

    /// `ip -n NS ARGS`.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Moves the calling thread into the namespace.
    pub fn enter(&self) {
        enter(&self.0);
    }
}

/// Moves the calling thread into namespace `ns`.
pub fn enter(ns: &str) {
    let f = File::open(format!("/var/run/netns/{ns}")).expect("netns");
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .expect("setns");
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}
