//! The variants behind the reasons in `docs/performance.md` for the targets `cargo xtask bench`
//! misses: where the time of a dispatch goes, how many allocations a call makes, and which part
//! of the `bash` tool's process handling costs what against a raw `bash -c true`.
//!
//! Run it with `cargo run --release -p bench --example investigate`.

#![allow(clippy::print_stdout)]

use anyhow::{Result, anyhow, ensure};
use dsh_tools::{ContentBlock, ExecContext, Tool, ToolCall, ToolError, ToolRegistry, ValueSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tool_bash::shell::{ShellExecutor, ShellRequest};
use tool_bash::{BashPlugin, LocalExecutor};

/// Counts heap allocations, so a variant can report allocations per call.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to the system allocator unchanged; the counter has no effect on
// the memory handed out.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by one run of `f`.
fn allocations<R>(f: impl FnOnce() -> R) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    black_box(f());
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// The same trivial tool as the `dispatch_overhead` benchmark.
struct Add;

impl Tool for Add {
    type Args = AddArgs;
    type Output = Sum;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Add two integers."
    }

    async fn execute(&self, args: AddArgs, _exec: ExecContext) -> Result<Sum, ToolError> {
        Ok(Sum {
            sum: args.a.wrapping_add(args.b),
        })
    }

    fn render(&self, _args: &Value, value: &Value) -> Vec<ContentBlock> {
        vec![ContentBlock::text(value["sum"].to_string())]
    }
}

/// Where `bash` is on this machine (Debian); only the spawn variants use it.
const BASH_PATH: &str = "/usr/bin/bash";

const ARGUMENTS: &str = r#"{"a": 40, "b": 2}"#;

