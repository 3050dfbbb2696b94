//! NodeResourcesFit (`noderesources/fit.go`) and the effective pod request (`PodRequests` in
//! k8s.io/component-helpers/resource).
//!
//! Effective request, per resource:
//!
//! ```text
//! regular  = Σ containers + Σ restartable init containers (sidecars)
//! init_max = max over init containers i, in order, of
//!              request(i) + Σ sidecars started before i      (ordinary init container)
//!              Σ sidecars started up to and including i      (sidecar)
//! request  = max(regular, init_max) + spec.overhead
//! ```
//!
//! With pod-level `spec.resources.requests` (KEP-2837) the named resources take the pod-level value
//! instead of the container aggregate. Every pod also takes one `pods` slot.
//!
//! Fit: for every requested resource, request ≤ allocatable − Σ requests of pods on the node; a zero
//! request is never checked except the pod slot.

use crate::domain::resources::Resources;

use super::{Plugin, Reject};

/// An init container: its request and whether it is a sidecar (`restartPolicy: Always`).
pub struct InitContainer {
    pub requests: Resources,
    pub sidecar: bool,
}

/// The effective request of a pod, including its pod slot.
pub fn pod_request(containers: &[Resources], init: &[InitContainer], overhead: &Resources, pod_level: Option<&Resources>) -> Resources {
    let mut regular = Resources::default();
    for c in containers {
        regular.add(c);
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for ic in init {
        let during = if ic.sidecar {
            regular.add(&ic.requests);
            sidecars.add(&ic.requests);
            sidecars.clone()
        } else {
            ic.requests.plus(&sidecars)
        };
        init_max = init_max.max_each(&during);
    }
    let mut req = regular.max_each(&init_max);
    if let Some(pl) = pod_level {
        for (name, v) in pl.iter() {
            req.set(name, v);
        }
    }
    req.add(overhead);
    req.pods = 1;
    req
}

/// The fit filter: `free` is allocatable minus what pods on the node already request.
pub fn fit(request: &Resources, free: &Resources) -> Result<(), Reject> {
    match request.first_shortage(free) {
        None => Ok(()),
        Some("pods") => Err(Reject::new(Plugin::NodeResourcesFit, "Too many pods")),
        Some(name) => Err(Reject::new(Plugin::NodeResourcesFit, format!("Insufficient {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(m: i64) -> Resources {
        Resources::new(m, 0, 0, 0)
    }

    #[test]
    fn ordinary_init_container_can_dominate() {
        let r = pod_request(&[cpu(100), cpu(100)], &[InitContainer { requests: cpu(500), sidecar: false }], &cpu(0), None);
        assert_eq!(r.cpu_m, 500);
        assert_eq!(r.pods, 1);
    }

    #[test]
    fn sidecars_add_to_regular_containers_and_to_later_init_containers() {
        // sidecar 200m started first, then an init container of 400m: init peak 600m;
        // regular 300m + sidecar 200m = 500m; result 600m, plus overhead 50m.
        let r = pod_request(&[cpu(300)], &[InitContainer { requests: cpu(200), sidecar: true }, InitContainer { requests: cpu(400), sidecar: false }], &cpu(50), None);
        assert_eq!(r.cpu_m, 650);
        // An init container that runs before the sidecar does not see it.
        let r = pod_request(&[cpu(300)], &[InitContainer { requests: cpu(400), sidecar: false }, InitContainer { requests: cpu(200), sidecar: true }], &cpu(0), None);
        assert_eq!(r.cpu_m, 500);
    }

    #[test]
    fn pod_level_resources_replace_container_aggregate() {
        let pl = Resources::new(2000, 0, 0, 0);
        let r = pod_request(&[Resources::new(100, 64 << 20, 0, 0)], &[], &cpu(0), Some(&pl));
        assert_eq!(r.cpu_m, 2000);
        assert_eq!(r.memory, 64 << 20);
    }

    #[test]
    fn fit_names_the_short_resource_in_kube_scheduler_words() {
        let free = Resources::new(1000, 1 << 30, 0, 1);
        assert!(fit(&Resources::new(1000, 0, 0, 1), &free).is_ok());
        assert_eq!(fit(&Resources::new(1001, 0, 0, 1), &free).unwrap_err().reason, "Insufficient cpu");
        let full = Resources::new(1000, 1 << 30, 0, 0);
        assert_eq!(fit(&Resources::new(0, 0, 0, 1), &full).unwrap_err().reason, "Too many pods");
    }
}
