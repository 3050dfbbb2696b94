//! Prices: on-demand from the AWS Price List API (`pricing:GetProducts`) for the provider's region,
//! over the embedded table; spot from `DescribeSpotPriceHistory` when the answer looks like a market,
//! else stowage's synthetic spot prices.
//!
//! | call | parameters |
//! |---|---|
//! | `GetProducts` | `ServiceCode` `AmazonEC2`; TERM_MATCH filters `regionCode` = the region, `serviceCode` `AmazonEC2`, `preInstalledSw` `NA`, `operatingSystem` `Linux`, `capacitystatus` `Used`, `marketoption` `OnDemand`, and either `tenancy` `Shared` + `productFamily` `Compute Instance` or (bare metal) `tenancy` `Dedicated` + `productFamily` `Compute Instance (bare metal)`; `MaxResults` 100, paginated; sent to the Price List endpoint of [`pricing_api_region`] |
//! | `DescribeSpotPriceHistory` | `ProductDescriptions` = `Linux/UNIX`, `Linux/UNIX (Amazon VPC)`; `StartTime` = now (EC2 then returns the price in effect for every type and zone); `MaxResults` 1000, paginated |
//!
//! **On-demand**, as Karpenter does it (aws/karpenter-provider-aws `pkg/providers/pricing`): the
//! embedded table first (`models/catalog/aws-us-east-1.json`, Karpenter's generated us-east-1 table;
//! in other regions those are us-east-1 prices, and the provenance says so), then every price the
//! Price List API gives for the region on top of it (a type the API does not price keeps the table's
//! price), refreshed every `prices_ttl` (12 h). Each Price List item is a JSON document; its
//! `product.attributes.instanceType` gets the non-zero `terms.OnDemand.*.priceDimensions.*.pricePerUnit`
//! in USD (CNY in `cn-` regions). An answer without a price for either query is a failed fetch. Not
//! asked in GovCloud (no Price List API there) nor with `isolated_vpc` (Karpenter's `isolatedVPC`: no
//! endpoint for the API); a failed fetch keeps what was there and asks again after `offline_retry`.
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

/// The embedded catalog's on-demand price of a type (us-east-1's, region-wide).
pub fn on_demand(instance_type: &str) -> Option<f64> {
    default_catalog().get(instance_type)?.offerings.iter().find(|o| o.capacity_type == "on-demand").map(|o| o.price)
}

/// The region whose Price List endpoint serves `region` (the API has endpoints in a few regions only;
/// Karpenter's choice).
pub fn pricing_api_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else if region.starts_with("eu-") {
        "eu-central-1"
    } else {
        "us-east-1"
    }
}

/// Whether the Price List API can be asked for `region` at all.
pub fn pricing_api_serves(region: &str, isolated_vpc: bool) -> bool {
    !isolated_vpc && !region.starts_with("us-gov")
}

/// The Price List client and the retry policy its calls go through.
#[derive(Clone, Debug)]
pub(crate) struct PriceList {
    pub client: aws_sdk_pricing::Client,
    pub retry: super::retry::RetryPolicy,
}

/// On-demand prices: the embedded table, overlaid with the Price List API's for the region once fetched.
#[derive(Clone, Debug, Default)]
pub struct OnDemandPrices {
    /// The API's prices (empty until a fetch succeeded).
    fetched: BTreeMap<String, f64>,
    /// Where the API's prices came from, or why there are none.
    note: String,
}

impl OnDemandPrices {
    pub fn embedded(why: impl Into<String>) -> Self {
        OnDemandPrices { fetched: BTreeMap::new(), note: why.into() }
    }

    pub fn from_api(region: &str, prices: BTreeMap<String, f64>) -> Self {
        let note = format!("the AWS Price List API for {region} ({} types)", prices.len());
        OnDemandPrices { fetched: prices, note }
    }

    /// The price of `instance_type`: the API's, else the embedded table's.
    pub fn price(&self, instance_type: &str) -> Option<f64> {
        self.fetched.get(instance_type).copied().or_else(|| on_demand(instance_type))
    }

    pub fn from_the_api(&self) -> bool {
        !self.fetched.is_empty()
    }

    pub fn provenance(&self, region: &str) -> String {
        let table = if region == "us-east-1" {
            "the embedded table (models/catalog/aws-us-east-1.json, Karpenter's generated us-east-1 table)".to_string()
        } else {
            "the embedded us-east-1 table (models/catalog/aws-us-east-1.json), US-EAST-1 PRICES USED FOR THIS REGION".to_string()
        };
        if self.from_the_api() {
            format!("On-demand prices: {}; a type it does not price keeps {table}.", self.note)
        } else {
            format!("On-demand prices: {table}; the Price List API's are not used: {}.", self.note)
        }
    }
}

/// One Price List item, the parts that matter.
#[derive(serde::Deserialize)]
struct PriceItem {
    product: PriceProduct,
    #[serde(default)]
    terms: PriceTerms,
}

#[derive(serde::Deserialize)]
struct PriceProduct {
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

#[derive(serde::Deserialize, Default)]
struct PriceTerms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, PriceTerm>,
}

