//! End-to-end test harness: a real Kubernetes control plane, the moto EC2 emulator, and stand-ins for
//! the two things a real cluster has that the test machine does not (kubelets and a CSI provisioner).
//!
//! ```no_run
//! # async fn demo() -> Result<(), stowage_e2e::Error> {
//! use stowage_e2e::{ControlPlane, Kubelet, Moto, VolumeProvisioner};
//! let (cp, moto) = tokio::try_join!(ControlPlane::start("my-test"), Moto::start("my-test"))?;
//! let kubelet = Kubelet::start(cp.client(), moto.ec2());
//! let volumes = VolumeProvisioner::start(cp.client());
//! // ... create NodeClaims, launch instances, assert on what the real kube-scheduler does ...
//! volumes.stop().await;
//! kubelet.stop().await;
//! moto.stop().await?;
//! cp.stop().await?;
//! # Ok(()) }
//! ```
//!
//! - [`ControlPlane`] runs `tests/control-plane/build.sh` and `cluster.sh start` in its own run dir
//!   (`target/e2e/<name>/cluster`) on its own five ports, installs Karpenter v1.14.1's own NodePool,
//!   NodeClaim and EC2NodeClass CRDs and returns a `kube::Client`. [`Moto`] does the same for `tests/moto/moto.sh` and prepares a VPC, three subnets and a
//!   security group tagged for discovery.
//! - [`KarpenterOperator`] runs Karpenter's own operator with its KWOK cloud provider against a control
//!   plane (its CRDs, its log under `target/e2e/<name>/karpenter/`); [`Kubelet::start_kwok`] plays the
//!   kubelets of the Nodes it creates.
//! - [`nodeadm_reads`] runs nodeadm's own user-data parser and validation (`peers/nodeadm/check.sh`) on
//!   the user data a launch template carries.
//! - Processes never outlive the test: each component has a watchdog (`bash -c 'read; <script> stop'`
//!   in its own process group) whose stdin is a pipe held by the test process. Dropping the handle, an
//!   explicit `stop`, a panic or even `SIGKILL` of the test binary close the pipe, and the watchdog stops
//!   the component.
//! - A run dir is locked (`flock`) while in use, so two test binaries (or two engineers) running the same
//!   test name wait for each other instead of sharing a cluster.
//!
//! Everything here returns [`Error`]; nothing panics on an expected failure (a missing Go toolchain, a
//! port in use, an API error). Timing numbers and what the stand-ins do not do: `docs/control-plane.md`.

mod control_plane;
mod faults;
mod karpenter;
mod kubelet;
mod moto;
mod nodeadm;
mod process;
mod volumes;

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use control_plane::{ControlPlane, install_crd_dir, karpenter_aws_crds};
pub use faults::{CapacityError, RandomFaults};
pub use karpenter::{InstanceTypes, KarpenterConfig, KarpenterOperator, OperatorBuild};
pub use kubelet::{KWOK_PROVIDER_PREFIX, Kubelet, KubeletConfig, UNREGISTERED_TAINT_KEY};
pub use moto::{DISCOVERY_TAG_KEY, DISCOVERY_TAG_VALUE, Moto, NODE_ROLE, Network, REGION, ZONES};
pub use nodeadm::{nodeadm_checker, nodeadm_reads};
pub use volumes::{PROVISIONED_BY_ANNOTATION, SELECTED_NODE_ANNOTATION, STORAGE_PROVISIONER_ANNOTATION, VolumeProvisioner, VolumeProvisionerConfig};

/// An error of the harness, with enough context to say which step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error("{script} {command} failed ({status}); log {log}; last output:\n{tail}")]
    Script { script: String, command: String, status: String, log: String, tail: String },
    #[error("{what}: {error}")]
    Kube { what: String, error: kube::Error },
    #[error("{what}: {error}")]
    Kubeconfig { what: String, error: kube::config::KubeconfigError },
    #[error("{what}: {message}")]
    Aws { what: String, message: String },
    #[error("timed out after {:.1}s waiting for {what}; last seen: {last}", after.as_secs_f64())]
    Timeout { what: String, after: Duration, last: String },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(what: impl Into<String>, error: std::io::Error) -> Self {
        Error::Io { what: what.into(), error }
    }

    pub fn kube(what: impl Into<String>, error: kube::Error) -> Self {
        Error::Kube { what: what.into(), error }
    }

    pub fn aws<E>(what: impl Into<String>, error: E) -> Self
    where
        E: std::error::Error + 'static,
    {
        Error::Aws { what: what.into(), message: aws_sdk_ec2::error::DisplayErrorContext(&error).to_string() }
    }

    /// True for a Kubernetes API `NotFound` answer.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube { error: kube::Error::Api(s), .. } if s.code == 404)
    }
}

/// `true` if a kube error is the API server's 404.
pub(crate) fn kube_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// `true` if a kube error is the API server's 409 AlreadyExists (or a conflict).
pub(crate) fn kube_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// One answer of a probe polled by [`poll_until`].
#[derive(Debug)]
pub enum Probe<T> {
    /// The condition holds; polling stops with this value.
    Done(T),
    /// Not yet; the text describes what was seen (it ends up in the timeout error).
    Waiting(String),
}

/// Polls `probe` every `interval` until it answers [`Probe::Done`], it fails (the error is returned at
/// once), or `timeout` has passed ([`Error::Timeout`] with the last [`Probe::Waiting`] text).
pub async fn poll_until<T, F, Fut>(what: impl Into<String>, timeout: Duration, interval: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Probe<T>>>,
{
    let what = what.into();
    let start = Instant::now();
    loop {
        let last = match probe().await? {
            Probe::Done(v) => return Ok(v),
            Probe::Waiting(last) => last,
        };
        if start.elapsed() >= timeout {
            return Err(Error::Timeout { what, after: start.elapsed(), last });
        }
        tokio::time::sleep(interval).await;
    }
}

/// The repository root (where `tests/control-plane` and `tests/moto` live).
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Where run dirs go: `$STOWAGE_E2E_DIR`, else `<repo>/target/e2e`.
pub fn e2e_root() -> PathBuf {
    match std::env::var_os("STOWAGE_E2E_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo_root().join("target").join("e2e"),
    }
}

/// Test names become directory names: keep them simple.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || c == '.') && !name.starts_with('.');
    if ok { Ok(()) } else { Err(Error::Invalid(format!("e2e name {name:?}: use 1-64 characters from [a-z0-9._-], not starting with '.'"))) }
}

/// `now` as the API server writes timestamps.
pub(crate) fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}
