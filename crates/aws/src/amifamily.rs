//! AMI families: which family an EC2NodeClass's user data is written for, and the public SSM
//! parameters an `alias: <family>@<version>` term reads, with the instance types each image is for
//! (Karpenter `pkg/providers/amifamily/{al2023,al2,bottlerocket,types}.go`).
//!
//! | alias | SSM parameters (`<k8s>` = the cluster's minor version, e.g. `1.31`) | variants |
//! |---|---|---|
//! | `al2023@latest` | `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/recommended/image_id` | x86_64: standard, nvidia, neuron; arm64: standard, nvidia |
//! | `al2023@v<date>` | `…/amazon-linux-2023/<arch>/<variant>/amazon-eks-node-al2023-<arch>-<variant>-<k8s>-v<date>/image_id` | same |
//! | `al2@latest` | `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2/recommended/image_id`, `…/amazon-linux-2-arm64/recommended/…`, `…/amazon-linux-2-gpu/recommended/…` | standard; standard; nvidia and neuron |
//! | `al2@v<date>` | the same with `amazon-eks-node-<k8s>-v<date>`, `amazon-eks-arm64-node-<k8s>-v<date>`, `amazon-eks-gpu-node-<k8s>-v<date>` for `recommended` | same |
//! | `bottlerocket@<v>` | `/aws/service/bottlerocket/aws-k8s-<k8s>/<arch>/<v>/image_id` and `aws-k8s-<k8s>-nvidia/<arch>/<v>`; `<v>` = `latest` or the version without its leading `v` | x86_64: standard and neuron; arm64: standard; nvidia: nvidia |
//!
//! A variant is the set of instance types an image is for, written on the image as requirements
//! (`status.amis[].requirements`, with `kubernetes.io/arch`):
//!
//! ```text
//! standard: karpenter.k8s.aws/instance-gpu-count DoesNotExist, karpenter.k8s.aws/instance-accelerator-count DoesNotExist
//! nvidia:   karpenter.k8s.aws/instance-gpu-count Exists           (GPU types)
//! neuron:   karpenter.k8s.aws/instance-accelerator-count Exists   (Inferentia / Trainium types)
//! ```
//!
//! A launch gives each instance type the first image whose requirements its labels satisfy.
//! Parameters that do not exist are skipped (not every variant exists for every version); an alias
//! none of whose parameters exists finds no image. As in Karpenter, `al2@` is refused from Kubernetes
//! 1.33 (EKS publishes no AL2 images for it). Windows families are refused: stowage does not write
//! Windows user data.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

pub(crate) const LABEL_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub(crate) const LABEL_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// The user data stowage writes for an EC2NodeClass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// nodeadm `NodeConfig` ([`super::userdata::nodeadm`]).
    Al2023,
    /// `/etc/eks/bootstrap.sh` ([`super::userdata::eks_bootstrap`]).
    Al2,
    /// TOML settings ([`super::userdata::bottlerocket`]).
    Bottlerocket,
    /// `spec.userData` verbatim.
    Custom,
}

impl Family {
    /// The `amiFamily` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Al2023 => "AL2023",
            Family::Al2 => "AL2",
            Family::Bottlerocket => "Bottlerocket",
            Family::Custom => "Custom",
        }
    }

    /// An `amiFamily` value. Errors say why it cannot be used.
    pub fn parse(s: &str) -> Result<Family, String> {
        match s {
            "AL2023" => Ok(Family::Al2023),
            "AL2" => Ok(Family::Al2),
            "Bottlerocket" => Ok(Family::Bottlerocket),
            "Custom" => Ok(Family::Custom),
            w if w.starts_with("Windows") => Err(format!("amiFamily {w}: Windows nodes are not supported by stowage (it writes AL2023, AL2, Bottlerocket and Custom user data)")),
            other => Err(format!("amiFamily {other:?} is not one of AL2023, AL2, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025")),
        }
    }

    /// The family of an alias (`al2023@latest` → AL2023). Errors say why it cannot be used.
    pub fn of_alias(alias: &str) -> Result<(Family, String), String> {
        let Some((family, version)) = alias.split_once('@').filter(|(f, v)| !f.is_empty() && !v.is_empty()) else {
            return Err(format!("alias {alias:?} is not of the form family@version (e.g. al2023@latest)"));
        };
        let f = match family {
            "al2023" => Family::Al2023,
            "al2" => Family::Al2,
            "bottlerocket" => Family::Bottlerocket,
            "windows2019" | "windows2022" | "windows2025" => {
                return Err(format!("alias {alias:?}: Windows nodes are not supported by stowage (it writes AL2023, AL2, Bottlerocket and Custom user data)"));
            }
            other => return Err(format!("alias {alias:?}: unknown AMI family {other:?} (al2023, al2, bottlerocket, windows2019, windows2022, windows2025)")),
        };
        Ok((f, version.to_string()))
    }
}

