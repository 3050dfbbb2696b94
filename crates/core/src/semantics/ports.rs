//! NodePorts (`nodeports/node_ports.go`).
//!
//! ```text
//! conflict(a, b) = a.protocol == b.protocol ∧ a.port == b.port
//!                ∧ (a.ip == b.ip ∨ a.ip == 0.0.0.0 ∨ b.ip == 0.0.0.0)
//! filter: no wanted host port conflicts with one already used on the node.
//! ```

use crate::domain::pod::HostPort;

use super::{Plugin, Reject};

pub const ANY_IP: &str = "0.0.0.0";

pub fn conflict(a: &HostPort, b: &HostPort) -> bool {
    a.protocol == b.protocol && a.port == b.port && (a.ip == b.ip || a.ip == ANY_IP || b.ip == ANY_IP)
}

pub fn filter(used: &[HostPort], wanted: &[HostPort]) -> Result<(), Reject> {
    if wanted.iter().any(|w| used.iter().any(|u| conflict(u, w))) { Err(Reject::new(Plugin::NodePorts, "node(s) didn't have free ports for the requested pod ports")) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(ip: &str, port: i32) -> HostPort {
        HostPort { protocol: "TCP".into(), ip: ip.into(), port }
    }

    #[test]
    fn wildcard_ip_conflicts_with_any_ip() {
        assert!(conflict(&hp("0.0.0.0", 80), &hp("10.0.0.1", 80)));
        assert!(!conflict(&hp("10.0.0.2", 80), &hp("10.0.0.1", 80)));
        assert!(!conflict(&hp("0.0.0.0", 80), &hp("0.0.0.0", 81)));
        let udp = HostPort { protocol: "UDP".into(), ip: "0.0.0.0".into(), port: 80 };
        assert!(!conflict(&hp("0.0.0.0", 80), &udp));
        assert!(filter(&[hp("0.0.0.0", 80)], &[hp("1.2.3.4", 80)]).is_err());
    }
}
