//! Templates compiled and rendered by a process under an address-space limit (as `prlimit --as`
//! sets one), several at once: no constant is built past the limits while a template is parsed,
//! compiled (constant folding) or rendered. Before the engine bounded its folding, compiling
//! the first template below kept forty 100 MB strings and this process aborted
//! (`memory allocation of 100000016 bytes failed`).
//!
//! The limit is set on the whole process, so this file holds this one test: it is its own test
//! binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use agentry_domain::workflows::{TemplateContext, analyze, render};
use serde_json::json;

/// Address space the test may add to what the process has mapped when it starts: far less than
/// one template below would build if the engine folded it (4 GB), far more than the work needs.
const HEADROOM: u64 = 1536 * 1024 * 1024;

/// The process's mapped address space now (`VmSize`), in bytes.
fn mapped_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn no_template_builds_a_value_past_the_limits_while_compiled_or_rendered() {
    let (_, hard) = rlimit::Resource::AS.get().unwrap();
    rlimit::Resource::AS.set(mapped_bytes() + HEADROOM, hard).unwrap();

    // Forty constants of 100 MB each: refused when saved, refused when rendered (a workflow
    // stored before the check is compiled again by every render).
    let bomb = "{{ ('x' * 99999999)|length }}".repeat(40);
    // Forty constants within the largest value (256 KiB): they render, computed by the render.
    let large = "{{ ('x' * 200000)|length }}".repeat(40);
    let ctx = TemplateContext::new(json!({}));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (bomb, large, ctx) = (bomb.clone(), large.clone(), ctx.clone());
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let refused = analyze(&bomb).unwrap_err();
                    assert!(refused.0.contains("can never render"), "{refused}");
                    let failed = render(&json!(bomb), &ctx, None).unwrap_err();
                    assert!(failed.message.contains("more than"), "{failed}");

                    analyze(&large).unwrap();
                    let rendered = render(&json!(large), &ctx, None).unwrap();
                    assert_eq!(rendered, json!("200000".repeat(40)));

                    // The engine bounds its folding by itself, with no limits in force: a
                    // plain environment compiles the bomb without building its constants.
                    let env = minijinja::Environment::new();
                    env.template_from_str(&bomb).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}