/// Runs every variant once per round, rotating which goes first, and prints each one's median
/// next to the first variant's.
fn compare(title: &str, unit: &str, rounds: usize, variants: &mut [(&str, &mut Variant<'_>)]) {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..=rounds {
        for k in 0..variants.len() {
            let i = (round + k) % variants.len();
            let sample = (variants[i].1)();
            // Round 0 is the warm-up.
            if round > 0 {
                samples[i].push(sample);
            }
        }
    }
    let medians: Vec<f64> = samples.into_iter().map(bench::median).collect();
    println!("\n{title} (median of {rounds} rounds, interleaved)");
    for ((name, _), median) in variants.iter().zip(&medians) {
        println!(
            "  {name:<58} {median:>10.1} {unit}  x{:.3}",
            median / medians[0]
        );
    }
}

type Variant<'a> = dyn FnMut() -> f64 + 'a;

/// ns per run of `f`, over `n` runs.
fn per_op(n: usize, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn dispatch(runtime: &Runtime) -> Result<()> {
    let registry = ToolRegistry::new();
    registry.register_tool(Add)?;
    let definition = registry
        .get("add", None)
        .ok_or_else(|| anyhow!("add is registered"))?;
    let parameters = definition.parameters().clone();
    let output_schema = definition.output().schema().clone();
    let parsed: Value = serde_json::from_str(ARGUMENTS)?;
    let output = serde_json::to_value(Sum { sum: 42 })?;
    let text_call = || ToolCall::new("call-1", "add", ARGUMENTS, CancellationToken::new());
    let value_call = || ToolCall::new("call-1", "add", parsed.clone(), CancellationToken::new());
    runtime.block_on(registry.execute(text_call()));

    println!("\nallocations per operation (counting allocator)");
    let mut rows: Vec<(&str, u64)> = vec![
        (
            "ToolRegistry::execute, argument text (the benchmark)",
            allocations(|| runtime.block_on(registry.execute(text_call()))),
        ),
        (
            "  building the ToolCall (outside the benchmark's clock)",
            allocations(text_call),
        ),
        (
            "  serde_json::from_str::<Value> of the arguments",
            allocations(|| serde_json::from_str::<Value>(ARGUMENTS)),
        ),
        (
            "  dsh_tools::validate, arguments",
            allocations(|| dsh_tools::validate(&parameters, &parsed)),
        ),
        (
            "  dsh_tools::json::from_value::<AddArgs>",
            allocations(|| dsh_tools::json::from_value::<AddArgs>(&parsed)),
        ),
        (
            "  serde_json::to_value(Sum)",
            allocations(|| serde_json::to_value(Sum { sum: 42 })),
        ),
        (
            "  dsh_tools::validate, output",
            allocations(|| dsh_tools::validate(&output_schema, &output)),
        ),
    ];
    let bash = tool_bash::tool::bash_parameters(true);
    let oracle = jsonschema::draft202012::new(&bash.to_json())
        .map_err(|e| anyhow!("jsonschema rejects the bash schema: {e}"))?;
    let bash_args = json!({"command": "rg -n 'fn validate' crates/", "description": "Find the validator", "timeout_ms": 30000});
    rows.push((
        "dsh_tools::validate, bash schema, 3 properties",
        allocations(|| dsh_tools::validate(&bash, &bash_args)),
    ));
    rows.push((
        "jsonschema validate, same schema and arguments",
        allocations(|| oracle.validate(&bash_args).is_ok()),
    ));
    let integer = ValueSchema::integer();
    let number = json!(30000);
    rows.push((
        "dsh_tools::validate, integer schema, one number",
        allocations(|| dsh_tools::validate(&integer, &number)),
    ));
    for (name, count) in rows {
        println!("  {name:<58} {count:>4}");
    }

    let n = 20_000;
    compare(
        "dispatch: where the time goes",
        "ns/op",
        11,
        &mut [
            (
                "ToolRegistry::execute, argument text (the benchmark)",
                &mut || {
                    let calls: Vec<ToolCall> = (0..n).map(|_| text_call()).collect();
                    runtime.block_on(async {
                        let started = Instant::now();
                        for call in calls {
                            black_box(registry.execute(call).await);
                        }
                        started.elapsed().as_nanos() as f64 / n as f64
                    })
                },
            ),
            (
                "ToolRegistry::execute, parsed arguments (no materialise)",
                &mut || {
                    let calls: Vec<ToolCall> = (0..n).map(|_| value_call()).collect();
                    runtime.block_on(async {
                        let started = Instant::now();
                        for call in calls {
                            black_box(registry.execute(call).await);
                        }
                        started.elapsed().as_nanos() as f64 / n as f64
                    })
                },
            ),
            (
                "serde_json::from_str::<Value> of the arguments",
                &mut || {
                    per_op(n, || {
                        black_box(serde_json::from_str::<Value>(black_box(ARGUMENTS)).is_ok());
                    })
                },
            ),
            ("dsh_tools::validate, arguments", &mut || {
                per_op(n, || {
                    black_box(dsh_tools::validate(&parameters, black_box(&parsed)).is_ok());
                })
            }),
            ("dsh_tools::json::from_value::<AddArgs>", &mut || {
                per_op(n, || {
                    black_box(dsh_tools::json::from_value::<AddArgs>(black_box(&parsed)).is_ok());
                })
            }),
            (
                "serde_json::from_value::<AddArgs>(clone) (what it does first)",
                &mut || {
                    per_op(n, || {
                        black_box(
                            serde_json::from_value::<AddArgs>(black_box(&parsed).clone()).is_ok(),
                        );
                    })
                },
            ),
            ("AddArgs::deserialize(&Value) (no clone)", &mut || {
                per_op(n, || {
                    black_box(AddArgs::deserialize(black_box(&parsed)).is_ok());
                })
            }),
            ("serde_json::to_value(Sum)", &mut || {
                per_op(n, || {
                    black_box(serde_json::to_value(Sum { sum: black_box(42) }).is_ok());
                })
            }),
            ("dsh_tools::validate, output", &mut || {
                per_op(n, || {
                    black_box(dsh_tools::validate(&output_schema, black_box(&output)).is_ok());
                })
            }),
        ],
    );
    Ok(())
}

/// A raw `bash -c true` with some of the tool's process options.
#[derive(Clone, Copy)]
struct Options {
    /// Run `/usr/bin/bash` by its absolute path instead of `bash` (looked up on `PATH`).
    absolute: bool,
    piped: bool,
    group: bool,
    scrubbed_env: bool,
    pre_exec: bool,
}

async fn raw_true(options: Options) -> Result<()> {
    let mut command =
        tokio::process::Command::new(if options.absolute { BASH_PATH } else { "bash" });
    command.args(["-c", "true"]).stdin(Stdio::null());
    if options.group {
        command.process_group(0);
    }
    if options.scrubbed_env {
        let env = tool_bash::env::child_env(
            std::env::vars_os(),
            &Default::default(),
            &Default::default(),
        );
        command.env_clear().envs(env);
    }
    if options.pre_exec {
        // SAFETY: the hook does nothing; it only makes std fork and exec instead of using
        // `posix_spawn`, as the local executor's parent-death hook does.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| Ok(()));
        }
    }
    if options.piped {
        let output = command.output().await?;
        ensure!(output.status.success(), "bash failed");
    } else {
        ensure!(command.status().await?.success(), "bash failed");
    }
    Ok(())
}

fn spawn(runtime: &Runtime) -> Result<()> {
    let executor = LocalExecutor::default();
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(executor.clone())))?;
    let calls = 10;
    let raw = |options: Options| {
        move || {
            runtime.block_on(async {
                let started = Instant::now();
                for _ in 0..calls {
                    if let Err(error) = raw_true(options).await {
                        println!("variant failed: {error}");
                    }
                }
                started.elapsed().as_secs_f64() * 1e6 / calls as f64
            })
        }
    };
    let none = Options {
        absolute: false,
        piped: false,
        group: false,
        scrubbed_env: false,
        pre_exec: false,
    };
    let all = Options {
        absolute: false,
        piped: true,
        group: true,
        scrubbed_env: true,
        pre_exec: true,
    };
    let mut baseline = raw(none);
    let mut piped = raw(Options {
        piped: true,
        ..none
    });
    let mut group = raw(Options {
        group: true,
        ..none
    });
    let mut env = raw(Options {
        scrubbed_env: true,
        ..none
    });
    let mut fork = raw(Options {
        pre_exec: true,
        ..none
    });
    let mut combined = raw(all);
    let mut env_absolute = raw(Options {
        scrubbed_env: true,
        absolute: true,
        ..none
    });
    let mut all_but_fork = raw(Options {
        pre_exec: false,
        absolute: true,
        ..all
    });
    let mut executor_run = || {
        runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..calls {
                let spec = executor.resolve(ShellRequest::new("true"), None);
                if let Ok(spec) = spec {
                    black_box(executor.run(spec).await.is_ok());
                }
            }
            started.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
    };
    let mut tool = || {
        runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..calls {
                let args = r#"{"command": "true", "description": "Do nothing"}"#;
                let call = ToolCall::new("c1", "bash", args, CancellationToken::new());
                black_box(registry.execute(call).await);
            }
            started.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
    };
    compare(
        "bash_spawn: raw `bash -c true` with the tool's options, one at a time",
        "µs/call",
        21,
        &mut [
            (
                "raw: status(), stdin null (the benchmark's baseline)",
                &mut baseline,
            ),
            ("raw + stdout/stderr piped and read (output())", &mut piped),
            ("raw + process_group(0)", &mut group),
            ("raw + env_clear + scrubbed env (PATH set)", &mut env),
            ("raw + pre_exec hook (fork+exec, no posix_spawn)", &mut fork),
            ("raw + all four", &mut combined),
            (
                "raw + scrubbed env, bash by absolute path",
                &mut env_absolute,
            ),
            (
                "raw + all but pre_exec, bash by absolute path",
                &mut all_but_fork,
            ),
            (
                "LocalExecutor::run (resolve + run, no registry)",
                &mut executor_run,
            ),
            ("bash tool through ToolRegistry::execute", &mut tool),
        ],
    );
    Ok(())
}

