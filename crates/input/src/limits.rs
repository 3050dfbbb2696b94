//! How much one run may read and build (docs/formats.md §1, "Limits"). Every reader of the workload,
//! the catalog and the weights stops at these bounds with an error that names the file and the limit,
//! so that a small hostile file (an alias bomb, a gzip bomb, `replicas: 2000000000`) fails fast instead
//! of exhausting memory.

/// Bounds on the input of one run. The defaults fit any real cluster: Kubernetes' documented
/// scalability limit is 150,000 pods per cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of all files of one run together, after gzip decompression.
    pub max_input_bytes: u64,
    /// Pods of one batch (listed, plus those controllers create), and replicas of one controller.
    pub max_pods: usize,
}

/// Default of [`Limits::max_input_bytes`]: 32 MiB. Parsed objects take about 45 times their JSON
/// size in memory (measured: a 197 MB List of a million pods peaked at 9.3 GB), so this keeps a run
/// under 2 GiB; 32 MiB is about 70,000 pods as the Karpenter benchmark writes them. Larger dumps need
/// `--max-input-bytes` (and the memory).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 32 << 20;
/// Default of [`Limits::max_pods`]: Kubernetes' documented limit of pods per cluster.
pub const DEFAULT_MAX_PODS: usize = 150_000;

impl Default for Limits {
    fn default() -> Self {
        Limits { max_input_bytes: DEFAULT_MAX_INPUT_BYTES, max_pods: DEFAULT_MAX_PODS }
    }
}

impl Limits {
    /// The YAML parser's budget: events, nodes and scalar bytes bounded by the input size (a file
    /// without aliases cannot exceed them), aliases and anchors by the parser's defaults (50,000 each,
    /// at most 10 aliases per anchor), retained anchor data by 64 MiB, nesting by 64 levels.
    pub fn yaml_options(&self) -> serde_saphyr::Options {
        let bytes = usize::try_from(self.max_input_bytes).unwrap_or(usize::MAX);
        serde_saphyr::options! {
            budget: serde_saphyr::budget! {
                max_reader_input_bytes: Some(bytes),
                max_events: bytes.max(1_000_000),
                max_nodes: bytes.max(250_000),
                max_total_scalar_bytes: bytes,
                max_documents: self.max_pods.max(1_024),
            },
        }
    }
}
