//! CI validation rules over a loaded release (placeholder).
