//! Kubernetes quantities ("100m", "1.5Gi", "2") to the integers the domain uses.
//!
//! Parsing follows apimachinery's grammar (`as_f64`); conversion follows apimachinery: `MilliValue()` (cpu) and `Value()`
//! (everything else) round up to the next integer.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

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
    /// A fraction of an extended resource (`nvidia.com/gpu: 500m`): the API server accepts whole
    /// numbers only.
    #[error("{quantity:?} is not a whole number; extended resources such as {resource} are counted in whole units")]
    NotInteger { resource: String, quantity: String },
}

/// Whether a resource name is an extended resource (apimachinery's `IsExtendedResourceName`): a
/// domain-prefixed name outside `kubernetes.io/`, such as `nvidia.com/gpu`.
pub fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.starts_with("kubernetes.io/") && !name.starts_with("requests.")
}

/// A quantity's value, by apimachinery's grammar: a signed decimal number (`1`, `1.5`, `.5`, `5.`)
/// and a suffix, binary (`Ki` … `Ei`), decimal (`m`, none, `k`, `M`, `G`, `T`, `P`, `E`) or an
/// exponent (`e3`, `E-2`). Every quantity the API server accepts parses (kube_quantity refused `1Ei`).
fn as_f64(q: &str) -> Result<f64, QuantityError> {
    let invalid = |reason: &str| QuantityError::Invalid { quantity: q.to_string(), reason: reason.to_string() };
    let t = q.trim();
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let negative = t.starts_with('-');
    let num_len = body.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
    let (num, suffix) = body.split_at(num_len);
    if !num.bytes().any(|b| b.is_ascii_digit()) || num.bytes().filter(|b| *b == b'.').count() > 1 {
        return Err(invalid("expected a number such as 100m, 1.5Gi or 2"));
    }
    let n: f64 = num.parse().map_err(|_| invalid("expected a number such as 100m, 1.5Gi or 2"))?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
                return Err(invalid("unknown suffix (Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent such as e3)"));
            }
            10f64.powi(exp.parse::<i32>().map_err(|_| invalid("exponent out of range"))?)
        }
        _ => return Err(invalid("unknown suffix (Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent such as e3)")),
    };
    let v = n * scale;
    Ok(if negative { -v } else { v })
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

/// The amount a resource name is stored in: millicores for cpu, whole units otherwise. Extended
/// resources must be whole numbers (the API server rejects `nvidia.com/gpu: 500m`).
pub fn amount(name: &str, q: &str) -> Result<i64, QuantityError> {
    if name == CPU {
        return milli(q);
    }
    if is_extended(name) {
        let v = as_f64(q)?;
        check_range(v, q)?;
        if v.fract() != 0.0 {
            return Err(QuantityError::NotInteger { resource: name.to_string(), quantity: q.to_string() });
        }
    }
    value(q)
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
        assert_eq!(value("1Ei").unwrap(), 1 << 60, "every valid Kubernetes quantity");
        assert_eq!(value("8E").unwrap(), 8_000_000_000_000_000_000);
        assert_eq!(amount("nvidia.com/gpu", "2").unwrap(), 2);
        assert!(matches!(amount("nvidia.com/gpu", "500m"), Err(QuantityError::NotInteger { .. })));
        assert!(matches!(amount("example.com/dongle", "1.5"), Err(QuantityError::NotInteger { .. })));
        assert_eq!(amount("memory", "500m").unwrap(), 1, "native resources round up");
        assert_eq!(value(".5k").unwrap(), 500);
        assert_eq!(value("5.").unwrap(), 5);
        assert_eq!(value("+2").unwrap(), 2);
        assert_eq!(value("-1Gi").unwrap(), -(1 << 30));
        assert_eq!(value("1E").unwrap(), 1_000_000_000_000_000_000);
        assert_eq!(milli("1e-3").unwrap(), 1);
        for bad in ["", "Gi", "1.2.3", "1 Gi", "1gi", "1e", "1e+", "1Ki2", "--1", "NaN", "inf", "1e99999"] {
            assert!(value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn format_round_trips() {
        for (n, s) in [("cpu", "1930m"), ("cpu", "2"), ("memory", "6903Mi"), ("memory", "16Gi"), ("pods", "29")] {
            assert_eq!(format(n, amount(n, s).unwrap()), s);
        }
    }
}
