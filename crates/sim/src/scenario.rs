//! The scenario file (`stowage.dev/scenario/v1`, docs/formats.md §4): manifests, settings and a list of
//! steps (apply, delete, scale, advance, settle, expect), and how it is read.
//!
//! Loading resolves everything a run needs before the run starts: manifest files are read (relative to
//! the scenario file) and typed, the catalog and weights are loaded, durations parsed. A bad file fails
//! here with the file and the field (`steps[3].expect.nodes[0].count: ...`), never half-way through a
//! simulation.
//!
//! Files come through [`Files`]: the disk, or the seed scenarios compiled into the binary
//! ([`Embedded`]), so `stowage simulate` runs its defaults from any directory.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::time::Dur;
use stowage_core::domain::catalog::Catalog;
use stowage_core::solve::Solver;
use stowage_core::weights::Weights;
use stowage_input::catalog;
use stowage_input::objects::{self, Objects};
use stowage_input::read::{self, RawObject};

pub const SCHEMA: &str = "stowage.dev/scenario/v1";

/// A problem with a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub field: Option<String>,
    pub message: String,
}

impl ScenarioError {
    pub(crate) fn new(file: &Path, field: Option<String>, message: impl Into<String>) -> Self {
        ScenarioError { file: file.display().to_string(), field, message: message.into() }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

// ---------------------------------------------------------------------------------------------------
// Where files come from.

/// Why a file a scenario names cannot be had. The caller adds the scenario file, the field and the
/// path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read: {0}")]
    Read(#[from] std::io::Error),
    #[error("not among the files embedded in stowage (read the scenario from disk instead)")]
    NotEmbedded,
    /// A manifest path that is neither a file nor a folder of manifests (the reader's message).
    #[error("{0}")]
    Manifests(String),
}

/// Reads the files a scenario names.
pub trait Files {
    fn read(&self, path: &Path) -> Result<String, FileError>;

    /// The manifest files a path stands for: itself, or for a folder its YAML and JSON files.
    fn manifests(&self, path: &Path) -> Result<Vec<PathBuf>, FileError> {
        Ok(vec![path.to_path_buf()])
    }
}

/// The file system.
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> Result<String, FileError> {
        Ok(std::fs::read_to_string(path)?)
    }

    fn manifests(&self, path: &Path) -> Result<Vec<PathBuf>, FileError> {
        read::expand_paths(&[path.to_path_buf()]).map_err(|e| FileError::Manifests(e.message))
    }
}

/// The bundled seed scenarios and every file they reference, compiled in.
pub struct Embedded;

macro_rules! embed {
    ($($path:literal),* $(,)?) => { &[$(($path, include_str!(concat!("../../../", $path)))),*] };
}

/// Repository-relative path → contents.
pub(crate) const EMBEDDED_FILES: &[(&str, &str)] = embed![
    "scenarios/common-ec2nodeclass.yaml",
    "scenarios/seed-1-statefulset-capacity-spread/scenario.yaml",
    "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml",
    "scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml",
    "scenarios/seed-1-statefulset-capacity-spread/storageclass.yaml",
    "scenarios/seed-1b-statefulset-zonal-rescale/scenario.yaml",
    "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml",
    "scenarios/seed-1b-statefulset-zonal-rescale/statefulset.yaml",
    "scenarios/seed-1b-statefulset-zonal-rescale/storageclass.yaml",
    "scenarios/seed-1c-stuck-on-existing-nodes/scenario.yaml",
    "scenarios/seed-1c-stuck-on-existing-nodes/state.yaml",
    "scenarios/seed-2-apiserver-anti-affinity/scenario.yaml",
    "scenarios/seed-2-apiserver-anti-affinity/companions.yaml",
    "scenarios/seed-2-apiserver-anti-affinity/deployment.yaml",
    "scenarios/seed-2-apiserver-anti-affinity/nodepool.yaml",
];

/// The scenarios `stowage simulate` runs without arguments, in order.
pub(crate) const SEED_SCENARIOS: &[&str] = &[
    "scenarios/seed-1-statefulset-capacity-spread/scenario.yaml",
    "scenarios/seed-1b-statefulset-zonal-rescale/scenario.yaml",
    "scenarios/seed-1c-stuck-on-existing-nodes/scenario.yaml",
    "scenarios/seed-2-apiserver-anti-affinity/scenario.yaml",
];

impl Files for Embedded {
    fn read(&self, path: &Path) -> Result<String, FileError> {
        let want = normalize(path);
        EMBEDDED_FILES.iter().find(|(p, _)| Path::new(p) == want).map(|(_, text)| text.to_string()).ok_or(FileError::NotEmbedded)
    }
}

/// Removes `.` and folds `a/..` lexically (the embedded table has no symlinks to respect).
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// The file as written.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScenarioFile {
    schema: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    manifests: Vec<Value>,
    #[serde(default)]
    settings: SettingsFile,
    #[serde(default)]
    steps: Vec<StepFile>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SettingsFile {
    solver: Option<Solver>,
    catalog: Option<String>,
    weights: Option<String>,
    time_budget: Option<Dur>,
    batch_idle: Option<Dur>,
    batch_max: Option<Dur>,
    launch_delay: Option<Dur>,
    launch_jitter: Option<Dur>,
    registration_delay: Option<Dur>,
    /// Spelled as docs/formats.md and Karpenter spell it; `unavailableOfferingTtl` (what serde's
    /// camelCase made of the field, accepted before) stays an alias.
    #[serde(rename = "unavailableOfferingTTL", alias = "unavailableOfferingTtl")]
    unavailable_offering_ttl: Option<Dur>,
    consolidation: Option<bool>,
    #[serde(default)]
    fail_offerings: Vec<FailOffering>,
    /// The calendar time the scenario starts at (RFC 3339), for disruption budget schedules.
    start: Option<String>,
}

/// Launches the cloud refuses with InsufficientInstanceCapacity. Unset fields match anything.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailOffering {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    /// How many matching launches fail; unset = every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

impl FailOffering {
    pub fn matches(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.instance_type.as_deref().is_none_or(|t| t == instance_type) && self.zone.as_deref().is_none_or(|z| z == zone) && self.capacity_type.as_deref().is_none_or(|c| c == capacity_type)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StepFile {
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    apply: Option<Vec<Value>>,
    #[serde(default)]
    delete: Option<ObjectRef>,
    #[serde(default)]
    scale: Option<Scale>,
    #[serde(default)]
    advance: Option<Dur>,
    #[serde(default)]
    settle: Option<SettleFile>,
    #[serde(default)]
    expect: Option<Expect>,
    #[serde(default)]
    interrupt: Option<Interrupt>,
}

/// An interruption message for one node (the first registered node, by name, that matches every field
/// given), as EventBridge would put it on the interruption queue; the controller's shared decision
/// (`stowage_decide::interruption`) handles it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Interrupt {
    #[serde(default)]
    pub message: InterruptMessage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
}

/// The interruption message kinds an `interrupt` step can send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum InterruptMessage {
    /// EC2 Spot Instance Interruption Warning.
    #[default]
    SpotInterruption,
    /// EC2 Instance Rebalance Recommendation.
    RebalanceRecommendation,
    /// AWS Health Event, EC2 scheduledChange.
    ScheduledChange,
    /// EC2 Instance State-change Notification, state stopping.
    InstanceStopping,
    /// EC2 Instance State-change Notification, state shutting-down.
    InstanceTerminating,
}

impl InterruptMessage {
    pub fn kind(self) -> stowage_decide::interruption::Kind {
        use stowage_decide::interruption::Kind;
        match self {
            InterruptMessage::SpotInterruption => Kind::SpotInterrupted,
            InterruptMessage::RebalanceRecommendation => Kind::RebalanceRecommendation,
            InterruptMessage::ScheduledChange => Kind::ScheduledChange,
            InterruptMessage::InstanceStopping => Kind::InstanceStopped,
            InterruptMessage::InstanceTerminating => Kind::InstanceTerminated,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SettleFile {
    max: Option<Dur>,
}

/// An object named by a step.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scale {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub replicas: i32,
}

/// What must hold at an `expect` step. Every field is optional; the ones given are all checked.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Pods waiting for a node (unbound, alive, not DaemonSet pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_pods: Option<usize>,
    /// Pods bound and Running, DaemonSet pods excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_pods: Option<usize>,
    /// Node counts, each over the nodes matching its filter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeCount>,
    /// Instances launched since the previous `expect` step (failed launches excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<usize>,
    /// Provisioning batches since the previous `expect` step that launched at least one instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_batches: Option<usize>,
    /// Provisioning batches (planner runs) since the previous `expect` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<usize>,
    /// Consolidation decisions (underutilised nodes) carried out since the previous `expect` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidations: Option<usize>,
    /// Matching pods per topology domain, as a multiset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainCounts>,
    /// max − min of the matching pods per topology domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skew: Vec<SkewBound>,
    /// Every bound pod's node satisfies the node affinity of each of its bound volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_in_volume_zones: Option<bool>,
    /// PersistentVolumeClaims bound to a volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_claims: Option<usize>,
    /// Sum of the hourly prices of the instances running now (launched or pre-existing nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<Range>,
}

/// Nodes matching every given field; `count` is how many there must be.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeCount {
    pub count: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "labels")]
    pub labels: BTreeMap<String, String>,
    /// Launched by the simulated provisioner since the previous `expect` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<bool>,
    /// Exactly this many workload pods (DaemonSet pods excluded) are bound to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<usize>,
    /// The node holds these pods (`namespace/name`), and maybe others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// The node's instance type is among the cheapest its NodePool allows in its zone and capacity
    /// type that fit the pods it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cheapest: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DomainCounts {
    pub key: String,
    #[serde(deserialize_with = "labels")]
    pub selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Pods per domain, in any order. The domains are the values of `key` over the registered nodes.
    pub counts: Vec<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkewBound {
    pub key: String,
    #[serde(deserialize_with = "labels")]
    pub selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub max: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Range {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

/// Label maps whose values may be written unquoted (`capacity-spread: 1`), as people do.
fn labels<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let m = BTreeMap::<String, Value>::deserialize(d)?;
    m.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            Value::Number(n) => Ok((k, n.to_string())),
            Value::Bool(b) => Ok((k, b.to_string())),
            other => Err(serde::de::Error::custom(format!("label {k}: expected a string, got {other}"))),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------------
// The resolved scenario.

/// Timing and behaviour of the simulated cluster, with defaults filled in.
#[derive(Clone, Debug)]
pub struct Settings {
    pub solver: Solver,
    /// Whether the scenario chose the solver (a command-line choice overrides only the default).
    pub solver_from_file: bool,
    pub catalog: Catalog,
    pub catalog_name: String,
    pub weights: Weights,
    /// MILP time budget per batch.
    pub time_budget: Duration,
    /// Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION.
    pub batch_idle: Duration,
    pub batch_max: Duration,
    /// From the NodeClaim's creation to the instance running: `launch_delay` plus a deterministic
    /// share of `launch_jitter` per instance.
    pub launch_delay: Duration,
    pub launch_jitter: Duration,
    /// From the instance running to its Node registering.
    pub registration_delay: Duration,
    /// How long an offering that failed with insufficient capacity stays unavailable (Karpenter's
    /// unavailable-offerings cache: 3 minutes).
    pub unavailable_offering_ttl: Duration,
    pub consolidation: bool,
    pub fail_offerings: Vec<FailOffering>,
    /// The calendar time of simulated time zero, in Unix seconds (`start`): disruption budgets with a
    /// `schedule` apply within their windows. `None`: the simulated clock has no calendar and a
    /// scheduled budget always applies (the stricter reading).
    pub start: Option<i64>,
}

#[derive(Clone, Debug)]
pub enum Action {
    Apply(Box<Objects>),
    Delete(ObjectRef),
    Scale(Scale),
    Advance(Duration),
    Settle(Duration),
    Expect(Box<Expect>),
    Interrupt(Interrupt),
}

#[derive(Clone, Debug)]
pub struct Step {
    /// 1-based, as people count steps.
    pub number: usize,
    pub note: Option<String>,
    pub action: Action,
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Where it was read from, for messages.
    pub file: String,
    /// Applied at time 0, before the first step.
    pub manifests: Objects,
    pub settings: Settings,
    pub steps: Vec<Step>,
    /// Objects of kinds stowage does not simulate (skipped).
    pub warnings: Vec<String>,
}

pub(crate) const DEFAULT_SETTLE_MAX: Duration = Duration::from_secs(30 * 60);
/// The longest simulated time one step may span (`advance`, `settle.max`): past a node's default
/// expiry (720h) with room, far below what would keep the event loop busy for minutes (`advance: 20y`).
pub(crate) const MAX_STEP: Duration = Duration::from_secs(90 * 24 * 3600);
/// The most simulated time a whole scenario may span (its `advance` steps and the `max` of its `settle`
/// steps): a year, so that many 90-day steps cannot add up to an unbounded run.
pub(crate) const MAX_TOTAL: Duration = Duration::from_secs(366 * 24 * 3600);
/// The most replicas a `scale` step may ask for: the pods limit of a batch (`stowage_input::Limits`).
const MAX_SCALE: u64 = stowage_input::limits::DEFAULT_MAX_PODS as u64;
/// The shortest refused-offering TTL: shorter ones make a cloud that refuses every launch a busy loop of
/// batches that each pick the same offering again (Karpenter's TTL is 3 minutes).
const MIN_OFFERING_TTL: Duration = Duration::from_secs(1);

/// A step's span of simulated time, at most [`MAX_STEP`].
fn check_span(path: &Path, field: &str, d: Duration) -> Result<(), ScenarioError> {
    if d > MAX_STEP {
        return Err(ScenarioError::new(
            path,
            Some(field.to_string()),
            format!("{} is more than the simulator's limit of 90 days per step; split it into several steps", humantime::format_duration(d)),
        ));
    }
    Ok(())
}

/// The scenario's simulated time so far plus a step's span, at most [`MAX_TOTAL`].
fn check_total(path: &Path, field: &str, so_far: Duration, d: Duration) -> Result<Duration, ScenarioError> {
    let total = so_far.saturating_add(d);
    if total > MAX_TOTAL {
        return Err(ScenarioError::new(
            path,
            Some(field.to_string()),
            format!("takes the scenario to {} of simulated time, past the simulator's limit of 366 days per scenario; shorten the advance and settle steps", humantime::format_duration(total)),
        ));
    }
    Ok(total)
}

/// Loads a scenario file and everything it references.
pub fn load(path: &Path, files: &dyn Files) -> Result<Scenario, ScenarioError> {
    let text = files.read(path).map_err(|e| ScenarioError::new(path, None, e.to_string()))?;
    parse(path, &text, files)
}

/// Parses a scenario's text; relative paths in it are resolved against `path`'s folder.
pub fn parse(path: &Path, text: &str, files: &dyn Files) -> Result<Scenario, ScenarioError> {
    let err = |field: Option<String>, msg: String| ScenarioError::new(path, field, msg);
    let value: Value = serde_saphyr::from_str(text).map_err(|e| err(None, format!("invalid YAML: {e}")))?;
    if !value.is_object() {
        return Err(err(None, "a scenario is a mapping with schema, name and steps".into()));
    }
    let f: ScenarioFile = serde_path_to_error::deserialize(&value).map_err(|e| {
        let p = e.path().to_string();
        err((p != ".").then_some(p), e.into_inner().to_string())
    })?;
    if f.schema != SCHEMA {
        return Err(err(Some("schema".into()), format!("expected {SCHEMA:?}, got {:?}", f.schema)));
    }
    if f.name.trim().is_empty() {
        return Err(err(Some("name".into()), "must not be empty".into()));
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut warnings = Vec::new();
    let manifests = objects_of(path, &dir, "manifests", &f.manifests, files, &mut warnings)?;
    let settings = settings(path, &dir, f.settings, files)?;
    if f.steps.is_empty() {
        return Err(err(Some("steps".into()), "a scenario needs at least one step".into()));
    }
    let mut steps = Vec::new();
    let mut total = Duration::ZERO;
    for (i, s) in f.steps.into_iter().enumerate() {
        let field = format!("steps[{i}]");
        let mut given: Vec<&str> = Vec::new();
        for (name, set) in [
            ("apply", s.apply.is_some()),
            ("delete", s.delete.is_some()),
            ("scale", s.scale.is_some()),
            ("advance", s.advance.is_some()),
            ("settle", s.settle.is_some()),
            ("expect", s.expect.is_some()),
            ("interrupt", s.interrupt.is_some()),
        ] {
            if set {
                given.push(name);
            }
        }
        if given.len() != 1 {
            return Err(err(
                Some(field),
                format!(
                    "a step needs exactly one of apply, delete, scale, advance, settle, expect ({})",
                    if given.is_empty() { "none given".to_string() } else { format!("found {}", given.join(", ")) }
                ),
            ));
        }
        let mut actions = Vec::with_capacity(1);
        if let Some(a) = s.apply {
            if a.is_empty() {
                return Err(err(Some(format!("{field}.apply")), "lists no files or objects".into()));
            }
            actions.push(Action::Apply(Box::new(objects_of(path, &dir, &format!("{field}.apply"), &a, files, &mut warnings)?)));
        }
        if let Some(d) = s.delete {
            check_kind(path, &format!("{field}.delete.kind"), &d.kind, DELETABLE)?;
            actions.push(Action::Delete(d));
        }
        if let Some(sc) = s.scale {
            check_kind(path, &format!("{field}.scale.kind"), &sc.kind, SCALABLE)?;
            if sc.replicas < 0 {
                return Err(err(Some(format!("{field}.scale.replicas")), format!("must be at least 0, got {}", sc.replicas)));
            }
            if sc.replicas as u64 > MAX_SCALE {
                return Err(err(
                    Some(format!("{field}.scale.replicas")),
                    format!("{} is more than the simulator's limit of {MAX_SCALE} replicas (the pods of a batch, docs/formats.md §1)", sc.replicas),
                ));
            }
            actions.push(Action::Scale(sc));
        }
        if let Some(d) = s.advance {
            check_span(path, &format!("{field}.advance"), d.0)?;
            total = check_total(path, &format!("{field}.advance"), total, d.0)?;
            actions.push(Action::Advance(d.0));
        }
        if let Some(st) = s.settle {
            let max = st.max.map(|d| d.0).unwrap_or(DEFAULT_SETTLE_MAX);
            check_span(path, &format!("{field}.settle.max"), max)?;
            total = check_total(path, &format!("{field}.settle.max"), total, max)?;
            actions.push(Action::Settle(max));
        }
        if let Some(e) = s.expect {
            validate_expect(path, &format!("{field}.expect"), &e)?;
            actions.push(Action::Expect(Box::new(e)));
        }
        if let Some(i) = s.interrupt {
            actions.push(Action::Interrupt(i));
        }
        let Some(action) = actions.pop() else { return Err(err(Some(field), "a step needs an action".into())) };
        steps.push(Step { number: i + 1, note: s.note, action });
    }
    Ok(Scenario { name: f.name, description: f.description.trim().to_string(), file: path.display().to_string(), manifests, settings, steps, warnings })
}

/// Kinds a `delete` step may name, and those a `scale` step may.
pub(crate) const DELETABLE: &[&str] = &["Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Node", "NodePool", "PersistentVolumeClaim", "PersistentVolume", "StorageClass"];
pub(crate) const SCALABLE: &[&str] = &["Deployment", "ReplicaSet", "StatefulSet"];

fn check_kind(path: &Path, field: &str, kind: &str, allowed: &[&str]) -> Result<(), ScenarioError> {
    if allowed.contains(&kind) { Ok(()) } else { Err(ScenarioError::new(path, Some(field.into()), format!("unsupported kind {kind:?} ({})", allowed.join(", ")))) }
}

fn validate_expect(path: &Path, field: &str, e: &Expect) -> Result<(), ScenarioError> {
    let err = |f: String, m: &str| ScenarioError::new(path, Some(f), m.to_string());
    for (i, d) in e.domains.iter().enumerate() {
        if d.key.is_empty() {
            return Err(err(format!("{field}.domains[{i}].key"), "must not be empty"));
        }
    }
    for (i, s) in e.skew.iter().enumerate() {
        if s.key.is_empty() {
            return Err(err(format!("{field}.skew[{i}].key"), "must not be empty"));
        }
        if s.max < 0 {
            return Err(err(format!("{field}.skew[{i}].max"), "must be at least 0"));
        }
    }
    if let Some(r) = &e.cost_per_hour {
        if r.min.is_none() && r.max.is_none() {
            return Err(err(format!("{field}.costPerHour"), "give min, max or both"));
        }
        if let (Some(a), Some(b)) = (r.min, r.max)
            && a > b
        {
            return Err(err(format!("{field}.costPerHour"), "min is larger than max"));
        }
    }
    for (i, n) in e.nodes.iter().enumerate() {
        for (j, h) in n.holds.iter().enumerate() {
            if !h.contains('/') {
                return Err(err(format!("{field}.nodes[{i}].holds[{j}]"), "name pods as namespace/name"));
            }
        }
    }
    Ok(())
}

fn settings(path: &Path, dir: &Path, s: SettingsFile, files: &dyn Files) -> Result<Settings, ScenarioError> {
    let (catalog, catalog_name) = match &s.catalog {
        None => (catalog::default_catalog().clone(), "embedded aws-us-east-1".to_string()),
        Some(rel) => {
            let p = normalize(&dir.join(rel));
            let text = files.read(&p).map_err(|e| ScenarioError::new(path, Some("settings.catalog".into()), format!("{}: {e}", p.display())))?;
            let c = catalog::parse(&p.display().to_string(), &text).map_err(|e| ScenarioError::new(path, Some("settings.catalog".into()), e.to_string()))?;
            (c, p.display().to_string())
        }
    };
    let weights = match &s.weights {
        None => Weights::default(),
        Some(rel) => {
            let p = normalize(&dir.join(rel));
            let text = files.read(&p).map_err(|e| ScenarioError::new(path, Some("settings.weights".into()), format!("{}: {e}", p.display())))?;
            Weights::parse(&p.display().to_string(), &text).map_err(|e| ScenarioError::new(path, Some("settings.weights".into()), e.to_string()))?
        }
    };
    let d = |v: Option<Dur>, default: u64| v.map(|x| x.0).unwrap_or(Duration::from_millis(default));
    let start = match s.start.as_deref() {
        None => None,
        Some(t) => Some(
            t.trim()
                .parse::<k8s_openapi::jiff::Timestamp>()
                .map_err(|e| ScenarioError::new(path, Some("settings.start".into()), format!("invalid time {t:?}: {e} (use RFC 3339, e.g. 2027-01-15T08:00:00Z)")))?
                .as_second(),
        ),
    };
    let out = Settings {
        solver: s.solver.unwrap_or(Solver::Milp),
        solver_from_file: s.solver.is_some(),
        catalog,
        catalog_name,
        weights,
        time_budget: d(s.time_budget, 1_000),
        batch_idle: d(s.batch_idle, 1_000),
        batch_max: d(s.batch_max, 10_000),
        launch_delay: d(s.launch_delay, 30_000),
        launch_jitter: d(s.launch_jitter, 30_000),
        registration_delay: d(s.registration_delay, 15_000),
        unavailable_offering_ttl: d(s.unavailable_offering_ttl, 180_000),
        consolidation: s.consolidation.unwrap_or(true),
        fail_offerings: s.fail_offerings,
        start,
    };
    if out.batch_idle.is_zero() || out.batch_max < out.batch_idle {
        return Err(ScenarioError::new(path, Some("settings.batchIdle".into()), "batchIdle must be positive and at most batchMax"));
    }
    if out.time_budget.is_zero() {
        return Err(ScenarioError::new(path, Some("settings.timeBudget".into()), "must be positive"));
    }
    if out.unavailable_offering_ttl < MIN_OFFERING_TTL {
        return Err(ScenarioError::new(path, Some("settings.unavailableOfferingTTL".into()), "must be at least 1s (Karpenter's is 3m)"));
    }
    Ok(out)
}

/// Reads a list of manifest entries: a string is a file (relative to the scenario), a mapping an
/// inline Kubernetes object (or a `List`).
fn objects_of(path: &Path, dir: &Path, field: &str, entries: &[Value], files: &dyn Files, warnings: &mut Vec<String>) -> Result<Objects, ScenarioError> {
    let mut raws: Vec<RawObject> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let f = format!("{field}[{i}]");
        match e {
            Value::String(rel) => {
                let p = normalize(&dir.join(rel));
                let mut found = Vec::new();
                for file in files.manifests(&p).map_err(|e| ScenarioError::new(path, Some(f.clone()), format!("{}: {e}", p.display())))? {
                    let text = files.read(&file).map_err(|e| ScenarioError::new(path, Some(f.clone()), format!("{}: {e}", file.display())))?;
                    found.extend(read::parse_text(&file, &text).map_err(|e| ScenarioError::new(path, Some(f.clone()), e.to_string()))?);
                }
                if found.is_empty() {
                    return Err(ScenarioError::new(path, Some(f), format!("{}: holds no Kubernetes object", p.display())));
                }
                raws.extend(found);
            }
            Value::Object(_) => {
                // The object is reported as coming from "<scenario> <field>", so an error in it names
                // both the file and the step.
                let pseudo = PathBuf::from(format!("{} {f}", path.display()));
                let text = serde_json::to_string(e).map_err(|x| ScenarioError::new(path, Some(f.clone()), x.to_string()))?;
                raws.extend(read::parse_text(&pseudo, &text).map_err(|x| ScenarioError::new(path, Some(f.clone()), x.to_string()))?);
            }
            other => {
                return Err(ScenarioError::new(path, Some(f), format!("expected a file path or an inline object, got {other}")));
            }
        }
    }
    let (objects, w, errors) = objects::type_all(&raws);
    if let Some(e) = errors.first() {
        let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
        return Err(ScenarioError::new(path, Some(field.to_string()), format!("{e}{more}")));
    }
    // The simulator's controllers expand these, so a `replicas: 2000000000` in a manifest is refused
    // here, on its object and field, as `stowage plan` refuses it.
    stowage_input::expand::check_counts(&objects, MAX_SCALE as usize).map_err(|e| ScenarioError::new(path, Some(field.to_string()), e.to_string()))?;
    warnings.extend(w);
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Scenario, ScenarioError> {
        parse(Path::new("scenarios/x/scenario.yaml"), text, &Embedded)
    }

    #[test]
    fn every_seed_scenario_parses() {
        for s in SEED_SCENARIOS {
            let sc = load(Path::new(s), &Embedded).unwrap_or_else(|e| panic!("{e}"));
            assert!(!sc.steps.is_empty());
            assert!(sc.warnings.is_empty(), "{s}: {:?}", sc.warnings);
        }
    }

    /// Simulated time and sizes are capped on the step that asks for them (issue 20: `advance: 20y`
    /// ran for 19.5 s, a 1 ms offering TTL and a million replicas for minutes).
    #[test]
    fn hostile_steps_are_refused_on_their_field() {
        let head = "schema: stowage.dev/scenario/v1\nname: x\n";
        let cases = [
            ("steps:\n- advance: 1s\n- advance: 20y\n", "steps[1].advance", "90 days"),
            ("steps:\n- settle: {max: 100d}\n", "steps[0].settle.max", "90 days"),
            ("steps:\n- scale: {kind: Deployment, name: a, replicas: 1000000}\n", "steps[0].scale.replicas", "limit of 150000"),
            ("settings: {unavailableOfferingTTL: 1ms}\nsteps: [{advance: 1s}]\n", "settings.unavailableOfferingTTL", "at least 1s"),
            ("settings: {start: friday}\nsteps: [{advance: 1s}]\n", "settings.start", "RFC 3339"),
            ("steps:\n- advance: 90d\n- advance: 90d\n- settle: {max: 90d}\n- advance: 90d\n- advance: 7d\n", "steps[4].advance", "366 days"),
            (
                "manifests:\n- {apiVersion: apps/v1, kind: Deployment, metadata: {name: big}, spec: {replicas: 2000000000, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}}\nsteps: [{advance: 1s}]\n",
                "manifests",
                "spec.replicas",
            ),
            (
                "steps:\n- apply: [{apiVersion: apps/v1, kind: Deployment, metadata: {name: neg}, spec: {replicas: -5, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}}]\n",
                "steps[0].apply",
                "at least 0",
            ),
        ];
        for (text, field, part) in cases {
            let e = parse_str(&format!("{head}{text}")).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
            assert!(e.to_string().contains(part), "{e}");
        }
        assert!(parse_str(&format!("{head}steps:\n- advance: 90d\n")).is_ok(), "90 days is the limit, accepted");
    }

    /// `start` puts the simulated clock on the calendar (budget schedules); without it there is none.
    #[test]
    fn the_start_is_a_calendar_time() {
        let head = "schema: stowage.dev/scenario/v1\nname: x\n";
        let sc = parse_str(&format!("{head}settings: {{start: \"2027-01-15T08:00:00Z\"}}\nsteps: [{{advance: 1s}}]\n")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sc.settings.start, Some(1_800_000_000 - 1_800_000_000 % 86_400 + 8 * 3600));
        assert_eq!(parse_str(&format!("{head}steps: [{{advance: 1s}}]\n")).unwrap().settings.start, None);
    }

    /// docs/formats.md spells the TTL `unavailableOfferingTTL`; the spelling accepted before stays an alias.
    #[test]
    fn the_offering_ttl_is_spelled_as_documented() {
        let head = "schema: stowage.dev/scenario/v1\nname: x\n";
        for key in ["unavailableOfferingTTL", "unavailableOfferingTtl"] {
            let sc = parse_str(&format!("{head}settings: {{{key}: 7m}}\nsteps: [{{advance: 1s}}]\n")).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(sc.settings.unavailable_offering_ttl, Duration::from_secs(420), "{key}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- scale: {kind: StatefulSet, name: a, replicas: many}\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("steps[0].scale.replicas"), "{e}");
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- advance: 3 minutes please\n").unwrap_err();
        assert!(e.to_string().contains("steps[0].advance") && e.to_string().contains("invalid duration"), "{e}");
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- {advance: 1s, settle: {}}\n").unwrap_err();
        assert!(e.to_string().contains("exactly one"), "{e}");
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- expect: {nodez: []}\n").unwrap_err();
        assert!(e.to_string().contains("steps[0].expect") && e.to_string().contains("nodez"), "{e}");
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nmanifests: [missing.yaml]\nsteps: [{advance: 1s}]\n").unwrap_err();
        assert!(e.to_string().contains("manifests[0]") && e.to_string().contains("scenarios/x/missing.yaml"), "{e}");
        let e = parse_str("schema: v0\nname: x\nsteps: [{advance: 1s}]\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("schema"));
        let e = parse_str("schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- delete: {kind: Secret, name: s}\n").unwrap_err();
        assert!(e.to_string().contains("steps[0].delete.kind"), "{e}");
    }

    #[test]
    fn inline_objects_report_their_step() {
        let text = "schema: stowage.dev/scenario/v1\nname: x\nsteps:\n- apply:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: 7}}\n";
        let e = parse_str(text).unwrap_err().to_string();
        assert!(e.contains("steps[0].apply") && e.contains("spec.containers"), "{e}");
    }

    #[test]
    fn normalize_folds_parent_dirs() {
        assert_eq!(normalize(Path::new("scenarios/a/../common.yaml")), PathBuf::from("scenarios/common.yaml"));
        assert_eq!(normalize(Path::new("./x/./y")), PathBuf::from("x/y"));
    }
}
