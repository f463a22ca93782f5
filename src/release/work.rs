//! The loader's work, counted, so that a test holds it linear in its input without timing it.
//!
//! A file of 100,000 small documents once took 7 minutes to load: each document's identity was
//! compared with every document before it, and each template action's line was counted from
//! the start of the file. Both are invisible in a small release and cost the square of the
//! input in a large one. The scans that could repeat that mistake report here what they cost:
//! bytes of text scanned (line numbering, template actions, document splitting, YAML parsing)
//! and object identities compared. The loader's tests read the counts for inputs of two sizes
//! and fail when the work per document grows with the file.
//!
//! Counted only in this crate's unit tests (`cfg(test)`), per thread so that tests running side
//! by side do not see each other's work; in every other build each call is empty.

/// What [`measure`] counted.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Bytes of text scanned.
    pub bytes: u64,
    /// Object identities compared for equality.
    pub comparisons: u64,
}

#[cfg(test)]
thread_local! {
    static WORK: std::cell::Cell<Work> = const { std::cell::Cell::new(Work { bytes: 0, comparisons: 0 }) };
}

/// `bytes` bytes of text were scanned.
#[inline(always)]
pub fn scanned(bytes: usize) {
    #[cfg(test)]
    WORK.with(|w| {
        let mut work = w.get();
        work.bytes += bytes as u64;
        w.set(work);
    });
    #[cfg(not(test))]
    let _ = bytes;
}

/// Two object identities were compared.
#[inline(always)]
pub fn compared() {
    #[cfg(test)]
    WORK.with(|w| {
        let mut work = w.get();
        work.comparisons += 1;
        w.set(work);
    });
}

/// Runs `f` on this thread and returns what it did with the work it counted.
#[cfg(test)]
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Work) {
    WORK.with(|w| w.set(Work::default()));
    let out = f();
    (out, WORK.with(|w| w.get()))
}
