//! The Alibaba "openb" trace (cluster-trace-gpu-v2023, CC BY 4.0; ../shared/data/alibaba-openb/README.md
//! and benches/workloads/openb/README.md) as stowage workloads: each trace row becomes a pending Pod in
//! namespace `openb` that requests the row's CPU, memory and GPUs.
//!
//! # GPU mapping
//!
//! The trace ran on Alibaba's own GPU models; the corpus plans on the embedded us-east-1 catalog. Two
//! NodePools (benches/workloads/openb/nodepools.yaml): `cpu` (c, m, r families, on-demand, amd64) and
//! `gpu` (g and p families, on-demand, amd64, tainted `nvidia.com/gpu=true:NoSchedule` as GPU pools
//! usually are). A GPU pod requests `nvidia.com/gpu: <num_gpu>` (so only NVIDIA types fit) and
//! tolerates the taint. A row's `gpu_spec` (allowed models, `|`-separated; empty = any GPU) becomes a
//! required node affinity on `karpenter.k8s.aws/instance-gpu-name` with the union of the rows of
//! [`GPU_MODELS`]:
//!
//! | trace model | EC2 GPU names (families)       | why |
//! |-------------|--------------------------------|-----|
//! | `V100M16`   | v100 (p3dn), a10g (g5)         | p3 (V100 16 GB) is not in the catalog (no hardware facts in the AWS data); p3dn has V100 32 GB but only as an 8-GPU 24xlarge; A10G (24 GB) matches V100 throughput and memory for one-GPU tasks |
//! | `V100M32`   | v100 (p3dn), l40s (g6e), a100 (p4d) | needs ≥ 32 GB of GPU memory: V100 32 GB, L40S 48 GB, A100 40 GB |
//! | `P100`      | t4 (g4dn), a10g (g5)           | 16 GB Pascal; p2 is not in the catalog; T4 (16 GB) is its successor class, A10G the next size up |
//! | `T4`        | t4 (g4dn)                      | the same GPU |
//! | `A10`       | a10g (g5)                      | A10G is AWS's A10 |
//! | `G1`, `G2`, `G3` | any NVIDIA GPU             | Alibaba-internal codes with no public model; treated as "any GPU" |
//!
//! Arm types with NVIDIA GPUs (g5g: T4G) are excluded by the pools' `kubernetes.io/arch In [amd64]`:
//! the trace's images are not known to be multi-arch.
//!
//! # Fractional GPUs
//!
//! Rows with `num_gpu == 1` and `gpu_milli < 1000` shared one GPU with other tasks in the traced cluster
//! (Alibaba's GPU-sharing scheduler). Kubernetes' NVIDIA device plugin hands out whole GPUs unless
//! time-slicing or MIG is configured, and neither is modelled by stowage or Karpenter, so such a pod
//! **requests one whole GPU**. This over-states the GPU bill compared with the traced cluster (which
//! packed several such tasks on one GPU); both planners see the same requests, so the comparison
//! between them is unaffected. The share is kept as the annotation `openb.alibaba.com/gpu-milli`.
//!
//! Other columns: `qos` becomes the label `openb.alibaba.com/qos`; `pod_phase` and `scheduled_time` are
//! not used (every row is a request to place); `creation_time` / `deletion_time` drive the replay.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// Trace GPU model → EC2 `karpenter.k8s.aws/instance-gpu-name` values (see the module docs for why).
/// An empty list means any NVIDIA GPU.
pub(crate) const GPU_MODELS: &[(&str, &[&str])] =
    &[("V100M16", &["v100", "a10g"]), ("V100M32", &["v100", "l40s", "a100"]), ("P100", &["t4", "a10g"]), ("T4", &["t4"]), ("A10", &["a10g"]), ("G1", &[]), ("G2", &[]), ("G3", &[])];

pub(crate) const NAMESPACE: &str = "openb";
pub(crate) const GPU_RESOURCE: &str = "nvidia.com/gpu";
pub(crate) const GPU_NAME_LABEL: &str = "karpenter.k8s.aws/instance-gpu-name";

