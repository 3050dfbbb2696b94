//! A NodeClaim's life after creation (Karpenter's `nodeclaim/lifecycle`, aws.md §9), as one pure
//! decision for the controller and the simulator: given what is observed of one NodeClaim and the time,
//! what it needs next, and until when that holds.
//!
//! ```text
//!  created ──launch──► launched ──Node appears──► registered ──Node ready, startup taints gone──► initialized
//!     │ launch_timeout (5 min)    │ registration_timeout (15 min, from the launch)
//!     ▼                           ▼
//!  LaunchTimeout: delete      RegistrationTimeout: delete (termination ends the instance)
//!  any time: deleting → Terminate (with our finalizer) / Nothing; its Node deleted → delete the NodeClaim;
//!            its instance gone → delete the NodeClaim
//! ```
//!
//! [`decide`] is generic over the clock ([`Moment`]): the controller runs it on the API server's
//! timestamps (read through its one clock), the simulator on `SimTime`. The answer carries the moment
//! the decision changes by itself ([`Decision::until`]: a timeout), which is when the controller
//! requeues the NodeClaim and when the simulator's next event is; every other change is an observation
//! changing (a watch event, a simulated kubelet).

use std::time::Duration;

use super::disruption::Moment;

/// Karpenter's timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From creation to a launched instance (`status.providerID`).
    pub launch: Duration,
    /// From launch to a registered Node.
    pub registration: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { launch: Duration::from_secs(5 * 60), registration: Duration::from_secs(15 * 60) }
    }
}

/// What is known of the Node whose provider id is the NodeClaim's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSeen {
    pub name: String,
    /// Being deleted.
    pub deleting: bool,
    /// Registration is done on both sides (the Node adopted, the NodeClaim `Registered=True`).
    pub registered: bool,
    /// Ready, and none of the NodeClaim's startup taints (nor a not-ready taint) left.
    pub ready: bool,
    /// `Initialized=True` and the Node labelled initialized.
    pub initialized: bool,
}

/// What is known of one NodeClaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed<T> {
    pub created: Option<T>,
    /// Being deleted.
    pub deleting: bool,
    /// Carries the termination finalizer (so its deletion is ours to finish).
    pub finalizer: bool,
    /// When its instance launched (`Launched=True`); `None`: not launched yet.
    pub launched: Option<T>,
    /// The cloud no longer has its instance (garbage collection's finding, after its grace period).
    pub instance_gone: bool,
    pub node: Option<NodeSeen>,
}

/// What a NodeClaim needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not launched and within the launch timeout: launch (idempotent per NodeClaim).
    Launch,
    /// Not launched within the launch timeout: delete it.
    LaunchTimeout { age: Duration },
    /// Launched, no Node yet, within the registration timeout.
    AwaitNode,
    /// No Node within the registration timeout of the launch: delete it (termination ends the instance).
    RegistrationTimeout { since_launch: Duration },
    /// Its Node appeared: adopt it.
    Register { node: String },
    /// Registered; the Node is not ready for pods yet.
    AwaitInitialization,
    /// The Node is ready for pods: mark it initialized.
    Initialize { node: String },
    /// Nothing to do until something changes.
    Settled,
    /// Its Node is being deleted: delete the NodeClaim too (its termination removes the Node's finalizer).
    NodeDeleted { node: String },
    /// Its instance is gone: delete it (its termination finds nothing to terminate).
    InstanceGone,
    /// Being deleted with our finalizer: terminate (drain, instance, Node, finalizers).
    Terminate,
    /// Being deleted without our finalizer: not ours to finish.
    Nothing,
}

/// A step, and the moment it stops holding by itself (a timeout), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision<T> {
    pub step: Step,
    pub until: Option<T>,
}

/// The next step of one NodeClaim at `now`.
pub fn decide<T: Moment>(o: &Observed<T>, now: T, timeouts: &Timeouts) -> Decision<T> {
    let step = |step| Decision { step, until: None };
    if o.deleting {
        return step(if o.finalizer { Step::Terminate } else { Step::Nothing });
    }
    if o.instance_gone {
        return step(Step::InstanceGone);
    }
    let Some(launched) = o.launched else {
        let created = o.created.unwrap_or(now);
        let age = now.since(created);
        return if age >= timeouts.launch { step(Step::LaunchTimeout { age }) } else { Decision { step: Step::Launch, until: Some(created + timeouts.launch) } };
    };
    let Some(node) = &o.node else {
        let since_launch = now.since(launched);
        return if since_launch >= timeouts.registration {
            step(Step::RegistrationTimeout { since_launch })
        } else {
            Decision { step: Step::AwaitNode, until: Some(launched + timeouts.registration) }
        };
    };
    if node.deleting {
        return step(Step::NodeDeleted { node: node.name.clone() });
    }
    if !node.registered {
        return step(Step::Register { node: node.name.clone() });
    }
    if node.initialized {
        return step(Step::Settled);
    }
    step(if node.ready { Step::Initialize { node: node.name.clone() } } else { Step::AwaitInitialization })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn claim() -> Observed<Duration> {
        Observed { created: Some(s(0)), deleting: false, finalizer: true, launched: None, instance_gone: false, node: None }
    }

    fn node(registered: bool, ready: bool, initialized: bool) -> NodeSeen {
        NodeSeen { name: "n".into(), deleting: false, registered, ready, initialized }
    }

    #[test]
    fn a_claim_goes_launch_register_initialize_with_its_deadlines() {
        let to = Timeouts::default();
        let mut c = claim();
        assert_eq!(decide(&c, s(10), &to), Decision { step: Step::Launch, until: Some(s(300)) });
        assert_eq!(decide(&c, s(300), &to).step, Step::LaunchTimeout { age: s(300) }, "Karpenter's 5 minutes");
        c.launched = Some(s(20));
        assert_eq!(decide(&c, s(30), &to), Decision { step: Step::AwaitNode, until: Some(s(920)) }, "15 minutes from the launch");
        assert_eq!(decide(&c, s(919), &to).step, Step::AwaitNode);
        assert_eq!(decide(&c, s(920), &to).step, Step::RegistrationTimeout { since_launch: s(900) });
        c.node = Some(node(false, false, false));
        assert_eq!(decide(&c, s(2000), &to).step, Step::Register { node: "n".into() }, "a Node, however late, is adopted");
        c.node = Some(node(true, false, false));
        assert_eq!(decide(&c, s(40), &to), Decision { step: Step::AwaitInitialization, until: None });
        c.node = Some(node(true, true, false));
        assert_eq!(decide(&c, s(41), &to).step, Step::Initialize { node: "n".into() });
        c.node = Some(node(true, true, true));
        assert_eq!(decide(&c, s(42), &to).step, Step::Settled);
    }

    #[test]
    fn deletion_and_loss_come_first() {
        let to = Timeouts::default();
        let mut c = claim();
        c.launched = Some(s(0));
        c.node = Some(NodeSeen { deleting: true, ..node(true, true, true) });
        assert_eq!(decide(&c, s(5), &to).step, Step::NodeDeleted { node: "n".into() });
        c.instance_gone = true;
        assert_eq!(decide(&c, s(5), &to).step, Step::InstanceGone);
        c.deleting = true;
        assert_eq!(decide(&c, s(5), &to).step, Step::Terminate);
        c.finalizer = false;
        assert_eq!(decide(&c, s(5), &to).step, Step::Nothing);
    }
}