/// What one read of a finished background job that wrote 1 MiB of zeros says about the bytes
/// it could not show.
fn job_read(runtime: &Runtime) -> Result<()> {
    use dsh_tools::jobs::{JobRuntime, JobsConfig};
    let jobs = JobRuntime::new(JobsConfig::default());
    let registry = ToolRegistry::new();
    registry
        .global_scope()
        .load(BashPlugin::new(Arc::new(LocalExecutor::default())).with_jobs(jobs.clone()))?;
    registry
        .global_scope()
        .load(tool_bash::JobToolsPlugin::new(jobs.clone()))?;
    let args = r#"{"command": "head -c 1048576 /dev/zero", "description": "Write zeros", "run_in_background": true}"#;
    let read = runtime.block_on(async {
        let result = registry
            .execute(ToolCall::new("c1", "bash", args, CancellationToken::new()))
            .await;
        let id = result
            .value
            .as_deref()
            .and_then(|v| v["jobId"].as_str().map(str::to_owned))
            .ok_or_else(|| anyhow!("no job id: {:?}", result.content))?;
        let never = CancellationToken::new();
        jobs.wait(&id, std::time::Duration::from_secs(60), None, &never)
            .await?;
        anyhow::Ok(jobs.read(&id, None)?)
    })?;
    let zeros = read.text.bytes().filter(|b| *b == 0).count();
    let notice: String = read.text.chars().filter(|c| *c != '\0').collect();
    println!("\njobs: one read of a finished job that wrote 1048576 bytes of zeros");
    println!("  bytes of output in the text: {zeros}");
    println!("  everything else in the text: {notice:?}");
    println!(
        "  mentions the skipped bytes or the spill file: {}",
        notice.contains("skipped") || notice.contains("spill")
    );
    runtime.block_on(jobs.teardown());
    Ok(())
}

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    dispatch(&runtime)?;
    job_read(&runtime)?;
    spawn(&runtime)?;
    Ok(())
}
