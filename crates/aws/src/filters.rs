//! EC2 `Describe*` filters as Karpenter's selector terms build them.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;

/// One filter: `name` = any of `values`.
pub(crate) fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    let mut f = Filter::builder().name(name);
    for v in values {
        f = f.values(v);
    }
    f.build()
}

/// `tag:<k>=<v>` per tag, `tag-key=<k>` for a value of `*` (Karpenter's selector-term tags).
pub(crate) fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter().map(|(k, v)| if v == "*" { filter("tag-key", [k.as_str()]) } else { filter(&format!("tag:{k}"), [v.as_str()]) }).collect()
}
