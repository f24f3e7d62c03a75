//! Build IDs and pod-template hashes.
