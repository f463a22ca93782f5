//! Loading releases: the real corpus, hostile input and a seeded mutation test. No cluster.

#[path = "../common/mod.rs"]
mod common;

mod corpus_load;
mod hostile_input;
mod mutation_load;
