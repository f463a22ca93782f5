//! The run-level task graph and the executor that walks it (placeholder).
