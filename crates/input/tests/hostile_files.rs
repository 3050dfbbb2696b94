//! Files on disk against the readers' limits (issue 20): gzip bombs and multi-member gzip, the size
//! cap, the same file named twice. Every error names the file and says what to do.

use std::io::Write;
use std::path::{Path, PathBuf};

use stowage_input::Limits;

const POD: &str = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: NAME, namespace: default}\nspec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\n";

fn pod(name: &str) -> String {
    POD.replace("NAME", name)
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("stowage-hostile-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gzip(members: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in members {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(m).unwrap();
        out.extend(enc.finish().unwrap());
    }
    out
}

#[track_caller]
fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "the error does not mention {p:?}:\n{msg}");
    }
}

/// A gzip bomb (16 MiB of blanks in a 16 KiB file) stops at the input limit, read no further than it.
#[test]
fn a_gzip_bomb_stops_at_the_input_limit() {
    let s = Scratch::new("bomb");
    let f = s.path("bomb.yaml.gz");
    let mut text = pod("p").into_bytes();
    text.resize(16 << 20, b' ');
    text.push(b'\n');
    std::fs::write(&f, gzip(&[&text])).unwrap();
    let limits = Limits { max_input_bytes: 1 << 20, ..Default::default() };
    let msg = stowage_input::load_with(std::slice::from_ref(&f), &limits).unwrap_err().to_string();
    assert_mentions(&msg, &[&f.display().to_string(), "larger than the input limit of 1048576 bytes", "decompressed", "--max-input-bytes"]);
    // Under the default limit (32 MiB) the same file is a valid workload of one pod.
    let w = stowage_input::load(std::slice::from_ref(&f)).expect("16 MiB is under the default limit");
    assert_eq!(w.cluster.pods.len(), 1);
}

/// All files of a run share the limit.
#[test]
fn the_input_limit_counts_every_file() {
    let s = Scratch::new("total");
    let (a, b) = (s.path("a.yaml"), s.path("b.yaml"));
    std::fs::write(&a, pod("a")).unwrap();
    std::fs::write(&b, pod("b")).unwrap();
    let limits = Limits { max_input_bytes: (pod("a").len() + pod("b").len() - 1) as u64, ..Default::default() };
    let msg = stowage_input::load_with(&[a.clone(), b.clone()], &limits).unwrap_err().to_string();
    assert_mentions(&msg, &[&b.display().to_string(), "input limit", "all files of the run together"]);
    let limits = Limits { max_input_bytes: (pod("a").len() + pod("b").len()) as u64, ..Default::default() };
    assert_eq!(stowage_input::load_with(&[a, b], &limits).expect("exactly the limit loads").cluster.pods.len(), 2);
}

/// A multi-member gzip file (as `cat a.gz b.gz` or pigz write it) is read to its end, as gunzip reads it.
#[test]
fn every_member_of_a_multi_member_gzip_is_read() {
    let s = Scratch::new("members");
    let f = s.path("pods.yaml.gz");
    std::fs::write(&f, gzip(&[pod("a").as_bytes(), pod("b").as_bytes(), pod("c").as_bytes()])).unwrap();
    let w = stowage_input::load(std::slice::from_ref(&f)).expect("loads");
    let names: Vec<&str> = w.cluster.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
}

/// The same file named twice (or through its folder) is an error naming the second mention, not a
/// batch of doubled pods planned at double cost.
#[test]
fn the_same_file_twice_is_an_error() {
    let s = Scratch::new("twice");
    let f = s.path("pods.yaml");
    std::fs::write(&f, pod("p")).unwrap();
    let msg = stowage_input::load(&[f.clone(), f.clone()]).unwrap_err().to_string();
    assert_mentions(&msg, &[&f.display().to_string(), "named twice"]);
    let msg = stowage_input::load(&[s.0.clone(), f.clone()]).unwrap_err().to_string();
    assert_mentions(&msg, &[&f.display().to_string(), "named twice"]);
}

/// The catalog and weights readers share the file limit and the strict JSON rules.
#[test]
fn catalog_and_weights_files_are_bounded() {
    let s = Scratch::new("catalog");
    let f = s.path("catalog.json.gz");
    // 40 MiB of blanks after a catalog, written in chunks: past the default 32 MiB limit.
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&f).unwrap(), flate2::Compression::fast());
    enc.write_all(b"{\"schema\":\"stowage.dev/catalog/v1\",\"name\":\"x\",\"instanceTypes\":[]}").unwrap();
    let blanks = vec![b' '; 1 << 20];
    for _ in 0..40 {
        enc.write_all(&blanks).unwrap();
    }
    enc.finish().unwrap();
    let msg = stowage_input::catalog::load(&f).unwrap_err().to_string();
    assert_mentions(&msg, &[&f.display().to_string(), "input limit"]);
    let w = s.path("weights.yaml");
    std::fs::write(&w, "schema: [\n").unwrap();
    assert_mentions(&stowage_input::weights::load(&w).unwrap_err().to_string(), &[&w.display().to_string()]);
    assert!(Path::new(&w).exists());
}

