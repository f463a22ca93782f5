//! A tiny seeded xorshift64* generator: uids, generated names and fault probabilities are
//! reproducible for a given seed, with no extra dependency.

/// xorshift64* state.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is remapped: xorshift must not start at 0).
    pub fn new(seed: u64) -> Self {
        XorShift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A UUID-shaped (version 4 layout) string.
    pub fn uuid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
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
    pub fn name_suffix(&mut self, n: usize) -> String {
        const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| ALPHA[(self.next_u64() % ALPHA.len() as u64) as usize] as char)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn deterministic_and_in_range() {
        let mut a = super::XorShift::new(7);
        let mut b = super::XorShift::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        assert!(
            (0..1000)
                .map(|_| a.next_f64())
                .all(|f| (0.0..1.0).contains(&f))
        );
        assert_eq!(a.uuid().len(), 36);
    }
}
