//! Generators of the repository's checked-in copies: every CRD file from the Rust types
//! ([`crds`]) and every Argo CD Lua copy from `lua/` ([`lua`]). `tests/crds.rs` fails when a
//! copy drifts and rewrites them all with [`lua::REGENERATE`].

pub mod crds;
pub mod lua;
