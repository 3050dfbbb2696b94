//! Workload input: Kubernetes YAML or JSON as `kubectl get -o yaml` writes it, into a domain
//! [`Cluster`]. Reads files; no network, no Kubernetes client.
//!
//! Steps: read files (folders recursively) → flatten Lists → type each object (k8s-openapi, stowage's
//! Karpenter types) → expand controllers into pods and claims → resolve volumes → convert to domain
//! types. Every error names the file, the object and the field; unknown kinds are skipped with a
//! warning.

pub mod api;
pub mod catalog;
pub mod convert;
pub mod expand;
pub mod export;
pub mod ids;
pub mod karpenter;
pub mod limits;
pub mod objects;
pub mod output;
pub mod pending;
pub mod quantity;
pub mod read;
pub mod spread_defaults;
pub mod unsupported;
pub mod volumes;
pub mod weights;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use stowage_core::domain::cluster::{Cluster, DaemonSet};
use stowage_core::domain::labels::{Labels, keys};
use stowage_core::domain::pod::{Owner, VolumeNeeds};
use stowage_core::semantics::spread_defaults::SpreadDefaults;

pub use limits::Limits;
pub use objects::Objects;
pub use pending::Selection;
pub use read::Source;

/// A problem with the input, located as precisely as possible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub location: String,
    pub object: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        InputError { location: file.display().to_string(), object: None, field: None, message: message.into() }
    }

    pub fn at(source: &Source, object: Option<String>, field: Option<&str>, message: impl Into<String>) -> Self {
        InputError { location: source.to_string(), object, field: field.map(str::to_string), message: message.into() }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.location)?;
        if let Some(o) = &self.object {
            write!(f, ": {o}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All problems found in a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError(pub Vec<InputError>);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// A loaded workload: the domain snapshot, the typed objects after controller expansion (for export
/// and for the simulator) and warnings.
#[derive(Clone, Debug)]
pub struct Workload {
    pub cluster: Cluster,
    pub objects: Objects,
    pub warnings: Vec<String>,
    /// Pods that cannot be scheduled as written (a missing or invalid claim, StorageClass or bound
    /// PersistentVolume, an invalid spec), one error each naming file, object and field. They are in
    /// `cluster` all the same, pending with the reason (`VolumeNeeds::blocked`, `Pod::invalid`), so the
    /// rest of the batch is planned and they are reported unschedulable.
    pub rejected: Vec<InputError>,
    /// Controllers whose pod template is invalid (reported once on the controller; their pods are in
    /// `rejected` too).
    pub invalid_templates: Vec<InputError>,
    /// Unbound pods the batch leaves out because kube-scheduler has not given up on them
    /// ([`pending::planned`]), as `Pod namespace/name`.
    pub skipped: Vec<String>,
    /// Which unbound pods the batch plans.
    pub selection: Selection,
}

impl Workload {
    /// The workload if nothing in it was rejected, else the errors: `--strict`, what a CI check wants
    /// (the template errors alone when there are any, as they explain their pods' errors).
    pub fn strict(self) -> Result<Workload, LoadError> {
        if !self.invalid_templates.is_empty() {
            return Err(LoadError(self.invalid_templates));
        }
        if !self.rejected.is_empty() {
            return Err(LoadError(self.rejected));
        }
        Ok(self)
    }

    /// The same objects with another choice of which unbound pods to plan (`--all-unbound`), under the
    /// same cluster-default spread.
    pub fn reselect(self, selection: Selection) -> Result<Workload, LoadError> {
        let defaults = self.cluster.spread_defaults.clone();
        let Batch { cluster, rejected, skipped } = build_under(&self.objects, selection, &defaults).map_err(LoadError)?;
        Ok(Workload { cluster, rejected, skipped, selection, ..self })
    }

    /// The same objects under another cluster-default topology spread (the weights'
    /// `topologySpreadDefaults`, or the one a plan records); the same selection of pods. Loading applies
    /// kube-scheduler's default, `System`.
    pub fn with_spread_defaults(self, defaults: &SpreadDefaults) -> Result<Workload, LoadError> {
        if *defaults == self.cluster.spread_defaults {
            return Ok(self);
        }
        let Batch { cluster, rejected, skipped } = build_under(&self.objects, self.selection, defaults).map_err(LoadError)?;
        Ok(Workload { cluster, rejected, skipped, ..self })
    }
}

/// Loads files and folders with the default [`Limits`].
pub fn load(paths: &[PathBuf]) -> Result<Workload, LoadError> {
    load_with(paths, &Limits::default())
}

/// Loads files and folders; all files together may hold at most `limits.max_input_bytes` bytes
/// (decompressed) and `limits.max_pods` pods.
pub fn load_with(paths: &[PathBuf], limits: &Limits) -> Result<Workload, LoadError> {
    let files = read::expand_paths(paths).map_err(|e| LoadError(vec![e]))?;
    let mut texts = Vec::new();
    let mut left = limits.max_input_bytes;
    for f in files {
        let text = read::read_text_limited(&f, left).map_err(|e| LoadError(vec![e]))?;
        left -= text.len() as u64;
        texts.push((f, text));
    }
    load_texts_with(texts.iter().map(|(f, t)| (f.as_path(), t.as_str())), limits)
}

/// Loads in-memory documents, each with the name it is reported under, with the default [`Limits`].
pub fn load_texts<'a>(texts: impl IntoIterator<Item = (&'a Path, &'a str)>) -> Result<Workload, LoadError> {
    load_texts_with(texts, &Limits::default())
}

/// Loads in-memory documents, each with the name it is reported under. Errors: the parser's
/// (budgets), then typing, duplicates and templates (all collected), then expansion (replicas and
/// the pods limit), then conversion.
pub fn load_texts_with<'a>(texts: impl IntoIterator<Item = (&'a Path, &'a str)>, limits: &Limits) -> Result<Workload, LoadError> {
    let texts: Vec<(&Path, &str)> = texts.into_iter().collect();
    let names: Vec<String> = texts.iter().map(|(f, _)| f.display().to_string()).collect();
    // Large JSON texts are counted before they are parsed, so that a batch far past the pods limit is
    // refused in a second and a few megabytes rather than after building every object.
    let precounted: usize = texts.iter().filter(|(f, t)| t.len() >= read::PRECOUNT_BYTES && read::is_json(f, t)).filter_map(|(_, t)| read::count_json_pods(t)).sum();
    if precounted > limits.max_pods {
        return Err(LoadError(vec![too_many_pods(&names, precounted, limits)]));
    }
    // Objects are typed as each file (or large List item) is read, so that a large batch is never held
    // both as parsed documents and as typed objects.
    let mut typer = objects::Typer::default();
    let mut errors = Vec::new();
    let (mut objects_read, mut listed_pods) = (0usize, 0usize);
    for (file, text) in &texts {
        let typed_before = typer.error_count();
        let r = read::for_each_object(file, text, limits, &mut |raw| {
            objects_read += 1;
            listed_pods += usize::from(raw.kind == "Pod");
            // Past the pods limit the batch is refused below: typing more would only take memory.
            if listed_pods <= limits.max_pods {
                typer.add(&raw);
            }
        });
        if let Err(e) = r {
            typer.forget_errors_after(typed_before);
            errors.push(e);
        }
    }
    if errors.is_empty() && objects_read == 0 {
        let files = if names.is_empty() { "no files".to_string() } else { names.join(", ") };
        return Err(LoadError(vec![InputError {
            location: files,
            object: None,
            field: None,
            message: "no Kubernetes objects: the workload is empty (name the files that hold the pods, nodes and NodePools)".into(),
        }]));
    }
    if listed_pods > limits.max_pods {
        return Err(LoadError(vec![too_many_pods(&names, listed_pods, limits)]));
    }
    let (mut objects, warnings, type_errors) = typer.finish();
    errors.extend(type_errors);
    errors.extend(objects::duplicates(&objects));
    if !errors.is_empty() {
        return Err(LoadError(errors));
    }
    let invalid_templates = check_templates(&objects);
    expand::expand(&mut objects, limits.max_pods).map_err(|e| LoadError(vec![e]))?;
    let Batch { cluster, rejected, skipped } = build_batch(&objects).map_err(LoadError)?;
    Ok(Workload { cluster, objects, warnings, rejected, invalid_templates, skipped, selection: Selection::default() })
}

