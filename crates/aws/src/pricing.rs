//! Prices: on-demand from the embedded catalog, spot from `DescribeSpotPriceHistory` when the answer
//! looks like a market, else stowage's synthetic spot prices.
//!
//! | call | parameters |
//! |---|---|
//! | `DescribeSpotPriceHistory` | `ProductDescriptions` = `Linux/UNIX`, `Linux/UNIX (Amazon VPC)`; `StartTime` = now (EC2 then returns the price in effect for every type and zone); `MaxResults` 1000, paginated |
//!
//! **On-demand.** Karpenter reads the Pricing API (`pricing:GetProducts`, us-east-1 endpoint) and
//! falls back to a generated table. stowage has no Pricing API client and moto has no Pricing API,
//! so on-demand prices are the embedded catalog's (`models/catalog/aws-us-east-1.json`, from
//! Karpenter's table); in other regions those are us-east-1 prices, and the provenance says so.
//! A type without an on-demand price is left out of the catalog (Karpenter: an unpriced offering is
//! unavailable).
//!
//! **Spot.** For each (type, zone) the newest price is kept. The whole answer is rejected, and the
//! synthetic prices used instead (`catalog::generate::synthetic_spot`, marked `priceSource:
//! synthetic`), when it is empty, when every price is the same (moto answers a constant 0.00001 for
//! everything; no real market prices hundreds of pools identically), or when fewer than half of the
//! prices lie in (1 % of on-demand, on-demand]. When the answer is accepted, an implausible single
//! price is replaced by the synthetic one (marked synthetic), and a (type, zone) without a price has
//! no available spot offering (as in Karpenter once spot prices are known).

use std::collections::{BTreeMap, BTreeSet};

use super::Ec2;
use super::errors::AwsError;
use stowage_input::catalog::default_catalog;
use stowage_input::catalog::generate::synthetic_spot;

/// The embedded catalog's on-demand price of a type (region-wide).
pub fn on_demand(instance_type: &str) -> Option<f64> {
    default_catalog().get(instance_type)?.offerings.iter().find(|o| o.capacity_type == "on-demand").map(|o| o.price)
}

/// What DescribeSpotPriceHistory said, newest per (type, zone).
#[derive(Clone, Debug, Default)]
pub struct SpotQuotes {
    pub prices: BTreeMap<(String, String), f64>,
}

pub(crate) async fn fetch_spot(ec2: &Ec2) -> Result<SpotQuotes, AwsError> {
    let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
    let mut newest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let req =
            ec2.client.describe_spot_price_history().product_descriptions("Linux/UNIX").product_descriptions("Linux/UNIX (Amazon VPC)").start_time(now).max_results(1000).set_next_token(token.clone());
        let page = ec2.call("DescribeSpotPriceHistory", || req.clone().send()).await?;
        for p in page.spot_price_history() {
            let (Some(t), Some(z), Some(price)) = (p.instance_type(), p.availability_zone(), p.spot_price().and_then(|s| s.parse::<f64>().ok())) else { continue };
            let ts = p.timestamp().map(|t| t.secs()).unwrap_or(0);
            let e = newest.entry((t.as_str().to_string(), z.to_string())).or_insert((ts, price));
            if ts > e.0 {
                *e = (ts, price);
            }
        }
        token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(SpotQuotes { prices: newest.into_iter().map(|(k, (_, p))| (k, p)).collect() })
}

/// Where spot prices come from.
#[derive(Clone, Debug, PartialEq)]
pub enum SpotSource {
    /// DescribeSpotPriceHistory, accepted.
    Market,
    /// Synthetic everywhere; the reason.
    Synthetic(String),
}

#[derive(Clone, Debug)]
pub struct SpotPrices {
    pub source: SpotSource,
    quotes: BTreeMap<(String, String), f64>,
}

fn plausible(price: f64, on_demand: f64) -> bool {
    price.is_finite() && price > on_demand * 0.01 && price <= on_demand
}

impl SpotPrices {
    pub fn synthetic(reason: impl Into<String>) -> Self {
        SpotPrices { source: SpotSource::Synthetic(reason.into()), quotes: BTreeMap::new() }
    }