/// One row of an openb pod list.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePod {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: i64,
    pub gpu_milli: i64,
    /// Allowed GPU models; empty = any.
    pub gpu_spec: Vec<String>,
    pub qos: String,
    pub creation: u64,
    /// Trace seconds; `None` if the row has none (still running when the trace ended).
    pub deletion: Option<u64>,
}

/// Parses an openb pod list (CSV with a header naming at least the columns used here).
pub fn parse_trace(text: &str) -> Result<Vec<TracePod>, String> {
    let mut lines = text.lines().enumerate();
    let (_, header) = lines.next().ok_or("empty trace")?;
    let cols: Vec<&str> = header.trim().split(',').collect();
    let col = |n: &str| cols.iter().position(|c| *c == n).ok_or_else(|| format!("trace header has no column {n:?}"));
    let (i_name, i_cpu, i_mem, i_gpu, i_milli, i_spec, i_qos, i_ct, i_dt) =
        (col("name")?, col("cpu_milli")?, col("memory_mib")?, col("num_gpu")?, col("gpu_milli")?, col("gpu_spec")?, col("qos")?, col("creation_time")?, col("deletion_time")?);
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for (ln, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.trim_end_matches('\r').split(',').collect();
        let at = |m: String| format!("trace line {}: {m}", ln + 1);
        if f.len() != cols.len() {
            return Err(at(format!("{} fields, the header has {}", f.len(), cols.len())));
        }
        let int = |i: usize, what: &str| -> Result<i64, String> {
            f[i].trim().parse::<i64>().map_err(|_| at(format!("{what}: not an integer: {:?}", f[i]))).and_then(|v| if v < 0 { Err(at(format!("{what}: negative"))) } else { Ok(v) })
        };
        let name = f[i_name].trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            return Err(at(format!("name {name:?} is not a valid pod name")));
        }
        if !names.insert(name.clone()) {
            return Err(at(format!("duplicate pod {name}")));
        }
        let deletion = match f[i_dt].trim() {
            "" => None,
            _ => Some(int(i_dt, "deletion_time")? as u64),
        };
        out.push(TracePod {
            name: name.to_ascii_lowercase(),
            cpu_milli: int(i_cpu, "cpu_milli")?,
            memory_mib: int(i_mem, "memory_mib")?,
            num_gpu: int(i_gpu, "num_gpu")?,
            gpu_milli: int(i_milli, "gpu_milli")?,
            gpu_spec: f[i_spec].split('|').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
            qos: f[i_qos].trim().to_string(),
            creation: int(i_ct, "creation_time")? as u64,
            deletion,
        });
    }
    Ok(out)
}

/// The EC2 GPU names a row may run on; `None` = any NVIDIA GPU. Unknown models are an error, so that a
/// new trace cannot silently widen or narrow the mapping.
pub(crate) fn gpu_names(spec: &[String]) -> Result<Option<Vec<String>>, String> {
    let mut names = BTreeSet::new();
    for m in spec {
        let (_, ec2) = GPU_MODELS.iter().find(|(t, _)| t == m).ok_or_else(|| format!("GPU model {m:?} has no EC2 mapping (src/bench/openb.rs GPU_MODELS)"))?;
        if ec2.is_empty() {
            return Ok(None);
        }
        names.extend(ec2.iter().map(|s| s.to_string()));
    }
    Ok(if names.is_empty() { None } else { Some(names.into_iter().collect()) })
}

