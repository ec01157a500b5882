//! Client "machines" on one host: network namespaces, each with its own
//! address on a bridge in the test's own namespace. The bridge's address
//! is the host's: servers listening on it (or on every address) are
//! reached there from every namespace. Needs root (`ip netns`).

use std::process::Command;

/// `count` namespaces `PREFIX-0`… on the bridge `PREFIX-br`, addressed
/// `10.203.SUBNET.2`…, the host `10.203.SUBNET.1`. Deleted, by name,
/// when dropped (their veths go with them).
#[derive(Debug)]
pub struct ClientNamespaces {
    prefix: String,
    subnet: u8,
    count: usize,
}

/// `ip ARGS`, its stderr when it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl ClientNamespaces {
    /// Makes them (after deleting any a killed test left); the reason
    /// when they cannot be made (not root, no `ip netns`).
    pub fn new(prefix: &str, subnet: u8, count: usize) -> Result<ClientNamespaces, String> {
        let lab = ClientNamespaces {
            prefix: prefix.to_string(),
            subnet,
            count,
        };
        lab.delete();
        let bridge = lab.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{}/24", lab.host()), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..count {
            let ns = lab.name(i);
            let (host_if, own_if) = (format!("{prefix}-h{i}"), format!("{prefix}-c{i}"));
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &own_if, "netns", &ns,
            ])?;
            ip(&["link", "set", &host_if, "master", &bridge, "up"])?;
            let own = format!("{}/24", lab.address(i));
            ip(&["-n", &ns, "addr", "add", &own, "dev", &own_if])?;
            ip(&["-n", &ns, "link", "set", &own_if, "up"])?;
        }
        Ok(lab)
    }

    fn bridge(&self) -> String {
        format!("{}-br", self.prefix)
    }

    /// Namespace `i`'s name.
    pub fn name(&self, i: usize) -> String {
        format!("{}-{i}", self.prefix)
    }

    /// Namespace `i`'s own address.
    pub fn address(&self, i: usize) -> String {
        format!("10.203.{}.{}", self.subnet, i + 2)
    }

    /// The host's address, as every namespace reaches it.
    pub fn host(&self) -> String {
        format!("10.203.{}.1", self.subnet)
    }

    /// `program` to run inside namespace `i`.
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name(i), program]);
        cmd
    }

    fn delete(&self) {
        for i in 0..self.count {
            let _ = ip(&["netns", "del", &self.name(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

impl Drop for ClientNamespaces {
    fn drop(&mut self) {
        self.delete();
    }
}
