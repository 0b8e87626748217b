//! bosun's benchmark and chaos harnesses (binaries `bosun-bench` and `bosun-chaos`), on the
//! project's real test control plane.
pub mod ansible_flavour;
pub mod chaos;
pub mod measure;
pub mod pg;