#[derive(serde::Deserialize)]
struct PriceTerm {
    #[serde(rename = "priceDimensions", default)]
    price_dimensions: BTreeMap<String, PriceDimension>,
}

#[derive(serde::Deserialize)]
struct PriceDimension {
    #[serde(rename = "pricePerUnit", default)]
    price_per_unit: BTreeMap<String, String>,
}

/// The on-demand prices in one page of Price List items (module docs); items that do not parse or
/// carry no instance type are skipped, as Karpenter skips them.
pub(crate) fn on_demand_page(items: &[String], currency: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for item in items {
        let Ok(p) = serde_json::from_str::<PriceItem>(item) else {
            tracing::debug!("a Price List item that is not JSON of the expected shape was skipped");
            continue;
        };
        let Some(t) = p.product.attributes.get("instanceType").filter(|t| !t.is_empty()) else { continue };
        for term in p.terms.on_demand.values() {
            for d in term.price_dimensions.values() {
                if let Some(price) = d.price_per_unit.get(currency).and_then(|v| v.parse::<f64>().ok()).filter(|p| p.is_finite() && *p > 0.0) {
                    out.insert(t.clone(), price);
                }
            }
        }
    }
    out
}

/// Both Price List queries for `region` (shared instances, bare metal), merged.
pub(crate) async fn fetch_on_demand(api: &PriceList, region: &str) -> Result<BTreeMap<String, f64>, AwsError> {
    use aws_sdk_pricing::types::{Filter, FilterType};
    let term = |field: &str, value: &str| {
        Filter::builder().r#type(FilterType::TermMatch).field(field).value(value).build().map_err(|e| AwsError::invalid_response("GetProducts", format!("building the {field} filter: {e}")))
    };
    let currency = if region.starts_with("cn-") { "CNY" } else { "USD" };
    let mut all = BTreeMap::new();
    for (tenancy, family) in [("Shared", "Compute Instance"), ("Dedicated", "Compute Instance (bare metal)")] {
        let filters = vec![
            term("regionCode", region)?,
            term("serviceCode", "AmazonEC2")?,
            term("preInstalledSw", "NA")?,
            term("operatingSystem", "Linux")?,
            term("capacitystatus", "Used")?,
            term("marketoption", "OnDemand")?,
            term("tenancy", tenancy)?,
            term("productFamily", family)?,
        ];
        let mut prices = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let req = api.client.get_products().service_code("AmazonEC2").set_filters(Some(filters.clone())).max_results(100).set_next_token(token.clone());
            let page = super::retry::call_with_retries(&api.retry, "GetProducts", || req.clone().send()).await?;
            prices.extend(on_demand_page(page.price_list(), currency));
            token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        if prices.is_empty() {
            return Err(AwsError::invalid_response("GetProducts", format!("no on-demand price for {region} ({tenancy}, {family})")));
        }
        all.extend(prices);
    }
    Ok(all)
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

    /// A Price List item in the API's shape (trimmed to what the reader needs, plus noise it skips).
    fn item(instance_type: &str, usd: &str) -> String {
        serde_json::json!({
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": instance_type, "regionCode": "eu-west-1", "tenancy": "Shared"}, "sku": "ABC"},
            "serviceCode": "AmazonEC2",
            "terms": {"OnDemand": {"ABC.JRTCKXETXF": {"priceDimensions": {"ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}, "sku": "ABC"}}},
            "version": "20260701", "publicationDate": "2026-07-01T00:00:00Z"
        })
        .to_string()
    }

    #[test]
    fn price_list_items_give_the_on_demand_price_per_type() {
        let page = vec![
            item("m5.large", "0.1070000000"),
            item("c5.large", "0.0000000000"),
            "not json".to_string(),
            serde_json::json!({"product": {"attributes": {}}}).to_string(),
            item("r5.large", "0.1410000000"),
        ];
        let prices = on_demand_page(&page, "USD");
        assert_eq!(prices, [("m5.large".to_string(), 0.107), ("r5.large".to_string(), 0.141)].into_iter().collect(), "zero prices, bad items and items without a type are skipped");
        assert!(on_demand_page(&page, "CNY").is_empty(), "cn- regions read CNY");
    }

    #[test]
    fn the_price_list_endpoint_follows_karpenters_choice_and_govcloud_and_isolated_vpcs_are_not_asked() {
        assert_eq!(pricing_api_region("us-west-2"), "us-east-1");
        assert_eq!(pricing_api_region("ap-southeast-2"), "ap-south-1");
        assert_eq!(pricing_api_region("eu-north-1"), "eu-central-1");
        assert_eq!(pricing_api_region("cn-north-1"), "cn-northwest-1");
        assert!(pricing_api_serves("eu-west-1", false));
        assert!(!pricing_api_serves("us-gov-west-1", false));
        assert!(!pricing_api_serves("eu-west-1", true));
        let p = OnDemandPrices::from_api("eu-west-1", [("m5.large".to_string(), 0.107)].into_iter().collect());
        assert_eq!(p.price("m5.large"), Some(0.107));
        assert_eq!(p.price("c5.large"), on_demand("c5.large"), "a type the API did not price keeps the table's");
        assert_eq!(OnDemandPrices::embedded("x").price("m5.large"), on_demand("m5.large"));
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
