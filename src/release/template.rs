//! CVO template rendering (placeholder).