/// The Pod object of a row: pending, requests only (plus GPU limits, which Kubernetes requires for
/// extended resources).
pub(crate) fn pod_object(p: &TracePod) -> Result<Value, String> {
    let mut requests = serde_json::Map::new();
    requests.insert("cpu".into(), json!(format!("{}m", p.cpu_milli)));
    requests.insert("memory".into(), json!(format!("{}Mi", p.memory_mib)));
    let mut resources = json!({});
    let mut spec = serde_json::Map::new();
    if p.num_gpu > 0 {
        requests.insert(GPU_RESOURCE.into(), json!(p.num_gpu.to_string()));
        resources["limits"] = json!({ GPU_RESOURCE: p.num_gpu.to_string() });
        spec.insert("tolerations".into(), json!([{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]));
        if let Some(names) = gpu_names(&p.gpu_spec).map_err(|e| format!("{}: {e}", p.name))? {
            spec.insert(
                "affinity".into(),
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": GPU_NAME_LABEL, "operator": "In", "values": names}]}
                ]}}}),
            );
        }
    }
    resources["requests"] = Value::Object(requests);
    spec.insert("containers".into(), json!([{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}]));
    let mut annotations = serde_json::Map::new();
    annotations.insert("openb.alibaba.com/creation-time".into(), json!(p.creation.to_string()));
    if let Some(d) = p.deletion {
        annotations.insert("openb.alibaba.com/deletion-time".into(), json!(d.to_string()));
    }
    if p.num_gpu > 0 {
        annotations.insert("openb.alibaba.com/gpu-milli".into(), json!(p.gpu_milli.to_string()));
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.name,
            "namespace": NAMESPACE,
            "uid": format!("openb-{}", p.name),
            "labels": {"app": "openb", "openb.alibaba.com/qos": p.qos.to_ascii_lowercase()},
            "annotations": annotations,
        },
        "spec": spec,
    }))
}

/// The rows created in `[start, start + span)`, in creation order (ties by name).
pub fn window(trace: &[TracePod], start: u64, span: u64) -> Vec<TracePod> {
    let mut w: Vec<TracePod> = trace.iter().filter(|p| p.creation >= start && p.creation < start.saturating_add(span)).cloned().collect();
    w.sort_by(|a, b| (a.creation, &a.name).cmp(&(b.creation, &b.name)));
    w
}

/// A batch file: a `v1 List` of the pods of a window (one item per line, for diffs before compression).
pub fn batch_text(pods: &[TracePod]) -> Result<String, String> {
    let mut s = String::from("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
    for (i, p) in pods.iter().enumerate() {
        s.push_str(&serde_json::to_string(&pod_object(p)?).map_err(|e| e.to_string())?);
        s.push_str(if i + 1 < pods.len() { ",\n" } else { "\n" });
    }
    s.push_str("]}\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
        openb-pod-0000,12000,16384,1,460,,LS,Running,0,100,0\n\
        openb-pod-0001,6000,12288,2,1000,V100M32|T4,BE,Running,50,,50\n\
        openb-pod-0002,1000,1024,0,0,,LS,Failed,10,20,10\n";

    #[test]
    fn rows_become_pods() {
        let t = parse_trace(CSV).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].gpu_spec, ["V100M32", "T4"]);
        assert_eq!(t[1].deletion, None);
        let p = pod_object(&t[0]).unwrap();
        assert_eq!(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "1", "a fractional GPU is one GPU");
        assert!(p["spec"]["affinity"].is_null(), "an empty gpu_spec is any GPU");
        let p = pod_object(&t[1]).unwrap();
        let values = &p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"];
        assert_eq!(values, &json!(["a100", "l40s", "t4", "v100"]));
        let p = pod_object(&t[2]).unwrap();
        assert!(p["spec"]["tolerations"].is_null());
        let w = window(&t, 0, 20);
        assert_eq!(w.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["openb-pod-0000", "openb-pod-0002"]);
        let text = batch_text(&w).unwrap();
        let loaded = stowage_input::load_texts([(std::path::Path::new("b.json"), text.as_str())]).unwrap();
        assert_eq!(loaded.cluster.pending().len(), 2);
    }

    #[test]
    fn bad_rows_are_errors() {
        assert!(parse_trace("").is_err());
        assert!(parse_trace("name,cpu_milli\nx,1\n").unwrap_err().contains("no column"));
        let bad = CSV.replace("12000,16384", "-5,16384");
        assert!(parse_trace(&bad).unwrap_err().contains("negative"));
        let bad = CSV.replace("12000,16384", "x,16384");
        assert!(parse_trace(&bad).unwrap_err().contains("line 2"));
        let bad = CSV.replace(",V100M32|T4,", ",H800,");
        let t = parse_trace(&bad).unwrap();
        assert!(pod_object(&t[1]).unwrap_err().contains("no EC2 mapping"));
    }
}