/// A large JSON List far past the pods limit is refused by the light count before the full parse. The
/// pods here carry a duplicate key, which the full (strict) parse would report first: getting the
/// pods-limit error instead shows the count came before it. A small text of the same pods is parsed in
/// full and reports the duplicate key.
#[test]
fn a_large_json_list_past_the_pods_limit_is_refused_before_it_is_parsed() {
    let item = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q","namespace":"default"},"spec":{"containers":[{"name":"c","image":"pause"}]}}"#;
    let n = stowage_input::read::PRECOUNT_BYTES / item.len() + 1;
    let list = |n: usize| format!(r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#, vec![item; n].join(","));
    let limits = Limits { max_pods: 1000, ..Default::default() };
    let big = list(n);
    let f = Path::new("big.json");
    let msg = stowage_input::load_texts_with([(f, big.as_str())], &limits).unwrap_err().to_string();
    assert_mentions(&msg, &["big.json", &format!("{n} pods, more than the limit of 1000 pods per batch"), "--max-pods"]);
    let small = list(2);
    let msg = stowage_input::load_texts_with([(Path::new("small.json"), small.as_str())], &limits).unwrap_err().to_string();
    assert_mentions(&msg, &["small.json", "invalid JSON", "duplicate"]);
    assert_eq!(stowage_input::read::count_json_pods(&small), Some(2));
    assert_eq!(stowage_input::read::count_json_pods(r#"{"kind":"Pod"}"#), Some(1));
    assert_eq!(stowage_input::read::count_json_pods(r#"{"kind":"List","items":[{"kind":"Node"},{"kind":"Pod"}]}"#), Some(1));
    assert_eq!(stowage_input::read::count_json_pods("[1, 2]"), None);
}

/// A JSON List of PRECOUNT_BYTES or more is read item by item (`read::for_each_object`). It must load
/// what the same objects load in small files, with `items` before `kind` as kubectl writes it, and
/// report a bad item as the whole-document parse does: a duplicate key with its line and column in the
/// file, an item that is not an object on its index.
#[test]
fn a_large_json_list_read_item_by_item_loads_what_small_files_load() {
    let pod = |i: usize| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}","namespace":"default","labels":{{"app":"a{}"}}}},"spec":{{"containers":[{{"name":"c","image":"pause","resources":{{"requests":{{"cpu":"{}m","memory":"64Mi"}}}}}}]}}}}"#,
            i % 7,
            100 + i % 5
        )
    };
    let n = stowage_input::read::PRECOUNT_BYTES / pod(0).len() + 1;
    let pods: Vec<String> = (0..n).map(pod).collect();
    let list = |items: &[String]| format!("{{\"apiVersion\":\"v1\",\"items\":[\n{}\n],\"kind\":\"List\",\"metadata\":{{}}}}", items.join(",\n"));
    let big = list(&pods);
    assert!(big.len() >= stowage_input::read::PRECOUNT_BYTES);
    let limits = Limits { max_pods: n, ..Default::default() };
    let streamed = stowage_input::load_texts_with([(Path::new("big.json"), big.as_str())], &limits).unwrap();
    // The same pods in files below the size where items are streamed.
    let halves: Vec<String> = pods.chunks(n / 4 + 1).map(list).collect();
    assert!(halves.iter().all(|h| h.len() < stowage_input::read::PRECOUNT_BYTES));
    let names: Vec<String> = (0..halves.len()).map(|i| format!("part{i}.json")).collect();
    let whole = stowage_input::load_texts_with(names.iter().map(|f| Path::new(f.as_str())).zip(halves.iter().map(String::as_str)), &limits).unwrap();
    assert_eq!(streamed.cluster.pods.len(), n);
    assert_eq!(format!("{:?}", streamed.cluster.pods), format!("{:?}", whole.cluster.pods), "the same pods either way");
    let sources = |w: &stowage_input::Workload| w.objects.pods.iter().map(|p| p.source.item).collect::<Vec<_>>();
    assert_eq!(sources(&streamed), (0..n).map(Some).collect::<Vec<_>>(), "each pod knows its item");

    // A duplicate key in the last item: the error the whole-document parse gives, line and column in
    // the file included.
    let mut bad = pods.clone();
    bad[n - 1] = bad[n - 1].replace(r#""namespace":"default""#, r#""namespace":"default","namespace":"x""#);
    let bad = list(&bad);
    let msg = stowage_input::load_texts_with([(Path::new("big.json"), bad.as_str())], &limits).unwrap_err().to_string();
    let want = stowage_core::json::parse(&bad).unwrap_err().to_string();
    assert!(want.contains(&format!("line {}", n + 1)), "{want}");
    assert_mentions(&msg, &["big.json", "invalid JSON", &want]);

    // An item that is not an object, named by its index.
    let mut bad = pods.clone();
    bad[5] = "17".into();
    let bad = list(&bad);
    let msg = stowage_input::load_texts_with([(Path::new("big.json"), bad.as_str())], &limits).unwrap_err().to_string();
    assert_mentions(&msg, &["big.json", "items[5]", "a List item must be an object"]);
    let small = list(&bad_small());
    let msg_small = stowage_input::load_texts_with([(Path::new("big.json"), small.as_str())], &limits).unwrap_err().to_string();
    assert_eq!(msg, msg_small.replace("items[1]", "items[5]"), "the same error as a small List's");
}

fn bad_small() -> Vec<String> {
    vec![r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"pause"}]}}"#.to_string(), "17".to_string()]
}
