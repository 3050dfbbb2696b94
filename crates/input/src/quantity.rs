//! Kubernetes quantities ("100m", "1.5Gi", "2") to the integers the domain uses.
//!
//! Parsing is kube_quantity's; conversion follows apimachinery: `MilliValue()` (cpu) and `Value()`
//! (everything else) round up to the next integer.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

use stowage_core::domain::resources::{CPU, Resources};

/// A quantity stowage cannot use. The caller names the file, object and field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity (`100m`, `1.5Gi`, `2`); `reason` is the parser's.
    #[error("invalid quantity {quantity:?}: {reason}")]
    Invalid { quantity: String, reason: String },
    #[error("invalid quantity {quantity:?}: out of range")]
    OutOfRange { quantity: String },
    /// A request, limit or capacity below zero.
    #[error("negative quantity {quantity:?}")]
    Negative { quantity: String },
}

fn as_f64(q: &str) -> Result<f64, QuantityError> {
    let parsed: ParsedQuantity = Quantity(q.trim().to_string()).try_into().map_err(|e: kube_quantity::ParseQuantityError| QuantityError::Invalid { quantity: q.to_string(), reason: e.to_string() })?;
    parsed.to_bytes_f64().ok_or_else(|| QuantityError::OutOfRange { quantity: q.to_string() })
}

/// Rounds up, treating values within a relative 1e-9 of an integer as that integer (the parser works
/// in binary floating point; Kubernetes quantities have at most 3 decimal places at milli scale).
fn ceil_exactish(x: f64) -> i64 {
    let r = x.round();
    if (x - r).abs() <= 1e-9 * r.abs().max(1.0) { r as i64 } else { x.ceil() as i64 }
}

/// `MilliValue()`.
pub(crate) fn milli(q: &str) -> Result<i64, QuantityError> {
    let v = as_f64(q)?;
    check_range(v * 1000.0, q)?;
    Ok(ceil_exactish(v * 1000.0))
}

/// `Value()`.
pub fn value(q: &str) -> Result<i64, QuantityError> {
    let v = as_f64(q)?;
    check_range(v, q)?;
    Ok(ceil_exactish(v))
}

fn check_range(v: f64, q: &str) -> Result<(), QuantityError> {
    if !v.is_finite() || v.abs() > 9.0e18 {
        return Err(QuantityError::OutOfRange { quantity: q.to_string() });
    }
    Ok(())
}

/// The amount a resource name is stored in: millicores for cpu, whole units otherwise.
pub fn amount(name: &str, q: &str) -> Result<i64, QuantityError> {
    if name == CPU { milli(q) } else { value(q) }
}

/// A `ResourceList` to a resource vector. Errors name the resource.
pub fn resources<'a>(list: impl IntoIterator<Item = (&'a String, &'a Quantity)>) -> Result<Resources, (String, QuantityError)> {
    let mut r = Resources::default();
    for (name, q) in list {
        let v = amount(name, &q.0).map_err(|e| (name.clone(), e))?;
        if v < 0 {
            return Err((name.clone(), QuantityError::Negative { quantity: q.0.clone() }));
        }
        r.set(name, v);
    }
    Ok(r)
}

/// Formats an integer amount back into a canonical Kubernetes quantity string.
pub fn format(name: &str, v: i64) -> String {
    if name == CPU {
        if v % 1000 == 0 { format!("{}", v / 1000) } else { format!("{v}m") }
    } else {
        const KI: i64 = 1024;
        for (suffix, mult) in [("Ei", KI.pow(6)), ("Pi", KI.pow(5)), ("Ti", KI.pow(4)), ("Gi", KI.pow(3)), ("Mi", KI.pow(2)), ("Ki", KI)] {
            if v != 0 && v % mult == 0 && (name == "memory" || name == "ephemeral-storage" || name.starts_with("hugepages-")) {
                return format!("{}{suffix}", v / mult);
            }
        }
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_rounding() {
        assert_eq!(milli("100m").unwrap(), 100);
        assert_eq!(milli("0.1").unwrap(), 100);
        assert_eq!(milli("1.5").unwrap(), 1500);
        assert_eq!(milli("2").unwrap(), 2000);
        assert_eq!(milli("0.0001").unwrap(), 1, "sub-milli rounds up");
        assert_eq!(value("1Gi").unwrap(), 1 << 30);
        assert_eq!(value("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(value("1k").unwrap(), 1000);
        assert_eq!(value("100Mi").unwrap(), 100 << 20);
        assert_eq!(value("1e3").unwrap(), 1000);
        assert_eq!(value("500m").unwrap(), 1, "Value() rounds up");
        assert!(value("abc").is_err());
        assert!(value("1Zi").is_err());
    }

    #[test]
    fn format_round_trips() {
        for (n, s) in [("cpu", "1930m"), ("cpu", "2"), ("memory", "6903Mi"), ("memory", "16Gi"), ("pods", "29")] {
            assert_eq!(format(n, amount(n, s).unwrap()), s);
        }
    }
}
