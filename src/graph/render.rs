//! Drawing a [`TaskGraph`] for `cvo graph`: text, Graphviz DOT, Mermaid, JSON (placeholder).
