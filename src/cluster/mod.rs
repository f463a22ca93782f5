//! Everything that talks to a Kubernetes API server (placeholder).
