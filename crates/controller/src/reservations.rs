//! Capacity blocks that end (Karpenter's `capacityreservation.expiration`): as leader, every NodeClass
//! round asks the cloud which reservations of the NodeClaims are expiring and deletes those NodeClaims
//! (`stowage_decide::reservations`), so their nodes drain before EC2 reclaims the instances. The
//! deletion is the usual one: the termination finalizer drains the node and its pods are planned again.

use kube::api::{Api, DeleteParams};

use super::events::Reason;
use super::metrics::Stage;
use super::{Ctx, kube_status, lock};
use stowage_decide::cloud::CloudProvider;
use stowage_input::api::NodeClaim;

/// One expiration round; false if the cloud could not be asked or a deletion failed.
pub(crate) async fn expire<P: CloudProvider + 'static>(ctx: &Ctx<P>) -> bool {
    if !ctx.is_leader() {
        return true;
    }
    let claims: Vec<NodeClaim> = lock(&ctx.state).nodeclaims.iter().cloned().collect();
    let ids = stowage_decide::reservations::ids(&claims);
    if ids.is_empty() {
        return true;
    }
    let expiring = match ctx.cloud.expiring_reservations(&ids).await {
        Ok(e) => e.into_iter().collect(),
        Err(e) => {
            tracing::warn!(error = %e, reservations = ?ids, "cannot ask which capacity reservations are expiring; trying again next round");
            ctx.metrics.error(Stage::Cloud);
            return false;
        }
    };
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut ok = true;
    for name in stowage_decide::reservations::expire(&claims, &expiring) {
        let claim = claims.iter().find(|c| c.metadata.name.as_deref() == Some(name.as_str()));
        let id = claim.and_then(|c| c.metadata.labels.as_ref()).and_then(|l| l.get(stowage_core::domain::labels::keys::CAPACITY_RESERVATION_ID)).cloned().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(r) => {
                if let Some(c) = r.left() {
                    lock(&ctx.state).apply(c);
                }
                tracing::info!(nodeclaim = %name, capacity_reservation = %id, "initiating delete for capacity block expiration");
                if let Some(c) = claim {
                    ctx.events.nodeclaim(c, Reason::CapacityReservationExpiring, format!("capacity block {id} ends within 40 minutes; the node is drained and its pods planned again"));
                }
                ctx.wake_lifecycle(&name);
                ctx.request_batch("replan/capacity-reservation-expiring");
            }
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "deleting a NodeClaim of an expiring capacity block failed; trying again next round");
                ok = false;
            }
        }
    }
    ok
}