    /// Accepts or rejects the quotes (module docs).
    pub fn judge(q: SpotQuotes) -> Self {
        if q.prices.is_empty() {
            return Self::synthetic("DescribeSpotPriceHistory returned no prices");
        }
        let distinct: BTreeSet<u64> = q.prices.values().map(|p| p.to_bits()).collect();
        if distinct.len() == 1 && q.prices.len() > 1 {
            let p = q.prices.values().next().copied().unwrap_or_default();
            return Self::synthetic(format!("DescribeSpotPriceHistory returned the same price {p} for all {} type-zone pairs (an emulator's constant, not a market)", q.prices.len()));
        }
        let judged: Vec<bool> = q.prices.iter().filter_map(|((t, _), p)| on_demand(t).map(|od| plausible(*p, od))).collect();
        let ok = judged.iter().filter(|b| **b).count();
        if judged.is_empty() || ok * 2 < judged.len() {
            return Self::synthetic(format!("only {ok} of {} DescribeSpotPriceHistory prices lie between 1 % of on-demand and on-demand", judged.len()));
        }
        SpotPrices { source: SpotSource::Market, quotes: q.prices }
    }

    /// The spot price of (type, zone) and whether it is synthetic; `None` = no spot price (the spot
    /// offering is unavailable).
    pub fn price(&self, instance_type: &str, zone: &str, on_demand: f64) -> Option<(f64, bool)> {
        match self.source {
            SpotSource::Synthetic(_) => Some((synthetic_spot(on_demand, instance_type, zone), true)),
            SpotSource::Market => {
                let p = *self.quotes.get(&(instance_type.to_string(), zone.to_string()))?;
                Some(if plausible(p, on_demand) { (p, false) } else { (synthetic_spot(on_demand, instance_type, zone), true) })
            }
        }
    }

    pub fn provenance(&self) -> String {
        match &self.source {
            SpotSource::Market => format!("Spot prices: DescribeSpotPriceHistory ({} type-zone prices, newest per pair); implausible single prices replaced by synthetic ones.", self.quotes.len()),
            SpotSource::Synthetic(why) => format!("SPOT PRICES ARE SYNTHETIC: {why}; spot = on-demand x (0.30 + 0.25 u), u a stable hash of (type, zone); offerings marked priceSource: synthetic."),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotes(v: &[(&str, &str, f64)]) -> SpotQuotes {
        SpotQuotes { prices: v.iter().map(|(t, z, p)| ((t.to_string(), z.to_string()), *p)).collect() }
    }

    #[test]
    fn a_constant_answer_is_rejected() {
        let s = SpotPrices::judge(quotes(&[("m5.large", "us-east-1a", 0.00001), ("c5.large", "us-east-1a", 0.00001)]));
        assert!(matches!(&s.source, SpotSource::Synthetic(r) if r.contains("same price")), "{:?}", s.source);
        let (p, synthetic) = s.price("m5.large", "us-east-1a", 0.096).unwrap();
        assert!(synthetic && p > 0.02 && p < 0.06, "{p}");
        assert!(s.provenance().starts_with("SPOT PRICES ARE SYNTHETIC"));
    }

    #[test]
    fn a_market_is_used_and_missing_pairs_have_no_spot() {
        let s = SpotPrices::judge(quotes(&[("m5.large", "us-east-1a", 0.035), ("m5.large", "us-east-1b", 0.041), ("c5.large", "us-east-1a", 5.0)]));
        assert_eq!(s.source, SpotSource::Market);
        assert_eq!(s.price("m5.large", "us-east-1a", 0.096), Some((0.035, false)));
        assert_eq!(s.price("m5.large", "us-east-1c", 0.096), None);
        let (_, synthetic) = s.price("c5.large", "us-east-1a", 0.085).unwrap();
        assert!(synthetic, "a spot price above on-demand is replaced");
    }

    #[test]
    fn mostly_implausible_answers_are_rejected() {
        let s = SpotPrices::judge(quotes(&[("m5.large", "us-east-1a", 9.0), ("m5.large", "us-east-1b", 8.0), ("c5.large", "us-east-1a", 0.03)]));
        assert!(matches!(s.source, SpotSource::Synthetic(_)));
    }
}
