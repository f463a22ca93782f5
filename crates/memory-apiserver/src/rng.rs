//! Seeded randomness: uids, generated names and fault probabilities are reproducible for a
//! given seed ([`crate::Config::seed`]). A thin layer over `fastrand::Rng::with_seed`, adding
//! the two shapes the API server hands out.

/// The server's random source.
#[derive(Debug, Clone)]
pub(crate) struct Rng(fastrand::Rng);

impl Rng {
    /// A generator from `seed`: the same seed gives the same sequence.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(fastrand::Rng::with_seed(seed))
    }
    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        self.0.f64()
    }
    /// A UUID-shaped (version 4 layout) string.
    pub(crate) fn uuid(&mut self) -> String {
        let a = self.0.u64(..);
        let b = self.0.u64(..);
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }
    /// `n` characters from the alphabet kube uses for `generateName` suffixes.
    pub(crate) fn name_suffix(&mut self, n: usize) -> String {
        const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| ALPHA[self.0.usize(..ALPHA.len())] as char)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.uuid(), b.uuid());
        assert_eq!(a.name_suffix(5), b.name_suffix(5));
        assert!(
            (0..1000)
                .map(|_| a.next_f64())
                .all(|f| (0.0..1.0).contains(&f))
        );
        let uuid = a.uuid();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4", "{uuid}");
        assert!(Rng::new(8).uuid() != Rng::new(7).uuid());
    }
}
