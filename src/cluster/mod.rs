//! Everything that talks to a Kubernetes API server. [`memory`] is the embedded in-memory API
//! server used by `cvo apply --in-memory`, `cvo dev-apiserver` and the test suites.

pub mod memory;