/// The instance types an image is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    Standard,
    Nvidia,
    Neuron,
}

impl Variant {
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Standard => "standard",
            Variant::Nvidia => "nvidia",
            Variant::Neuron => "neuron",
        }
    }

    /// The requirements an image of this variant carries (module docs), without the architecture.
    pub fn requirements(self) -> Vec<NodeSelectorRequirement> {
        let req = |key: &str, op: &str| NodeSelectorRequirement { key: key.into(), operator: op.into(), values: None };
        match self {
            Variant::Standard => vec![req(LABEL_ACCELERATOR_COUNT, "DoesNotExist"), req(LABEL_GPU_COUNT, "DoesNotExist")],
            Variant::Nvidia => vec![req(LABEL_GPU_COUNT, "Exists")],
            Variant::Neuron => vec![req(LABEL_ACCELERATOR_COUNT, "Exists")],
        }
    }

    /// Whether an instance type with these labels satisfies [`Variant::requirements`].
    pub fn admits(self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Variant::Standard => !labels.contains_key(LABEL_GPU_COUNT) && !labels.contains_key(LABEL_ACCELERATOR_COUNT),
            Variant::Nvidia => labels.contains_key(LABEL_GPU_COUNT),
            Variant::Neuron => labels.contains_key(LABEL_ACCELERATOR_COUNT),
        }
    }
}

/// One SSM parameter an alias reads and the variants its image serves.
#[derive(Clone, Debug, PartialEq)]
pub struct AliasParameter {
    pub name: String,
    pub variants: Vec<Variant>,
}

/// `1.31.2` or `v1.31` → `1.31`; `None` when it is not a version.
pub fn minor_version(v: &str) -> Option<String> {
    let v = v.trim().trim_start_matches('v');
    let mut it = v.split('.');
    let (major, minor) = (it.next()?, it.next()?);
    let minor: String = minor.chars().take_while(|c| c.is_ascii_digit()).collect();
    (major.parse::<u32>().is_ok() && !minor.is_empty()).then(|| format!("{major}.{minor}"))
}