/// The error of a batch with more pods than `limits.max_pods`.
fn too_many_pods(files: &[String], n: usize, limits: &Limits) -> InputError {
    InputError {
        location: files.join(", "),
        object: None,
        field: None,
        message: format!("{n} pods, more than the limit of {} pods per batch; plan the workload in smaller batches, or raise the limit with --max-pods", limits.max_pods),
    }
}

/// Converts every controller's pod template once, before expansion, so that an invalid template is
/// reported on the controller and its `spec.template.spec...` field, once, rather than on each pod the
/// controller would create (pods and fields that are not in the file). Volumes are resolved per pod
/// later: StatefulSets add their claims only when they expand.
fn check_templates(o: &Objects) -> Vec<InputError> {
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    let mut templates: Vec<(&Source, String, &ObjectMeta, Option<&PodTemplateSpec>)> = Vec::new();
    for d in &o.deployments {
        templates.push((&d.source, "Deployment".into(), &d.obj.metadata, d.obj.spec.as_ref().map(|s| &s.template)));
    }
    for r in &o.replicasets {
        templates.push((&r.source, "ReplicaSet".into(), &r.obj.metadata, r.obj.spec.as_ref().and_then(|s| s.template.as_ref())));
    }
    for s in &o.statefulsets {
        templates.push((&s.source, "StatefulSet".into(), &s.obj.metadata, s.obj.spec.as_ref().map(|s| &s.template)));
    }
    for j in &o.jobs {
        templates.push((&j.source, "Job".into(), &j.obj.metadata, j.obj.spec.as_ref().map(|s| &s.template)));
    }
    let none = BTreeMap::new();
    let mut errors = Vec::new();
    for (source, kind, md, template) in templates {
        let Some(template) = template else { continue };
        let ns = md.namespace.clone().unwrap_or_else(|| "default".into());
        let name = md.name.clone().unwrap_or_default();
        let ctx = convert::Ctx { source, object: format!("{kind} {ns}/{name}") };
        if let Err(e) = convert::pod(&ctx, &template_pod(&ns, &name, template), 0, VolumeNeeds::default(), &none) {
            errors.push(in_template(e));
        }
    }
    errors
}

