//! A stand-in for a user's crate that depends on the dsh library crates.
//!
//! It has no code of its own: its tests deserialise the shapes HTTP clients and model SDKs use
//! (untagged and internally tagged enums, flattened structs, each carrying an `f64`) with plain
//! `serde_json::from_str`, in a dependency graph that contains every library crate. Cargo
//! unifies features across that graph, so a library that enabled `serde_json`'s
//! `arbitrary_precision` would make them fail.
//!
//! Unsafe budget: 0 — none.