/// The SSM parameters of an alias (module docs), for Kubernetes minor version `k8s` (`1.31`).
pub fn alias_parameters(family: Family, version: &str, k8s: &str) -> Result<Vec<AliasParameter>, String> {
    let latest = version == "latest";
    let p = |name: String, variants: &[Variant]| AliasParameter { name, variants: variants.to_vec() };
    match family {
        Family::Al2023 => {
            let mut v = Vec::new();
            for (arch, variants) in [("x86_64", &[Variant::Standard, Variant::Nvidia, Variant::Neuron][..]), ("arm64", &[Variant::Standard, Variant::Nvidia][..])] {
                for &variant in variants {
                    let name = if latest { "recommended".to_string() } else { format!("amazon-eks-node-al2023-{arch}-{}-{k8s}-{version}", variant.as_str()) };
                    v.push(p(format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{}/{name}/image_id", variant.as_str()), &[variant]));
                }
            }
            Ok(v)
        }
        Family::Al2 => {
            let minor: u32 = k8s.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
            if minor >= 33 {
                return Err(format!(
                    "alias al2@{version}: AL2 aliases are not supported on Kubernetes {k8s} (EKS publishes AL2 images up to 1.32; Karpenter refuses them too); use al2023@ or bottlerocket@"
                ));
            }
            let path = |dir: &str, pinned: &str| {
                let name = if latest { "recommended".to_string() } else { format!("{pinned}-{k8s}-{version}") };
                format!("/aws/service/eks/optimized-ami/{k8s}/{dir}/{name}/image_id")
            };
            Ok(vec![
                p(path("amazon-linux-2", "amazon-eks-node"), &[Variant::Standard]),
                p(path("amazon-linux-2-arm64", "amazon-eks-arm64-node"), &[Variant::Standard]),
                p(path("amazon-linux-2-gpu", "amazon-eks-gpu-node"), &[Variant::Neuron, Variant::Nvidia]),
            ])
        }
        Family::Bottlerocket => {
            // Bottlerocket's release tags have a leading `v`; its SSM paths do not.
            let v = version.trim_start_matches('v');
            Ok(vec![
                p(format!("/aws/service/bottlerocket/aws-k8s-{k8s}/x86_64/{v}/image_id"), &[Variant::Standard, Variant::Neuron]),
                p(format!("/aws/service/bottlerocket/aws-k8s-{k8s}/arm64/{v}/image_id"), &[Variant::Standard]),
                p(format!("/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/x86_64/{v}/image_id"), &[Variant::Nvidia]),
                p(format!("/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/arm64/{v}/image_id"), &[Variant::Nvidia]),
            ])
        }
        Family::Custom => Err("a Custom family has no alias".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[AliasParameter]) -> Vec<&str> {
        v.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn al2023_latest_and_pinned_paths_per_arch_and_variant() {
        let v = alias_parameters(Family::Al2023, "latest", "1.31").unwrap();
        assert_eq!(
            names(&v),
            vec![
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/neuron/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id",
            ]
        );
        let v = alias_parameters(Family::Al2023, "v20261201", "1.31").unwrap();
        assert_eq!(v[1].name, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261201/image_id");
        assert_eq!(v[1].variants, vec![Variant::Nvidia]);
    }

    #[test]
    fn al2_and_bottlerocket_paths() {
        let v = alias_parameters(Family::Al2, "latest", "1.30").unwrap();
        assert_eq!(
            names(&v),
            vec![
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended/image_id",
            ]
        );
        assert_eq!(v[2].variants, vec![Variant::Neuron, Variant::Nvidia]);
        let v = alias_parameters(Family::Al2, "v20250101", "1.30").unwrap();
        assert_eq!(v[1].name, "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20250101/image_id");
        assert!(alias_parameters(Family::Al2, "latest", "1.33").unwrap_err().contains("1.33"));
        let v = alias_parameters(Family::Bottlerocket, "v1.26.0", "1.31").unwrap();
        assert_eq!(
            names(&v),
            vec![
                "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.26.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.26.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.26.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.26.0/image_id",
            ]
        );
        assert_eq!(v[0].variants, vec![Variant::Standard, Variant::Neuron]);
    }

    #[test]
    fn families_and_variants() {
        assert_eq!(Family::of_alias("bottlerocket@latest").unwrap(), (Family::Bottlerocket, "latest".to_string()));
        assert!(Family::of_alias("windows2022@latest").unwrap_err().contains("Windows nodes are not supported"));
        assert!(Family::parse("Windows2019").unwrap_err().contains("Windows nodes are not supported"));
        assert!(Family::of_alias("ubuntu@latest").unwrap_err().contains("unknown AMI family"));
        assert!(Family::of_alias("al2023").unwrap_err().contains("family@version"));
        let gpu: BTreeMap<String, String> = [(LABEL_GPU_COUNT.to_string(), "1".to_string())].into();
        let inf: BTreeMap<String, String> = [(LABEL_ACCELERATOR_COUNT.to_string(), "1".to_string())].into();
        let plain = BTreeMap::new();
        assert!(Variant::Nvidia.admits(&gpu) && !Variant::Nvidia.admits(&inf) && !Variant::Nvidia.admits(&plain));
        assert!(Variant::Neuron.admits(&inf) && !Variant::Neuron.admits(&gpu));
        assert!(Variant::Standard.admits(&plain) && !Variant::Standard.admits(&gpu) && !Variant::Standard.admits(&inf));
        assert_eq!(minor_version("1.31"), Some("1.31".into()));
        assert_eq!(minor_version("v1.32.4-eks-123"), Some("1.32".into()));
        assert_eq!(minor_version("latest"), None);
    }
}
