//! The lifetime benchmark's smoke test (issue 19; docs/lifetime.md): Karpenter's own operator and
//! stowage's controller each run the one-hour smoke history (compressed 40x) on a real control plane
//! with the same NodePool, catalog and boot delay. Both must run every pod the history asks for, lose
//! no task, consolidate after the scale-down, write the benchmark's files, and cost no less than the
//! lower bound of the demand allows (with slack for the time pods wait for their nodes, when nothing is billed).
//!
//! Needs Go (the first run builds the control plane and Karpenter's operator, minutes).

use stowage_lifetime::history;
use stowage_lifetime::run::Contender;
use stowage_lifetime::setup::{Setup, Timing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_controllers_run_the_smoke_history_and_consolidate() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new("stowage_lifetime=info,stowage=warn")).with_test_writer().try_init();
    let h = history::smoke();
    // Budget 100 %: both may remove every empty node at once, so the run is short.
    let mut setup = Setup::default_setup();
    setup.budget = "100%".into();
    let timing = Timing { compression: 40.0, boot_s: 40.0, consolidate_after_s: 80.0, scale_timers: true };
    let out = stowage_e2e::e2e_root().join("lifetime-smoke");
    let _ = std::fs::remove_dir_all(&out);
    let cmp = stowage_lifetime::compare("smoke", &h, &setup, timing, &[Contender::Karpenter, Contender::Stowage], &out).await.unwrap_or_else(|e| panic!("{e}"));
    println!("{}", stowage_lifetime::report::table(&cmp.history, cmp.timing, &cmp.summaries, cmp.bound_usd));

    assert!(cmp.bound_usd > 0.0, "the demand has a bound");
    for (s, run) in cmp.summaries.iter().zip(&cmp.runs) {
        let who = &s.contender;
        assert!(run.driver_errors.is_empty(), "{who}: the history played without errors: {:?}", run.driver_errors);
        assert!(run.stand_in_errors.is_empty(), "{who}: the kubelet stand-in recorded errors: {:?}", run.stand_in_errors);
        assert!(s.nodes_launched > 0 && s.cost_usd > 0.0, "{who} launched nodes: {s:?}");
        assert_eq!(s.never_ran, 0, "{who}: every pod the history asks for ran");
        assert_eq!(s.tasks_lost, 0, "{who}: every task ran its whole runtime (an evicted one runs again)");
        // 2 apps at 12 replicas and the Job's pods, each of a pod that actually ran.
        assert!(s.pods >= 6 + 6 + 8, "{who}: pods seen {}", s.pods);
        let peak = s.curve.iter().map(|p| p.1).fold(0.0, f64::max);
        let last = s.curve.last().map_or(0.0, |p| p.1);
        assert!(last < peak, "{who} consolidated after the scale-down: $/h {last} at the end vs a peak of {peak}");
        // Pods wait for nodes (nothing billed meanwhile) and run their time from then on, so a
        // controller may come in somewhat under the bound of the instantaneous demand, never far.
        assert!(s.cost_usd >= 0.7 * cmp.bound_usd, "{who}: cost {} far below the bound {}: a billing or bound bug", s.cost_usd, cmp.bound_usd);
    }
    for f in ["results.json", "table.md", "cost.svg", "karpenter/karpenter.log", "karpenter/recording.json", "stowage/recording.json", "stowage/nodeclaims-at-end.json"] {
        let p = out.join(f);
        assert!(std::fs::metadata(&p).is_ok_and(|m| m.len() > 0), "{} written", p.display());
    }
    let log = std::fs::read_to_string(out.join("karpenter/karpenter.log")).unwrap();
    assert!(log.contains("disrupting node(s)"), "Karpenter's log shows it consolidated");
}
