//! YAML documents (placeholder).