/// A pod as a controller would create it from its template (for checking the template).
fn template_pod(ns: &str, name: &str, template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> k8s_openapi::api::core::v1::Pod {
    k8s_openapi::api::core::v1::Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.to_string()),
            labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// A pod's field seen from the controller holding its template.
fn in_template(mut e: InputError) -> InputError {
    e.field = e.field.map(|f| format!("spec.template.{f}"));
    e
}

/// Builds the domain snapshot from typed, expanded objects; any invalid object fails it (the pods
/// [`build_batch`] would keep as rejected included).
pub fn build(o: &Objects) -> Result<Cluster, Vec<InputError>> {
    match build_batch(o) {
        Ok(b) if b.rejected.is_empty() => Ok(b.cluster),
        Ok(b) => Err(b.rejected),
        Err(e) => Err(e),
    }
}

/// A domain snapshot, the pods in it that cannot be scheduled as written ([`Workload::rejected`]) and
/// the unbound pods left out of it ([`Workload::skipped`]).
#[derive(Clone, Debug)]
pub struct Batch {
    pub cluster: Cluster,
    pub rejected: Vec<InputError>,
    pub skipped: Vec<String>,
}

/// [`build_with`] under the default [`Selection`].
pub fn build_batch(o: &Objects) -> Result<Batch, Vec<InputError>> {
    build_with(o, Selection::default())
}

/// [`build_under`] with kube-scheduler's default cluster-default spread (`System`, which never filters).
pub fn build_with(o: &Objects, selection: Selection) -> Result<Batch, Vec<InputError>> {
    build_under(o, selection, &SpreadDefaults::default())
}

/// [`build`] under a cluster-default topology spread (the weights' `topologySpreadDefaults`).
pub fn build_spread(o: &Objects, defaults: &SpreadDefaults) -> Result<Cluster, Vec<InputError>> {
    match build_under(o, Selection::default(), defaults) {
        Ok(b) if b.rejected.is_empty() => Ok(b.cluster),
        Ok(b) => Err(b.rejected),
        Err(e) => Err(e),
    }
}

/// Builds the domain snapshot from typed, expanded objects, each pod without topology spread
/// constraints of its own given the cluster defaults `defaults` with the selector kube-scheduler would
/// deduce ([`spread_defaults`]). A pod whose volumes or spec cannot be used
/// is kept, pending with the reason, and its error goes to `rejected` (one bad pod never blocks the
/// batch); any other invalid object (node, NodePool, NodeClaim, EC2NodeClass, DaemonSet) or a pod
/// without a name fails the build, with every error, the pods' included.
// Long: one pass per kind of object in dependency order (namespaces, node classes, pools, nodes,
// claims, pods, DaemonSets), each a short loop; splitting it would pass the half-built cluster around.
pub fn build_under(o: &Objects, selection: Selection, defaults: &SpreadDefaults) -> Result<Batch, Vec<InputError>> {
    let mut errors = Vec::new();
    let mut rejected = Vec::new();
    let mut skipped = Vec::new();
    let mut c = Cluster::default();

    // Namespaces: declared ones with their labels, plus every namespace an object lives in.
    let mut namespaces: BTreeMap<String, Labels> = BTreeMap::new();
    for ns in &o.namespaces {
        let name = ns.obj.metadata.name.clone().unwrap_or_default();
        let mut labels = ns.obj.metadata.labels.clone().unwrap_or_default();
        labels.insert(keys::NAMESPACE_NAME.into(), name.clone());
        namespaces.insert(name, labels);
    }
    let pod_namespaces = o.pods.iter().map(|p| &p.obj.metadata).chain(o.daemonsets.iter().map(|d| &d.obj.metadata));
    for md in pod_namespaces {
        let ns = md.namespace.clone().unwrap_or_else(|| "default".into());
        namespaces.entry(ns.clone()).or_insert_with(|| [(keys::NAMESPACE_NAME.to_string(), ns)].into());
    }

    for nc in &o.nodeclasses {
        match karpenter::nodeclass(nc) {
            Ok(x) => c.nodeclasses.push(x),
            Err(e) => errors.push(e),
        }
    }
    for np in &o.nodepools {
        if unsupported::is_static(&np.obj) {
            // Static pools keep a fixed node count; they are not provisioned dynamically (Karpenter
            // leaves them out of its scheduler too). Reported: unsupported::STATIC.
            continue;
        }
        match karpenter::nodepool(np) {
            Ok(x) => {
                let kind = &np.obj.spec.template.spec.node_class_ref.kind;
                if (kind == "EC2NodeClass" || kind.is_empty()) && !c.nodeclasses.iter().any(|k| k.name == x.node_class) && !o.nodeclasses.is_empty() {
                    errors.push(InputError::at(
                        &np.source,
                        Some(format!("NodePool {}", x.name)),
                        Some("spec.template.spec.nodeClassRef.name"),
                        format!("EC2NodeClass \"{}\" not found (add it to the workload)", x.node_class),
                    ));
                } else if (kind == "EC2NodeClass" || kind.is_empty()) && o.nodeclasses.is_empty() {
                    errors.push(InputError::at(
                        &np.source,
                        Some(format!("NodePool {}", x.name)),
                        Some("spec.template.spec.nodeClassRef.name"),
                        format!("EC2NodeClass \"{}\" not found: the workload has no EC2NodeClass (add the one the NodePool references)", x.node_class),
                    ));
                }
                c.nodepools.push(x);
            }
            Err(e) => errors.push(e),
        }
    }
    let (mut csinodes, csinode_errors) = volumes::csinode_limits(&o.csinodes);
    errors.extend(csinode_errors);
    for n in &o.nodes {
        let ctx = convert::Ctx { source: &n.source, object: format!("Node {}", n.obj.metadata.name.as_deref().unwrap_or("")) };
        let pool = n.obj.metadata.labels.as_ref().and_then(|l| l.get(keys::NODEPOOL)).and_then(|name| o.nodepools.iter().find(|p| p.obj.metadata.name.as_ref() == Some(name)));
        let (planned, in_flight) = karpenter::planning_node(&n.obj, karpenter::claim_of(&n.obj, &o.nodeclaims), pool.map(|p| &p.obj));
        match convert::node(&ctx, &planned) {
            Ok(x) => {
                let attach_limits = csinodes.remove(&x.name).unwrap_or_default();
                c.nodes.push(stowage_core::domain::Node { in_flight, attach_limits, ..x })
            }
            Err(e) => errors.push(e),
        }
    }
    for claim in &o.nodeclaims {
        let registered = claim.obj.status.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| c.nodes.iter().any(|x| &x.name == n))
            || claim.obj.status.as_ref().and_then(|s| s.provider_id.as_ref()).is_some_and(|p| c.nodes.iter().any(|x| x.provider_id.as_ref() == Some(p)));
        if registered {
            continue;
        }
        match karpenter::in_flight(claim) {
            Ok(Some(x)) => c.nodes.push(x),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }

    let storage = volumes::Storage::new(o);
    let nominated = pending::nominated_in_flight(o);
    let deleting: std::collections::BTreeSet<&str> = c.nodes.iter().filter(|n| n.deleting).map(|n| n.name.as_str()).collect();
    let queue_seq = queue_seq(&o.pods);
    // Only defaults that filter are kept on the pods (`SpreadConstraint::defaulted`), so the selector is
    // deduced only when some would.
    let filtering_defaults = defaults.constraints().iter().any(|c| c.when_unsatisfiable == stowage_core::semantics::spread_defaults::Action::DoNotSchedule);
    for (p, &seq) in o.pods.iter().zip(&queue_seq) {
        let ctx = convert::Ctx { source: &p.source, object: format!("Pod {}/{}", p.obj.metadata.namespace.as_deref().unwrap_or("default"), p.obj.metadata.name.as_deref().unwrap_or("")) };
        let node = pending::node_name(&p.obj);
        let alive = !pending::is_terminal(&p.obj) && p.obj.metadata.deletion_timestamp.is_none() && pending::owner_kind(&p.obj) != Some("DaemonSet");
        if node.is_none() && alive && !pending::planned(&p.obj, selection, &nominated) {
            skipped.push(ctx.object.clone());
            continue;
        }
        // A pod on a node being deleted is planned again; that node is no target.
        let replanned = alive && node.is_some_and(|n| deleting.contains(n));
        let bound = node.is_some() && !replanned;
        // Bound pods' volumes do not matter for planning; resolving them would demand every PV of the
        // cluster in the dump.
        let (mut vols, problem) = if bound { (VolumeNeeds::default(), None) } else { volumes::needs(&ctx, &p.obj, &storage) };
        rejected.extend(problem);
        // What NodeVolumeLimits counts is read for bound pods too: it is what their nodes have attached.
        vols.attach = volumes::attach(&p.obj, &storage);
        match convert::pod(&ctx, &p.obj, seq, vols.clone(), &namespaces) {
            Ok(mut x) => {
                if replanned {
                    x.node_name = None;
                }
                if filtering_defaults && x.spread.is_empty() {
                    x.spread = defaults.filtering_for(&x.spread, spread_defaults::default_selector(&p.obj, o).as_ref());
                }
                c.pods.push(x)
            }
            Err(e) => match convert::invalid_pod(&ctx, &p.obj, seq, vols, &e) {
                Ok(mut x) => {
                    if replanned {
                        x.node_name = None;
                    }
                    rejected.push(e);
                    c.pods.push(x);
                }
                Err(no_name) => errors.push(no_name),
            },
        }
    }
    for d in &o.daemonsets {
        let md = &d.obj.metadata;
        let ns = md.namespace.clone().unwrap_or_else(|| "default".into());
        let name = md.name.clone().unwrap_or_default();
        let ctx = convert::Ctx { source: &d.source, object: format!("DaemonSet {ns}/{name}") };
        let template = d.obj.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
        let pod = template_pod(&ns, &format!("{name}-daemon"), &template);
        match convert::pod(&ctx, &pod, u32::MAX, VolumeNeeds::default(), &namespaces).map_err(in_template) {
            Ok(mut t) => {
                t.owner = Some(Owner { kind: "DaemonSet".into(), name: name.clone() });
                c.daemonsets.push(DaemonSet { namespace: ns, name, template: t });
            }
            Err(e) => errors.push(e),
        }
    }
    c.namespaces = namespaces;
    c.spread_defaults = defaults.clone();
    if errors.is_empty() {
        Ok(Batch { cluster: c, rejected, skipped })
    } else {
        errors.extend(rejected);
        Err(errors)
    }
}

/// Each pod's `seq`: its stand-in for kube-scheduler's queue timestamp (`stowage_core::semantics::queue`,
/// which orders pods by priority, then by it). Pods by `metadata.creationTimestamp`; pods without one
/// (a controller's pods expanded from a file, written pods that never met an API server) after them;
/// ties in input order.
fn queue_seq(pods: &[objects::Obj<k8s_openapi::api::core::v1::Pod>]) -> Vec<u32> {
    let mut by_time: Vec<usize> = (0..pods.len()).collect();
    by_time.sort_by_key(|&i| {
        let t = pods[i].obj.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (t.is_none(), t, i)
    });
    let mut seq = vec![0u32; pods.len()];
    for (rank, i) in by_time.into_iter().enumerate() {
        seq[i] = rank as u32;
    }
    seq
}
